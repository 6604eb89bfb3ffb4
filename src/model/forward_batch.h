// What one forward step computes: the tokens, where they sit, and which rows need logits.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"

namespace dsinfer::model {

// Which MLA form computes attention. kAuto: a sequence that adds at most kMaxAbsorbedQueryLen
// tokens (a decode, or the verification of a few draft tokens) attends in the absorbed form over
// the latent cache; longer ones (prompt chunks) in the expanded form. The choice depends on the
// sequence alone, so its numbers do not depend on what else is in the batch.
enum class AttentionMode : uint8_t { kAuto, kExpanded, kAbsorbed };
inline constexpr int32_t kMaxAbsorbedQueryLen = 4;

// A row scored against the token that follows it instead of sampled (vLLM's prompt_logprobs): the
// executor runs the head over such rows in bounded slices and hands back only the token's logprob,
// its rank and the top_n most likely tokens, never the logits (runtime/prompt_scores.h).
struct ScoredRow {
  int32_t row = 0;     // of [0, T)
  int32_t target = 0;  // the token after it
  int32_t top_n = 0;   // most likely tokens wanted besides the target
};

struct ForwardBatch {
  std::vector<int32_t> token_ids;      // [T]
  backend::AttentionBatch attention;   // positions, context lengths, pages, slots of the T tokens
  std::vector<int32_t> logit_rows;     // rows of [0, T) whose logits are wanted, in the caller's order
  std::vector<ScoredRow> scored_rows;  // rows to score, in the caller's order (not part of begin_step)
  AttentionMode mode = AttentionMode::kAuto;
  // Op by op even where a decode graph could replay the step: the ranks of a sharded step must all
  // take the path a graph holds, or none (runtime/sharded_executor.h).
  bool eager = false;
  // Called with each decoder layer's index once the layer has run, on the thread that runs the step
  // (the prefill side of disaggregation posts a layer's KV pages then: runtime/kv_handoff.h). On the
  // CPU the layer's cache rows are written by then; on a GPU only queued.
  std::function<void(int64_t layer)> after_layer;

  // The form of each sequence, as BatchBuilder lays the batch out: sequences [0, absorbed_sequences)
  // (token rows [0, absorbed_tokens)) attend absorbed, the rest expanded. When both kinds are present
  // the two parts are also given as batches of their own, so attention reads slices, never gathers.
  int32_t absorbed_sequences = 0;
  int32_t absorbed_tokens = 0;
  backend::AttentionBatch absorbed_part;  // set only in a mixed step
  backend::AttentionBatch expanded_part;  // set only in a mixed step

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  bool mixed() const { return absorbed_sequences > 0 && absorbed_sequences < attention.num_sequences(); }
  // What the backend uploads once per forward pass.
  backend::StepContext step_context() const {
    backend::StepContext step{token_ids, logit_rows, {&attention}};
    if (mixed()) step.batches.insert(step.batches.end(), {&absorbed_part, &expanded_part});
    return step;
  }
};

struct ForwardResult {
  Tensor hidden;  // [T, hidden] after the final norm: what the MTP modules take (on the device)
  Tensor logits;  // [logit_rows, vocab] float32: on the host from forward(), on the device from
                  // forward_on_device() (where the sampler reads them)
  Tensor residual;  // MTP modules only: [T, hidden], the block's output before the head's norm,
                    // what a chained draft takes as its previous hidden state (on the device)
};

// The step's token ids on the device (the copy begin_step uploaded).
inline Tensor step_token_ids(backend::Backend& backend, const ForwardBatch& batch) {
  auto T = batch.num_tokens();
  return backend.to_device(
      Tensor::wrap(const_cast<int32_t*>(batch.token_ids.data()), DType::kI32, {T}, Device::kCpu, nullptr));
}

// head(hidden[logit_rows]) -> [rows, vocab] float32, on the device.
inline Tensor head_logits(backend::Backend& backend, const Tensor& hidden, const ForwardBatch& batch,
                          const backend::LinearWeight& head) {
  return backend.linear_f32(backend.gather_rows(hidden, batch.logit_rows), head);
}

}  // namespace dsinfer::model
