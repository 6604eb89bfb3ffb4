// Rotary position embedding, in place, on a slice of the last axis.
//
// DeepSeek rotates interleaved pairs (x[2i], x[2i+1]) by angle position * inv_freq[i]; the
// non-interleaved form (x[i], x[i + d/2]) is the Llama convention. Either way the table holds
// cos/sin per position and frequency, with any YaRN attention factor already folded in.
#include "backend/cpu/ops.h"
#include "core/parallel.h"

namespace dsinfer::backend::cpu {

void rope_inplace(Tensor& x, int64_t begin, const std::vector<int32_t>& positions, const RopeTable& table) {
  expect_f32(x, "rope", "x", 3);
  int64_t T = x.dim(0), G = x.dim(1), D = x.dim(2);
  int64_t half = table.cos.dim(1);
  int64_t max_positions = table.cos.dim(0);
  DSINFER_CHECK(begin >= 0 && begin + 2 * half <= D, "rope: dims [", begin, ", ", begin + 2 * half,
                ") outside a last axis of ", D);
  DSINFER_CHECK(static_cast<int64_t>(positions.size()) == T, "rope: ", positions.size(),
                " positions for ", T, " tokens");
  for (int32_t position : positions)
    DSINFER_CHECK(position >= 0 && position < max_positions, "rope: position ", position,
                  " outside the table of ", max_positions);
  parallel_for(T, 8, [&](int64_t t_begin, int64_t t_end) {
    for (int64_t t = t_begin; t < t_end; ++t) {
      const float* cos = table.cos.data<float>() + positions[t] * half;
      const float* sin = table.sin.data<float>() + positions[t] * half;
      for (int64_t g = 0; g < G; ++g) {
        float* v = x.data<float>() + (t * G + g) * D + begin;
        for (int64_t i = 0; i < half; ++i) {
          int64_t a = table.interleaved ? 2 * i : i;
          int64_t b = table.interleaved ? 2 * i + 1 : i + half;
          float x0 = v[a], x1 = v[b];
          v[a] = x0 * cos[i] - x1 * sin[i];
          v[b] = x1 * cos[i] + x0 * sin[i];
        }
      }
    }
  });
}

}  // namespace dsinfer::backend::cpu
