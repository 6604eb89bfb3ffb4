// The feed-forward half of a decoder layer: a dense SiLU-gated MLP, or DeepSeekMoE (routed
// experts chosen per token plus shared experts that every token passes through).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/weights.h"

namespace dsinfer::model {

class DenseMlp {
 public:
  // prefix: "model.layers.N.mlp." or "...mlp.shared_experts."
  DenseMlp(const WeightLoader& weights, const std::string& prefix);
  Tensor forward(const Tensor& x) const;  // [T, hidden] -> [T, hidden]

 private:
  backend::Backend& backend_;
  backend::LinearWeight gate_up_;  // [2I, hidden]: gate_proj rows then up_proj rows
  backend::LinearWeight down_;     // [hidden, I]
};

class Moe {
 public:
  Moe(const WeightLoader& weights, const std::string& prefix);  // prefix: "model.layers.N.mlp."
  Tensor forward(const Tensor& x) const;                         // [T, hidden] -> [T, hidden]

 private:
  backend::Backend& backend_;
  backend::RouterParams router_;
  backend::LinearWeight gate_;  // [E, hidden] f32: the router runs in float32
  Tensor score_bias_;           // [E] e_score_correction_bias (V3), undefined otherwise
  backend::ExpertStack experts_;
  std::unique_ptr<DenseMlp> shared_;  // null when n_shared_experts == 0
};

// Either of the two, as the layer index says.
class FeedForward {
 public:
  FeedForward(const WeightLoader& weights, const std::string& prefix, bool moe);
  Tensor forward(const Tensor& x) const { return moe_ ? moe_->forward(x) : dense_->forward(x); }

 private:
  std::unique_ptr<DenseMlp> dense_;
  std::unique_ptr<Moe> moe_;
};

}  // namespace dsinfer::model
