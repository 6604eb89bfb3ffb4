// vLLM's prompt_logprobs: each prompt token scored against the tokens before it.
//
// A prompt row's logits are not sampled, so they never enter the device sampler (which handles one
// row per sampled sequence). The executor runs the head over a step's scored rows
// (ForwardBatch::scored_rows) kScoreSliceRows at a time, through existing Backend ops (gather_rows,
// linear_f32, to_host), and scores each slice on the host, rows in parallel. So a long prompt never
// holds a [prompt, vocab] tensor (DeepSeek-V3's 129,280 f32 logits are 517 KB a row): a slice is at
// most kScoreSliceRows rows on the device and on the host, whatever the prompt's length.
//
// On a GPU this copies each scored row's logits to the host (the only step that does; decode steps
// never do) and waits for the step there, so a step with scored rows is not overlapped with the
// next. A device op returning only the scores would spare both; the host definition here is what
// it would have to match.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/deepseek_model.h"
#include "model/forward_batch.h"
#include "runtime/request.h"

namespace dsinfer::runtime {

inline constexpr int64_t kScoreSliceRows = 32;

// One row of raw logits [V] f32 scored against `target`: log_softmax at the target (the sampler's
// definition of logprobs, backend.h's SamplingRow step 1, so both agree on the same logits), its
// rank (the tokens whose logit is at least the target's, itself included) and the top_n most likely
// tokens, most likely first, ties to the lower id.
PromptLogprob score_logits(std::span<const float> logits, int32_t target, int top_n);

// The scores of `rows` of the step whose final hidden states are `hidden` ([T, hidden] on the
// model's device, as DeepseekModel::hidden_states left them), in the order of `rows`.
std::vector<PromptLogprob> score_rows(const model::DeepseekModel& model, const Tensor& hidden,
                                      std::span<const model::ScoredRow> rows);

}  // namespace dsinfer::runtime
