// Backend::fill_uniform on the CPU.
#include "backend/cpu/random_fill.h"

#include "backend/cpu/ops.h"
#include "core/parallel.h"

namespace dsinfer::backend::cpu {

void fill_uniform(Tensor& t, uint64_t seed, float low, float high) {
  DSINFER_CHECK(t.dtype() == DType::kF32 || t.dtype() == DType::kBF16 || t.dtype() == DType::kF8E4M3,
                "fill_uniform: unsupported dtype ", dtype_name(t.dtype()));
  parallel_for(t.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float value = uniform_at(seed, static_cast<uint64_t>(i), low, high);
      switch (t.dtype()) {
        case DType::kF32: t.data<float>()[i] = value; break;
        case DType::kBF16: t.data<uint16_t>()[i] = f32_to_bf16(value); break;
        default: t.data<uint8_t>()[i] = f32_to_fp8e4m3(value); break;
      }
    }
  });
}

}  // namespace dsinfer::backend::cpu
