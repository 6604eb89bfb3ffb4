// The feed-forward half of a decoder layer: a dense SiLU-gated MLP, or DeepSeekMoE (routed
// experts chosen per token plus shared experts that every token passes through).
//
// Sharded (parallel/parallel_config.h): a dense MLP holds a slice of the intermediate columns (or all
// of them under DP attention) and sums its partial outputs over every rank; a MoE layer holds a
// slice of the routed experts (by expert or along I), gathers the tokens of every DP group first
// under DP attention, and sums the routed and shared experts' partial outputs in one all-reduce.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/weights.h"

namespace dsinfer::model {

class DenseMlp {
 public:
  // prefix: "model.layers.N.mlp." or "...mlp.shared_experts."
  DenseMlp(const WeightLoader& weights, const std::string& prefix);
  Tensor forward(const Tensor& x) const;  // [T, hidden] -> [T, hidden]
  // This rank's share of forward (its columns of I), before the sum over ranks.
  Tensor partial(const Tensor& x) const;
  // Whether the ranks split it (their partial outputs must be summed).
  bool split() const { return split_; }

 private:
  backend::Backend& backend_;
  parallel::Communicator* world_;
  bool split_;
  backend::LinearWeight gate_up_;  // [2I, hidden]: gate_proj rows then up_proj rows (this rank's I)
  backend::LinearWeight down_;     // [hidden, I]
};

class Moe {
 public:
  // prefix: "model.layers.N.mlp." of checkpoint layer `layer` (its EPLB placement, if any, is
  // RankPlan::placement(layer)).
  Moe(const WeightLoader& weights, const std::string& prefix, int64_t layer);
  Tensor forward(const Tensor& x) const;                         // [T, hidden] -> [T, hidden]
  // The router's choices of each logical expert over every step so far, [E] int64 on the device;
  // undefined unless the rank plan counts them (RankPlan::count_expert_load).
  const Tensor& expert_load() const { return load_; }
  // Loads this rank's experts of `placement` (null: the contiguous split, no replicas) from
  // `weights` in place of the ones it holds: EPLB's rebalancing, between steps.
  void place_experts(const WeightLoader& weights, const parallel::ExpertPlacement* placement);

 private:
  // The routing of tokens [T, hidden]: the router's choices, as stack ids under EPLB.
  backend::Routing route(const Tensor& tokens) const;
  // The routed experts' partial output for x, and for every DP group's tokens under DP attention.
  Tensor routed(const Tensor& x, int64_t* first_row) const;
  // The routed and shared experts' whole output for x, the routed ones through dispatch and combine
  // (through the peer buffers, with the shared expert queued between send and receive).
  Tensor dispatched(const Tensor& x) const;
  // The routed experts' whole output for x through the chunked peer buffers, a round per chunk of
  // the step's largest rank; the shared expert's output in *shared, queued during the first round.
  Tensor in_chunks(const Tensor& x, Tensor* shared) const;

  backend::Backend& backend_;
  parallel::RankPlan plan_;
  backend::RouterParams router_;
  std::string prefix_;  // "model.layers.N.mlp."
  int64_t layer_;
  backend::LinearWeight gate_;  // [E, hidden] f32: the router runs in float32
  Tensor score_bias_;           // [E] e_score_correction_bias (V3), undefined otherwise
  backend::ExpertStack experts_;  // this rank's experts (first_expert on), or its columns of each
  // EPLB (expert parallelism with replicas): route's logical ids -> physical slots (map_expert_ids);
  // undefined without a placement, when the stack's ids are the logical ones.
  Tensor replica_start_, replica_slots_;
  Tensor load_;  // [E] int64 on the device, or undefined
  int64_t slots_per_rank_ = 0;  // the stack's size on every rank (dispatch: slot s is rank s / this)
  std::unique_ptr<DenseMlp> shared_;  // null when n_shared_experts == 0
  ExpertObserver* observer_ = nullptr;  // ModelOptions::expert_observer
};

// Either of the two, as the layer index says.
class FeedForward {
 public:
  // moe_layer: the checkpoint layer's index when its feed-forward is DeepSeekMoE; empty: a dense MLP.
  FeedForward(const WeightLoader& weights, const std::string& prefix, std::optional<int64_t> moe_layer);
  Tensor forward(const Tensor& x) const { return moe_ ? moe_->forward(x) : dense_->forward(x); }
  const Moe* moe() const { return moe_.get(); }  // null for a dense MLP
  Moe* moe() { return moe_.get(); }

 private:
  std::unique_ptr<DenseMlp> dense_;
  std::unique_ptr<Moe> moe_;
};

}  // namespace dsinfer::model
