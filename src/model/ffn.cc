#include "model/ffn.h"

#include <algorithm>

#include "parallel/expert_dispatch.h"
#include "parallel/peer_exchange.h"

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
    : backend_(weights.backend()), world_(weights.plan().world) {
  const std::string gate = prefix + "gate_proj.weight";
  const int64_t intermediate = weights.shard_shape(gate, {})[0];
  const parallel::Range columns = weights.plan().place.dense_columns(intermediate);  // this rank's
  split_ = columns.size() < intermediate;
  gate_up_ = weights.concatenated_rows(gate, prefix + "up_proj.weight", WeightShard{columns, {}});
  down_ = weights.linear(prefix + "down_proj.weight", WeightShard{{}, columns});
}

Tensor DenseMlp::partial(const Tensor& x) const {
  Tensor gate_up = backend_.linear(x, gate_up_);              // [T, 2I]
  return backend_.linear(backend_.silu_mul(gate_up), down_);  // [T, hidden]
}

Tensor DenseMlp::forward(const Tensor& x) const {
  Tensor out = partial(x);
  if (split_) parallel::sum_over(world_, out);
  return out;
}

Moe::Moe(const WeightLoader& weights, const std::string& prefix, int64_t layer)
    : backend_(weights.backend()), plan_(weights.plan()), router_(router_params(weights.config())), prefix_(prefix),
      layer_(layer), observer_(weights.expert_observer()) {
  const io::ModelConfig& config = weights.config();
  int64_t E = config.n_routed_experts, hidden = config.hidden_size, I = config.moe_intermediate_size;
  weights.expect_shape(prefix + "gate.weight", {E, hidden});
  gate_ = {weights.f32(prefix + "gate.weight"), {}, {}};
  if (config.topk_method == io::TopkMethod::kNoauxTc) {
    weights.expect_shape(prefix + "gate.e_score_correction_bias", {E});
    score_bias_ = weights.f32(prefix + "gate.e_score_correction_bias");
  }
  for (int64_t e = 0; e < E; ++e) {
    std::string expert = prefix + "experts." + std::to_string(e) + ".";
    weights.expect_shape(expert + "gate_proj.weight", {I, hidden});
    weights.expect_shape(expert + "up_proj.weight", {I, hidden});
    weights.expect_shape(expert + "down_proj.weight", {hidden, I});
  }
  place_experts(weights, plan_.placement(layer));
  if (config.n_shared_experts > 0) shared_ = std::make_unique<DenseMlp>(weights, prefix + "shared_experts.");
  if (plan_.count_expert_load) load_ = backend_.empty(DType::kI64, {E});  // zeros
}

void Moe::place_experts(const WeightLoader& weights, const parallel::ExpertPlacement* placement) {
  const io::ModelConfig& config = weights.config();
  const int64_t E = config.n_routed_experts;
  const parallel::Range held = plan_.place.experts(E), columns = plan_.place.expert_columns(config.moe_intermediate_size);
  // With an EPLB placement this rank holds physical slots [r S, (r + 1) S) instead, each running its
  // logical expert (a hot one may fill several slots, on several ranks).
  std::vector<int64_t> stack;  // the logical expert of each of this rank's stack entries
  if (placement) {
    DSINFER_CHECK(plan_.place.config.expert_parallel && placement->ranks() == plan_.place.config.world_size() &&
                      static_cast<int64_t>(placement->replicas.size()) == E,
                  "layer ", layer_, ": an expert placement of ", placement->replicas.size(), " experts on ",
                  placement->ranks(), " ranks does not fit ", E, " experts under ", plan_.place.config.describe());
    for (int64_t p = 0; p < placement->slots_per_rank; ++p)
      stack.push_back(placement->logical_of[plan_.place.rank * placement->slots_per_rank + p]);
  } else {
    for (int64_t e = held.begin; e < held.end; ++e) stack.push_back(e);
  }
  // Stacked per layer for grouped GEMMs: gate_up [E, 2I, hidden] (gate rows then up rows of each
  // expert) and down [E, hidden, I]. gate and up are stacked as separate halves so that FP8 scale
  // blocks stay aligned for any I.
  std::vector<std::string> gates, ups, downs;
  for (int64_t e : stack) {
    std::string expert = prefix_ + "experts." + std::to_string(e) + ".";
    gates.push_back(expert + "gate_proj.weight");
    ups.push_back(expert + "up_proj.weight");
    downs.push_back(expert + "down_proj.weight");
  }
  experts_.gate_up = weights.stacked_gate_up(gates, ups, WeightShard{columns, {}});
  experts_.down = weights.stacked(downs, WeightShard{{}, columns});
  experts_.first_expert = placement ? int64_t{plan_.place.rank} * placement->slots_per_rank : held.begin;
  slots_per_rank_ = static_cast<int64_t>(stack.size());
  replica_start_ = replica_slots_ = Tensor();
  if (placement) {
    const parallel::ReplicaTable table = parallel::replica_table(*placement);
    auto int32s = [](const std::vector<int32_t>& values) {
      return Tensor::wrap(const_cast<int32_t*>(values.data()), DType::kI32, {static_cast<int64_t>(values.size())},
                          Device::kCpu, nullptr);
    };
    replica_start_ = backend_.to_device(int32s(table.start).clone());
    replica_slots_ = backend_.to_device(int32s(table.slots).clone());
  }
}

