// Per-request sampling state (its seeded draws and its penalty history) and the row it contributes
// to a step's SamplingBatch; the backend's sample_tokens does the rest where the logits are.
#pragma once

#include <cstdint>
#include <span>
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

// Appends one row to `batch`: the request's sampling options, its history for the penalties (only
// when it has a penalty), its logit_bias, `banned` (the stop tokens while fewer than min_tokens were
// generated), the row's uniform draw and how many top logprobs it wants (-1: none). The backend's
// sample_tokens then does what the engine used to do on the host (backend.h, SamplingRow). A row's
// bitmask (structured output) is the engine's to add.
void append_sampling_row(backend::SamplingBatch& batch, const SamplingOptions& options, const SamplerState& state,
                         std::span<const LogitBias> logit_bias, std::span<const int32_t> banned, float uniform,
                         int top_logprobs);

// Row b of a step's sampled tokens as the request's TokenLogprob.
TokenLogprob row_logprobs(const backend::SampledTokens& sampled, int64_t row, int top_n);

backend::SamplingParams to_sampling_params(const SamplingOptions& options);

}  // namespace dsinfer::runtime
