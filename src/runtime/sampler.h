// Per-request sampling state and the logit processing that runs before the sampling op:
// repetition, frequency and presence penalties, min_tokens, and logprobs of the raw logits.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"
#include "runtime/uniform_source.h"
#include "runtime/request.h"

namespace dsinfer::runtime {

struct SamplerState {
  explicit SamplerState(uint64_t seed = 0) : uniforms(seed) {}
  UniformSource uniforms;
  std::unordered_map<int32_t, int32_t> output_counts;  // for frequency/presence penalties
  std::unordered_set<int32_t> seen;                    // prompt and output, for the repetition penalty
};

// Sets up the state for a request's prompt (the repetition penalty also covers prompt tokens).
void init_sampler(SamplerState& state, const SamplingOptions& options, const std::vector<int32_t>& prompt);
void record_token(SamplerState& state, const SamplingOptions& options, int32_t token);

// In place on one row of host logits [vocab]. `banned` (the stop tokens while fewer than
// min_tokens were generated) get -inf.
void process_logits(float* logits, int64_t vocab, const SamplingOptions& options, const SamplerState& state,
                    const std::vector<int32_t>& banned);

// log_softmax of raw logits at `token`, and the top_n most likely tokens.
TokenLogprob token_logprobs(const float* logits, int64_t vocab, int32_t token, int top_n);

backend::SamplingParams to_sampling_params(const SamplingOptions& options);

}  // namespace dsinfer::runtime
