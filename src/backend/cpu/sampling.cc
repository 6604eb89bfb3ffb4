// Token sampling: greedy, or temperature + top-k + top-p + min-p with one uniform draw per row.
//
// Filters apply in that order to the temperature-scaled softmax, the survivors are renormalised
// and the draw u in [0, 1) picks by inverse CDF over them in descending probability, so the same
// logits and draw always give the same token.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/ops.h"
#include "core/parallel.h"

namespace dsinfer::backend::cpu {
namespace {

int32_t argmax(const float* row, int64_t V) {
  return static_cast<int32_t>(std::max_element(row, row + V) - row);  // first maximum
}

int32_t sample_row(const float* row, int64_t V, const SamplingParams& params, float uniform) {
  if (params.temperature <= 0.0f || params.top_k == 1) return argmax(row, V);
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); };
  int64_t kept = V;
  if (params.top_k > 0 && params.top_k < V) {
    kept = params.top_k;
    std::partial_sort(order.begin(), order.begin() + kept, order.end(), by_logit);
  } else {
    std::sort(order.begin(), order.end(), by_logit);
  }
  std::vector<double> probs(kept);
  double max_logit = row[order[0]], total = 0.0;
  for (int64_t i = 0; i < kept; ++i) total += probs[i] = std::exp((row[order[i]] - max_logit) / params.temperature);
  for (double& p : probs) p /= total;
  if (params.top_p < 1.0f) {
    double cumulative = 0.0;
    int64_t cut = 0;
    while (cut < kept && cumulative < params.top_p) cumulative += probs[cut++];
    kept = std::max<int64_t>(cut, 1);
  }
  if (params.min_p > 0.0f) {
    double threshold = params.min_p * probs[0];
    int64_t cut = 1;
    while (cut < kept && probs[cut] >= threshold) ++cut;
    kept = cut;
  }
  double mass = std::accumulate(probs.begin(), probs.begin() + kept, 0.0);
  double target = std::clamp(static_cast<double>(uniform), 0.0, 1.0) * mass;
  double cumulative = 0.0;
  for (int64_t i = 0; i < kept; ++i) {
    cumulative += probs[i];
    if (target < cumulative) return order[i];
  }
  return order[kept - 1];
}

}  // namespace

Tensor sample(const Tensor& logits, const std::vector<SamplingParams>& params, const std::vector<float>& uniforms) {
  expect_f32(logits, "sample", "logits", 2);
  int64_t B = logits.dim(0), V = logits.dim(1);
  DSINFER_CHECK(static_cast<int64_t>(params.size()) == B && static_cast<int64_t>(uniforms.size()) == B,
                "sample: ", B, " rows but ", params.size(), " parameter sets and ", uniforms.size(), " draws");
  Tensor out = Tensor::empty(DType::kI32, {B});
  parallel_for(B, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b)
      out.data<int32_t>()[b] = sample_row(logits.data<float>() + b * V, V, params[b], uniforms[b]);
  });
  return out;
}

}  // namespace dsinfer::backend::cpu
