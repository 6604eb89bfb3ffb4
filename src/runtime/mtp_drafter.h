// The draft side of speculative decoding (speculative.h): after the target model has run a step
// and sampled its rows, accept each sequence's drafts and propose the next ones with the model's
// MTP modules.
//
// MTP module k at position p takes the target's hidden state at p and the token at p + 1, and
// predicts the token at p + 2; its attention reads its own cache layer. So after every step:
//   1. extend: the module runs over every token row of the step (prompt chunks included, so that its
//      cache layer follows the target's), each row with the token that follows it: the next prompt
//      token, or the token the step emits there. A piece with drafts has emitted t_0..t_k at rows
//      0..k; its rows past k are rolled back (their cache rows are written again by the next step).
//      The module's top-1 at a sequence's last emitted row is its first draft. Under strict
//      acceptance every row emits its own sample, so this pass is queued on the device's samples
//      before the host has seen them (placeholders), and one wait brings both;
//   2. chain (N > 1): draft c + 1 comes from module 0 (Eagle) or module c (vanilla) one position on,
//      from the previous module's residual and draft c, one row per sequence; each pass reads the
//      last one's top-1 on the device, so all are queued before one wait.
// Drafts are greedy (the module's top-1): a one-hot proposal, which keeps acceptance exact.
// The chained rows write the module's cache past the step's last token, up to N - 1 positions
// further: the engine reserves those slots (Sequence::reserve_ahead).
#pragma once

#include "model/decode_graphs.h"
#include "model/deepseek_model.h"
#include "runtime/executor.h"

namespace dsinfer::runtime {

class MtpDrafter {
 public:
  // model must have the modules config needs (one for Eagle, N for vanilla).
  MtpDrafter(const model::DeepseekModel& model, model::LatentCache& cache, SpeculativeConfig config);

  // The step `batch` ran with `hidden` its final hidden states [T, hidden] (on the device) and
  // `sampled` the sampling of its rows, queued (with top tokens where relaxed acceptance needs them).
  // graphs: the verification graphs that replayed the step, whose MTP graph then runs the module's
  // pass over it (null: the step ran eagerly, and so does the pass).
  SpeculativeResult draft(const model::ForwardBatch& batch, const Tensor& hidden,
                          std::unique_ptr<backend::PendingTokens> sampled, const SpeculativeStep& step,
                          model::DecodeGraphs* graphs = nullptr);

 private:
  // The modules' greedy tokens at logits' rows, queued.
  std::unique_ptr<backend::PendingTokens> queue_top1(Tensor& logits);
  // Each sequence's acceptance of its drafts against result.sampled, into result.accepted.
  void accept(const SpeculativeStep& step, SpeculativeResult& result) const;

  const model::DeepseekModel& model_;
  model::LatentCache& cache_;
  SpeculativeConfig config_;
};

}  // namespace dsinfer::runtime
