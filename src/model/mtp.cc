#include "model/mtp.h"

namespace dsinfer::model {

MtpModule::MtpModule(const WeightLoader& weights, int64_t layer_index, const backend::LinearWeight& embed,
                     const backend::LinearWeight& head)
    : backend_(weights.backend()), eps_(static_cast<float>(weights.config().rms_norm_eps)) {
  std::string prefix = "model.layers." + std::to_string(layer_index) + ".";
  int64_t hidden = weights.config().hidden_size;
  embed_ = weights.contains(prefix + "embed_tokens.weight") ? weights.linear(prefix + "embed_tokens.weight") : embed;
  head_ = weights.contains(prefix + "shared_head.head.weight") ? weights.linear(prefix + "shared_head.head.weight")
                                                                : head;
  enorm_ = weights.f32(prefix + "enorm.weight");
  hnorm_ = weights.f32(prefix + "hnorm.weight");
  weights.expect_shape(prefix + "eh_proj.weight", {hidden, 2 * hidden});
  eh_proj_ = weights.linear(prefix + "eh_proj.weight");
  head_norm_ = weights.f32(prefix + "shared_head.norm.weight");
  layer_ = std::make_unique<DecoderLayer>(weights, layer_index);
}

Tensor MtpModule::block(const Tensor& previous_hidden, const ForwardBatch& batch, Tensor& cache,
                        const backend::RopeTable& rope) const {
  Tensor embedded = backend_.rms_norm(backend_.embedding(embed_.data, step_token_ids(backend_, batch)), enorm_,
                                      eps_);                                              // [T, hidden]
  Tensor previous = backend_.rms_norm(previous_hidden, hnorm_, eps_);                     // [T, hidden]
  Tensor residual = backend_.linear(backend_.concat_last(embedded, previous), eh_proj_);  // [T, hidden]
  layer_->forward(residual, batch, cache, rope);
  return residual;
}

ForwardResult MtpModule::head(const Tensor& residual, const ForwardBatch& batch) const {
  ForwardResult result;
  result.hidden = backend_.rms_norm(residual, head_norm_, eps_);                          // [T, hidden]
  result.logits = head_logits(backend_, result.hidden, batch, head_);
  result.residual = residual;
  return result;
}

}  // namespace dsinfer::model
