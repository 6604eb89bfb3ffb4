// Stored weights to float32: plain conversions, and FP8 E4M3 with 2-D block scales.
//
// Stored tensors are read byte-wise with memcpy, so any Tensor works as input whatever its alignment.
#include "io/weight_format.h"

#include <algorithm>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "core/parallel.h"

namespace dsinfer::io {
namespace {

constexpr int64_t kElementsPerTask = int64_t{1} << 16;

template <typename Bits>
Bits load(const unsigned char* bytes, int64_t index) {
  Bits bits;
  std::memcpy(&bits, bytes + index * static_cast<int64_t>(sizeof(Bits)), sizeof(Bits));
  return bits;
}

// out[i] = decode(stored element i), over all elements in parallel.
template <typename Bits, typename Decode>
void decode_all(const Tensor& stored, float* out, Decode decode) {
  const auto* bytes = static_cast<const unsigned char*>(stored.raw());
  parallel_for(stored.numel(), kElementsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = decode(load<Bits>(bytes, i));
  });
}

// `what` names the tensor in errors.
Tensor convert_to_f32(const Tensor& stored, std::string_view what) {
  DSINFER_CHECK(stored.device() == Device::kCpu, what, ": only CPU tensors can be converted to F32");
  Tensor out = Tensor::empty(DType::kF32, stored.shape());
  float* values = out.data<float>();
  switch (stored.dtype()) {
    case DType::kF32: decode_all<float>(stored, values, [](float value) { return value; }); break;
    case DType::kBF16: decode_all<uint16_t>(stored, values, bf16_to_f32); break;
    case DType::kF16: decode_all<uint16_t>(stored, values, f16_to_f32); break;
    // The raw FP8 value, unscaled: callers with block scales use dequantize_fp8_blocks.
    case DType::kF8E4M3: decode_all<uint8_t>(stored, values, fp8e4m3_to_f32); break;
    default: throw Error(str_cat(what, ": cannot convert ", dtype_name(stored.dtype()), " to F32"));
  }
  return out;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

Tensor to_f32(const Tensor& stored) { return convert_to_f32(stored, "to_f32"); }

Tensor dequantize_fp8_blocks(const Tensor& q, const Tensor& scale_inv, int block_n, int block_k,
                             std::string_view name) {
  DSINFER_CHECK(q.dtype() == DType::kF8E4M3 && q.rank() == 2, name, ": expected 2-D F8_E4M3 weights, got ",
                dtype_name(q.dtype()), " ", q.shape().to_string());
  DSINFER_CHECK(scale_inv.dtype() == DType::kF32 || scale_inv.dtype() == DType::kBF16, name,
                ": scale_inv must be F32 or BF16, got ", dtype_name(scale_inv.dtype()));
  DSINFER_CHECK(block_n > 0 && block_k > 0, name, ": block size ", block_n, "x", block_k,
                " must be positive");
  const int64_t rows = q.dim(0), cols = q.dim(1);
  Shape blocks{ceil_div(rows, block_n), ceil_div(cols, block_k)};
  DSINFER_CHECK(scale_inv.shape() == blocks, name, ": scale_inv shape ", scale_inv.shape().to_string(),
                " does not match ", blocks.to_string(), " (weight ", q.shape().to_string(), " in ", block_n,
                "x", block_k, " blocks)");

  Tensor scales = convert_to_f32(scale_inv, name);  // [rows / block_n, cols / block_k], small
  Tensor out = Tensor::empty(DType::kF32, q.shape());
  const auto* codes = static_cast<const unsigned char*>(q.raw());
  const float* scale = scales.data<float>();
  float* values = out.data<float>();
  int64_t rows_per_task = std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(1, cols));
  parallel_for(rows, rows_per_task, [&](int64_t row_begin, int64_t row_end) {
    for (int64_t row = row_begin; row < row_end; ++row) {
      const float* row_scales = scale + (row / block_n) * blocks[1];
      for (int64_t block = 0; block < blocks[1]; ++block) {
        int64_t col_end = std::min(cols, (block + 1) * block_k);
        for (int64_t col = block * block_k; col < col_end; ++col)
          values[row * cols + col] = fp8e4m3_to_f32(codes[row * cols + col]) * row_scales[block];
      }
    }
  });
  return out;
}

Tensor load_f32(const Checkpoint& checkpoint, std::string_view name, int block_n, int block_k) {
  const TensorInfo& info = checkpoint.info(name);
  if (info.dtype != DType::kF8E4M3) return convert_to_f32(checkpoint.tensor(name), name);
  // NAME.weight pairs with NAME.weight_scale_inv, the published DeepSeek-V3 layout.
  std::string scale_name = str_cat(name, "_scale_inv");
  DSINFER_CHECK(checkpoint.contains(scale_name), checkpoint.dir(), ": tensor ", name,
                " is F8_E4M3 but its scale ", scale_name, " is missing");
  return dequantize_fp8_blocks(checkpoint.tensor(name), checkpoint.tensor(scale_name), block_n, block_k,
                               name);
}

}  // namespace dsinfer::io