backend::Routing Moe::route(const Tensor& tokens) const {
  Tensor logits = backend_.linear_f32(tokens, gate_);                         // [T, E] f32
  backend::Routing routing = backend_.route(logits, score_bias_, router_);    // [T, top_k] ids, weights
  if (load_.defined()) {
    Tensor counts = load_;  // a handle: the counts on the device are the layer's
    backend_.count_expert_ids(routing.expert_ids, counts);
  }
  if (replica_start_.defined()) backend_.map_expert_ids(routing.expert_ids, replica_start_, replica_slots_);
  return routing;
}

Tensor Moe::dispatched(const Tensor& x) const {
  Tensor out, shared;  // the routed experts' sum; the (whole) shared expert's output
  if (plan_.peer && plan_.peer->fits_step()) {  // a decode-sized step: through the peer buffers
    parallel::PeerExchange& peer = *plan_.peer;
    peer.send(backend_, x, route(x), slots_per_rank_);
    if (shared_) shared = shared_->forward(x);  // while the other ranks' rows arrive
    parallel::PeerExchange::Received received = peer.receive(backend_);
    peer.send_back(backend_, backend_.moe_experts(received.tokens, received.routing, experts_));
    out = peer.receive_back(backend_);
  } else if (plan_.peer_chunks && plan_.peer_chunks->step_tokens() >= 0) {
    out = in_chunks(x, &shared);
  } else {
    parallel::ExpertDispatch dispatch(backend_, *plan_.world, x, route(x), slots_per_rank_);
    out = dispatch.combine(backend_.moe_experts(dispatch.tokens(), dispatch.routing(), experts_));
    if (shared_) shared = shared_->forward(x);
  }
  if (shared.defined()) backend_.add_inplace(out, shared);
  return out;
}

Tensor Moe::in_chunks(const Tensor& x, Tensor* shared) const {
  parallel::PeerExchange& peer = *plan_.peer_chunks;
  const int64_t T = x.dim(0), chunk = peer.capacity();
  DSINFER_CHECK(T <= peer.step_tokens(), "layer ", layer_, ": ", T, " tokens in a step announced with at most ",
                peer.step_tokens(), " a rank");
  const backend::Routing routing = route(x);
  Tensor out;
  // Every rank makes as many rounds as the largest rank needs (the step's tokens are the same number
  // everywhere); a rank out of tokens sends none.
  for (int64_t begin = 0; begin < peer.step_tokens(); begin += chunk) {
    const int64_t from = std::min(begin, T), to = std::min(begin + chunk, T);
    peer.send(backend_, x.slice(from, to),
              {routing.expert_ids.slice(from, to), routing.weights.slice(from, to)}, slots_per_rank_);
    if (begin == 0 && shared_) *shared = shared_->forward(x);  // while the first rows arrive
    parallel::PeerExchange::Received received = peer.receive(backend_);
    peer.send_back(backend_, backend_.moe_experts(received.tokens, received.routing, experts_));
    Tensor part = peer.receive_back(backend_);
    out = out.defined() ? backend_.concat_rows(out, part) : part;
  }
  return out.defined() ? out : backend_.empty(x.dtype(), {0, x.dim(1)});
}

Tensor Moe::routed(const Tensor& x, int64_t* first_row) const {
  *first_row = 0;
  Tensor tokens = x;  // [T, hidden], or under DP attention every DP group's tokens [sum T, hidden]
  if (plan_.place.config.attention_dp > 1) {
    std::vector<int64_t> rows = parallel::gather_row_counts(*plan_.across_dp, x.dim(0));
    for (int d = 0; d < plan_.place.dp_rank(); ++d) *first_row += rows[d];
    tokens = plan_.across_dp->all_gather_rows(x, rows);
  }
  const backend::Routing routing = route(tokens);
  if (observer_) observer_->observe(layer_, tokens, routing);
  return backend_.moe_experts(tokens, routing, experts_);  // [T, hidden], this rank's part
}

Tensor Moe::forward(const Tensor& x) const {
  // Dispatched: whole, each choice ran on its expert's rank and came back, the shared expert added.
  if (plan_.place.config.dispatches_experts()) return dispatched(x);
  int64_t first_row = 0;
  Tensor out = routed(x, &first_row);
  // A split shared expert joins the routed experts' sum; a whole one is added after it, once.
  if (shared_ && shared_->split()) backend_.add_inplace(out, shared_->partial(x));
  parallel::sum_over(plan_.world, out);
  if (out.dim(0) != x.dim(0)) out = out.slice(first_row, first_row + x.dim(0));  // this DP group's rows
  if (shared_ && !shared_->split()) backend_.add_inplace(out, shared_->forward(x));
  return out;
}

FeedForward::FeedForward(const WeightLoader& weights, const std::string& prefix, std::optional<int64_t> moe_layer) {
  if (moe_layer) {
    moe_ = std::make_unique<Moe>(weights, prefix, *moe_layer);
  } else {
    dense_ = std::make_unique<DenseMlp>(weights, prefix);
  }
}

}  // namespace dsinfer::model
