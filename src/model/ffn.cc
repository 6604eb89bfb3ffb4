#include "model/ffn.h"

namespace dsinfer::model {
namespace {

backend::RouterParams router_params(const io::ModelConfig& config) {
  backend::RouterParams params;
  params.scoring = config.scoring_func == io::ScoringFunc::kSigmoid ? backend::Scoring::kSigmoid
                                                                     : backend::Scoring::kSoftmax;
  switch (config.topk_method) {
    case io::TopkMethod::kGreedy: params.selection = backend::ExpertSelection::kGreedy; break;
    case io::TopkMethod::kGroupLimitedGreedy: params.selection = backend::ExpertSelection::kGroupLimitedGreedy; break;
    case io::TopkMethod::kNoauxTc: params.selection = backend::ExpertSelection::kNoauxTc; break;
  }
  params.top_k = static_cast<int>(config.num_experts_per_tok);
  params.n_group = static_cast<int>(config.n_group);
  params.topk_group = static_cast<int>(config.topk_group);
  params.normalize = config.norm_topk_prob && config.num_experts_per_tok > 1;
  params.scaling_factor = static_cast<float>(config.routed_scaling_factor);
  return params;
}

}  // namespace

DenseMlp::DenseMlp(const WeightLoader& weights, const std::string& prefix)
    : backend_(weights.backend()),
      gate_up_(weights.concatenated_rows(prefix + "gate_proj.weight", prefix + "up_proj.weight")),
      down_(weights.linear(prefix + "down_proj.weight")) {}

Tensor DenseMlp::forward(const Tensor& x) const {
  Tensor gate_up = backend_.linear(x, gate_up_);          // [T, 2I]
  return backend_.linear(backend_.silu_mul(gate_up), down_);  // [T, hidden]
}

Moe::Moe(const WeightLoader& weights, const std::string& prefix)
    : backend_(weights.backend()), router_(router_params(weights.config())) {
  const io::ModelConfig& config = weights.config();
  int64_t E = config.n_routed_experts, hidden = config.hidden_size, I = config.moe_intermediate_size;
  weights.expect_shape(prefix + "gate.weight", {E, hidden});
  gate_ = {weights.f32(prefix + "gate.weight"), {}, {}};
  if (config.topk_method == io::TopkMethod::kNoauxTc) {
    weights.expect_shape(prefix + "gate.e_score_correction_bias", {E});
    score_bias_ = weights.f32(prefix + "gate.e_score_correction_bias");
  }
  // Stacked per layer for grouped GEMMs: gate_up [E, 2I, hidden] (gate rows then up rows of each
  // expert) and down [E, hidden, I]. gate and up are stacked as separate halves so that FP8 scale
  // blocks stay aligned for any I.
  std::vector<std::string> gates, ups, downs;
  for (int64_t e = 0; e < E; ++e) {
    std::string expert = prefix + "experts." + std::to_string(e) + ".";
    weights.expect_shape(expert + "gate_proj.weight", {I, hidden});
    weights.expect_shape(expert + "up_proj.weight", {I, hidden});
    weights.expect_shape(expert + "down_proj.weight", {hidden, I});
    gates.push_back(expert + "gate_proj.weight");
    ups.push_back(expert + "up_proj.weight");
    downs.push_back(expert + "down_proj.weight");
  }
  experts_.gate_up = weights.stacked_gate_up(gates, ups);
  experts_.down = weights.stacked(downs);
  if (config.n_shared_experts > 0) shared_ = std::make_unique<DenseMlp>(weights, prefix + "shared_experts.");
}

Tensor Moe::forward(const Tensor& x) const {
  Tensor logits = backend_.linear_f32(x, gate_);                              // [T, E] f32
  backend::Routing routing = backend_.route(logits, score_bias_, router_);    // [T, top_k] ids, weights
  Tensor out = backend_.moe_experts(x, routing, experts_);                    // [T, hidden]
  if (shared_) backend_.add_inplace(out, shared_->forward(x));
  return out;
}

FeedForward::FeedForward(const WeightLoader& weights, const std::string& prefix, bool moe) {
  if (moe) {
    moe_ = std::make_unique<Moe>(weights, prefix);
  } else {
    dense_ = std::make_unique<DenseMlp>(weights, prefix);
  }
}

}  // namespace dsinfer::model
