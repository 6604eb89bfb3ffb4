// A multi-token-prediction module (DeepSeek-V3): predicts the token after next from the main
// model's final hidden state at position i and the embedding of token i + 1.
//
//   h = eh_proj([enorm(embed(token[i + 1])), hnorm(hidden[i])])   [T, hidden]
//   h = decoder_layer(h)                                           (its own latent cache layer)
//   logits = shared_head.head(shared_head.norm(h))
// Stored as checkpoint layer num_hidden_layers + k.
#pragma once

#include <memory>
#include <string>

#include "model/decoder_layer.h"

namespace dsinfer::model {

class MtpModule {
 public:
  // embed/head: the main model's, used when the module stores none of its own.
  MtpModule(const WeightLoader& weights, int64_t layer_index, const backend::LinearWeight& embed,
            const backend::LinearWeight& head);

  // The block: eh_proj and the decoder layer -> the residual [T, hidden]. previous_hidden [T, hidden]:
  // the main model's normed output (or a chained module's residual) for the positions of batch;
  // batch.token_ids are the tokens one step ahead. It reads no logit rows, so a CUDA graph can hold it.
  Tensor block(const Tensor& previous_hidden, const ForwardBatch& batch, Tensor& cache,
               const backend::RopeTable& rope) const;
  // The head over the block's residual: its norm, and the logits of batch.logit_rows.
  ForwardResult head(const Tensor& residual, const ForwardBatch& batch) const;

 private:
  backend::Backend& backend_;
  float eps_;
  backend::LinearWeight embed_, head_, eh_proj_;
  Tensor enorm_, hnorm_, head_norm_;
  std::unique_ptr<DecoderLayer> layer_;
};

}  // namespace dsinfer::model
