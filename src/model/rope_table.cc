#include "model/rope_table.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace dsinfer::model {
namespace {

// YaRN's magnitude correction for a context extended `scale` times.
double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// The dimension (of `dim`) at which a wavelength completes `rotations` turns in `context` tokens.
double correction_dim(double rotations, int64_t dim, double base, double context) {
  return dim * std::log(context / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

}  // namespace

std::vector<float> rope_inverse_frequencies(const io::ModelConfig& config) {
  const io::RopeConfig& rope = config.rope;
  int64_t dim = config.qk_rope_head_dim;
  int64_t pairs = dim / 2;
  auto base = static_cast<float>(rope.theta);
  std::vector<float> inv_freq(pairs);
  for (int64_t i = 0; i < pairs; ++i) {
    float position_freq = std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dim));
    inv_freq[i] = 1.0f / position_freq;
  }
  if (rope.type != "yarn") return inv_freq;

  // YaRN: dimensions that rotate many times within the original context keep their frequency
  // (extrapolation); slow ones are divided by `factor` (interpolation); a linear ramp in between.
  double context = static_cast<double>(rope.original_max_position_embeddings);
  double low = correction_dim(rope.beta_fast, dim, rope.theta, context);
  double high = correction_dim(rope.beta_slow, dim, rope.theta, context);
  if (rope.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  auto factor = static_cast<float>(rope.factor);
  for (int64_t i = 0; i < pairs; ++i) {
    float ramp = std::clamp(static_cast<float>((static_cast<float>(i) - low) / (high - low)), 0.0f, 1.0f);
    float extrapolation_weight = 1.0f - ramp;
    float extrapolated = inv_freq[i];
    float interpolated = 1.0f / (factor * std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dim)));
    inv_freq[i] = interpolated * (1.0f - extrapolation_weight) + extrapolated * extrapolation_weight;
  }
  return inv_freq;
}

float rope_attention_factor(const io::ModelConfig& config) {
  const io::RopeConfig& rope = config.rope;
  if (rope.type != "yarn") return 1.0f;
  if (rope.attention_factor) return static_cast<float>(*rope.attention_factor);
  if (rope.mscale != 0.0 && rope.mscale_all_dim != 0.0)
    return static_cast<float>(yarn_mscale(rope.factor, rope.mscale) / yarn_mscale(rope.factor, rope.mscale_all_dim));
  return static_cast<float>(yarn_mscale(rope.factor, 1.0));
}

backend::RopeTable make_rope_table(const io::ModelConfig& config, int64_t max_positions) {
  std::vector<float> inv_freq = rope_inverse_frequencies(config);
  float attention_factor = rope_attention_factor(config);
  auto pairs = static_cast<int64_t>(inv_freq.size());
  backend::RopeTable table{Tensor::empty(DType::kF32, {max_positions, pairs}),
                           Tensor::empty(DType::kF32, {max_positions, pairs}), config.rope_interleave};
  for (int64_t p = 0; p < max_positions; ++p) {
    for (int64_t i = 0; i < pairs; ++i) {
      float angle = static_cast<float>(p) * inv_freq[i];  // float32 product, as the reference does
      table.cos.data<float>()[p * pairs + i] = std::cos(angle) * attention_factor;
      table.sin.data<float>()[p * pairs + i] = std::sin(angle) * attention_factor;
    }
  }
  return table;
}

}  // namespace dsinfer::model
