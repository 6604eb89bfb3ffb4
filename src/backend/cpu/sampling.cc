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

// Steps 2 to 4 of SamplingRow on one row, in place.
void apply_penalties(float* row, int64_t V, const SamplingBatch& batch, int b) {
  const SamplingRow& params = batch.rows[b];
  for (int32_t i = batch.history_start[b]; i < batch.history_start[b + 1]; ++i) {
    int32_t token = batch.history_tokens[i];
    if (token < 0 || token >= V) continue;
    float& logit = row[token];
    if (params.repetition_penalty != 1.0f)
      logit = logit > 0 ? logit / params.repetition_penalty : logit * params.repetition_penalty;
    if (int32_t count = batch.history_output_counts[i]; count > 0)
      // One fused multiply-add, spelled out so that every backend rounds it alike.
      logit -= std::fma(params.frequency_penalty, static_cast<float>(count), params.presence_penalty);
  }
  if (!batch.bias_start.empty()) {
    for (int32_t i = batch.bias_start[b]; i < batch.bias_start[b + 1]; ++i) {
      int32_t token = batch.bias_tokens[i];
      if (token >= 0 && token < V) row[token] += batch.bias_values[i];
    }
  }
  for (int32_t i = batch.banned_start[b]; i < batch.banned_start[b + 1]; ++i) {
    int32_t token = batch.banned_tokens[i];
    if (token >= 0 && token < V) row[token] = -INFINITY;
  }
  if (!batch.bitmask_row.empty() && batch.bitmask_row[b] >= 0) {
    const int32_t* mask = batch.bitmask.data() + batch.bitmask_row[b] * SamplingBatch::bitmask_words(V);
    for (int64_t token = 0; token < V; ++token)
      if (!((static_cast<uint32_t>(mask[token >> 5]) >> (token & 31)) & 1u)) row[token] = -INFINITY;
  }
}

// log_softmax of the raw row: the chosen token's value and the top n (ties to the lower id).
void raw_logprobs(const float* row, int64_t V, int32_t token, int n, float* logprob, int32_t* top_ids,
                  float* top_values) {
  float max_logit = *std::max_element(row, row + V);
  double total = 0.0;
  for (int64_t i = 0; i < V; ++i) total += std::exp(static_cast<double>(row[i] - max_logit));
  auto log_normalizer = static_cast<float>(max_logit + std::log(total));
  *logprob = row[token] - log_normalizer;
  if (n <= 0) return;
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  int64_t kept = std::min<int64_t>(n, V);
  std::partial_sort(order.begin(), order.begin() + kept, order.end(),
                    [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  for (int64_t i = 0; i < kept; ++i) {
    top_ids[i] = order[i];
    top_values[i] = row[order[i]] - log_normalizer;
  }
}

}  // namespace

SampledTokens sample_tokens(Tensor& logits, const SamplingBatch& batch) {
  expect_f32(logits, "sample_tokens", "logits", 2);
  int64_t B = logits.dim(0), V = logits.dim(1);
  batch.check_rows(B, V);
  SampledTokens out;
  out.tokens = Tensor::empty(DType::kI32, {B});
  int top_n = batch.max_top_logprobs();
  bool logprobs = batch.any_logprobs();
  // The raw rows logprobs need, before the penalties change them.
  Tensor raw = logprobs ? logits.clone() : Tensor();
  if (logprobs) {
    out.logprobs = Tensor::empty(DType::kF32, {B});
    out.top_ids = Tensor::empty(DType::kI32, {B, top_n});
    out.top_logprobs = Tensor::empty(DType::kF32, {B, top_n});
  }
  parallel_for(B, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      float* row = logits.data<float>() + b * V;
      const SamplingRow& params = batch.rows[b];
      apply_penalties(row, V, batch, static_cast<int>(b));
      int32_t token = sample_row(row, V, params.params, params.uniform);
      out.tokens.data<int32_t>()[b] = token;
      if (params.top_logprobs >= 0)
        raw_logprobs(raw.data<float>() + b * V, V, token, params.top_logprobs, out.logprobs.data<float>() + b,
                     out.top_ids.data<int32_t>() + b * top_n, out.top_logprobs.data<float>() + b * top_n);
    }
  });
  return out;
}


}  // namespace dsinfer::backend::cpu
