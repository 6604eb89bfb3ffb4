#include "model/decoder_layer.h"

namespace dsinfer::model {

namespace {
std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }
}  // namespace

DecoderLayer::DecoderLayer(const WeightLoader& weights, int64_t layer)
    : backend_(weights.backend()),
      eps_(static_cast<float>(weights.config().rms_norm_eps)),
      input_norm_(weights.f32(layer_prefix(layer) + "input_layernorm.weight")),
      post_attention_norm_(weights.f32(layer_prefix(layer) + "post_attention_layernorm.weight")),
      attention_(weights, layer_prefix(layer) + "self_attn."),
      ffn_(weights, layer_prefix(layer) + "mlp.", weights.config().is_moe_layer(layer) ? std::optional(layer) : std::nullopt) {}

void DecoderLayer::forward(Tensor& residual, const ForwardBatch& batch, Tensor& cache,
                           const backend::RopeTable& rope) const {
  Tensor attention = attention_.forward(backend_.rms_norm(residual, input_norm_, eps_), batch, cache, rope);
  Tensor normed = backend_.add_rms_norm_inplace(residual, attention, post_attention_norm_, eps_);
  backend_.add_inplace(residual, ffn_.forward(normed));
}

}  // namespace dsinfer::model
