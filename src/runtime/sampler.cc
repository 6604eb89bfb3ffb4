#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dsinfer::runtime {

void init_sampler(SamplerState& state, const SamplingOptions& options, const std::vector<int32_t>& prompt) {
  if (options.repetition_penalty != 1.0f) state.seen.insert(prompt.begin(), prompt.end());
}

void record_token(SamplerState& state, const SamplingOptions& options, int32_t token) {
  if (options.frequency_penalty != 0.0f || options.presence_penalty != 0.0f) ++state.output_counts[token];
  if (options.repetition_penalty != 1.0f) state.seen.insert(token);
}

void process_logits(float* logits, int64_t vocab, const SamplingOptions& options, const SamplerState& state,
                    const std::vector<int32_t>& banned) {
  // Most requests use no penalty: do not even touch the (cold) bookkeeping then.
  bool penalized = options.repetition_penalty != 1.0f || options.frequency_penalty != 0.0f ||
                   options.presence_penalty != 0.0f;
  if (!penalized && banned.empty()) return;
  // Hugging Face's repetition penalty: positive logits divided, negative ones multiplied.
  for (int32_t token : state.seen) {
    if (token < 0 || token >= vocab) continue;
    float& logit = logits[token];
    logit = logit > 0 ? logit / options.repetition_penalty : logit * options.repetition_penalty;
  }
  // OpenAI's penalties over the output so far.
  for (const auto& [token, count] : state.output_counts) {
    if (token < 0 || token >= vocab) continue;
    logits[token] -= options.frequency_penalty * count + options.presence_penalty;
  }
  for (int32_t token : banned)
    if (token >= 0 && token < vocab) logits[token] = -INFINITY;
}

TokenLogprob token_logprobs(const float* logits, int64_t vocab, int32_t token, int top_n) {
  float max_logit = *std::max_element(logits, logits + vocab);
  double total = 0.0;
  for (int64_t i = 0; i < vocab; ++i) total += std::exp(static_cast<double>(logits[i] - max_logit));
  auto log_normalizer = static_cast<float>(max_logit + std::log(total));
  TokenLogprob out;
  out.token_id = token;
  out.logprob = logits[token] - log_normalizer;
  if (top_n > 0) {
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    int64_t n = std::min<int64_t>(top_n, vocab);
    std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int64_t i = 0; i < n; ++i) out.top.emplace_back(order[i], logits[order[i]] - log_normalizer);
  }
  return out;
}

backend::SamplingParams to_sampling_params(const SamplingOptions& options) {
  backend::SamplingParams params;
  params.temperature = options.temperature;
  params.top_k = options.top_k;
  params.top_p = options.top_p;
  params.min_p = options.min_p;
  return params;
}

}  // namespace dsinfer::runtime
