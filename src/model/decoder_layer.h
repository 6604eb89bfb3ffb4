// One decoder layer: RMSNorm -> MLA -> residual -> RMSNorm -> MLP or MoE -> residual.
#pragma once

#include <string>

#include "model/ffn.h"
#include "model/mla.h"

namespace dsinfer::model {

class DecoderLayer {
 public:
  // prefix: "model.layers.N."; moe: whether this layer's feed-forward is DeepSeekMoE.
  DecoderLayer(const WeightLoader& weights, const std::string& prefix, bool moe);

  // residual [T, hidden] is the running sum of the stream and is updated in place.
  void forward(Tensor& residual, const ForwardBatch& batch, Tensor& cache, const backend::RopeTable& rope) const;

 private:
  backend::Backend& backend_;
  float eps_;
  Tensor input_norm_, post_attention_norm_;
  MlaAttention attention_;
  FeedForward ffn_;
};

}  // namespace dsinfer::model
