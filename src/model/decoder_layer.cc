#include "model/decoder_layer.h"

namespace dsinfer::model {

DecoderLayer::DecoderLayer(const WeightLoader& weights, const std::string& prefix, bool moe)
    : backend_(weights.backend()),
      eps_(static_cast<float>(weights.config().rms_norm_eps)),
      input_norm_(weights.f32(prefix + "input_layernorm.weight")),
      post_attention_norm_(weights.f32(prefix + "post_attention_layernorm.weight")),
      attention_(weights, prefix + "self_attn."),
      ffn_(weights, prefix + "mlp.", moe) {}

void DecoderLayer::forward(Tensor& residual, const ForwardBatch& batch, Tensor& cache,
                           const backend::RopeTable& rope) const {
  Tensor attention = attention_.forward(backend_.rms_norm(residual, input_norm_, eps_), batch, cache, rope);
  Tensor normed = backend_.add_rms_norm_inplace(residual, attention, post_attention_norm_, eps_);
  backend_.add_inplace(residual, ffn_.forward(normed));
}

}  // namespace dsinfer::model
