// One decoder layer: RMSNorm -> MLA -> residual -> RMSNorm -> MLP or MoE -> residual.
#pragma once

#include <string>

#include "model/ffn.h"
#include "model/mla.h"

namespace dsinfer::model {

class DecoderLayer {
 public:
  // Checkpoint layer `layer` ("model.layers.N.", MTP modules' included); its feed-forward is
  // DeepSeekMoE when the config says so.
  DecoderLayer(const WeightLoader& weights, int64_t layer);

  // residual [T, hidden] is the running sum of the stream and is updated in place.
  void forward(Tensor& residual, const ForwardBatch& batch, Tensor& cache, const backend::RopeTable& rope) const;
  const FeedForward& ffn() const { return ffn_; }
  FeedForward& ffn() { return ffn_; }

 private:
  backend::Backend& backend_;
  float eps_;
  Tensor input_norm_, post_attention_norm_;
  MlaAttention attention_;
  FeedForward ffn_;
};

}  // namespace dsinfer::model
