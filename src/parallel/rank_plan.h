// One rank's place in a parallel configuration together with the groups it talks to: what the
// sharded model is built from (model::WeightLoader carries it to every module).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/expert_placement.h"
#include "parallel/parallel_config.h"
#include "parallel/peer_exchange.h"

namespace dsinfer::parallel {

// The three groups a rank belongs to. Every one has size 1 for an unsharded model.
struct RankGroups {
  std::unique_ptr<Communicator> world;      // every rank: the routed experts' sums
  std::unique_ptr<Communicator> attention;  // its DP group's attention_tp ranks: o_proj's sums
  std::unique_ptr<Communicator> across_dp;  // the ranks at its attention position in every DP group:
                                            // gathering the DP groups' tokens before the experts
  // The low-latency expert exchange over `world` (config.low_latency_tokens > 0 and the layout
  // dispatches experts); null otherwise.
  std::unique_ptr<PeerExchange> peer;
  // Its chunked exchange for larger steps (config.chunk_tokens > 0); null otherwise.
  std::unique_ptr<PeerExchange> peer_chunks;
};

// What a module reads: the rank's place and its groups (borrowed from RankGroups).
struct RankPlan {
  RankPlace place;
  Communicator* world = nullptr;
  Communicator* attention = nullptr;
  Communicator* across_dp = nullptr;
  PeerExchange* peer = nullptr;
  PeerExchange* peer_chunks = nullptr;
  // EPLB: the placement of each layer's routed experts, by checkpoint layer index (expert
  // parallelism only). Null, or a layer past its end: the contiguous placement, no replicas.
  const std::vector<ExpertPlacement>* placements = nullptr;
  // EPLB's input: every MoE layer counts its router's choices per logical expert on the device
  // (Backend::count_expert_ids; DeepseekModel::expert_load reads them).
  bool count_expert_load = false;

  bool sharded() const { return place.config.sharded(); }
  const ExpertPlacement* placement(int64_t layer) const {
    return placements && layer < static_cast<int64_t>(placements->size()) ? &(*placements)[layer] : nullptr;
  }
  static RankPlan of(const RankPlace& place, const RankGroups& groups) {
    return {place,           groups.world.get(),       groups.attention.get(), groups.across_dp.get(),
            groups.peer.get(), groups.peer_chunks.get(), nullptr,                false};
  }
};

// Every rank's groups for ranks as threads of one process over CPU tensors (index r: rank r).
std::vector<RankGroups> make_local_rank_groups(const ParallelConfig& config);

// Gives every rank its low-latency and chunked exchanges when `config` asks for them (over
// windows of `device`'s making).
void add_peer_exchanges(const ParallelConfig& config, std::vector<RankGroups>& ranks,
                        const std::function<std::shared_ptr<PeerDevice>()>& device);

// Which ranks form each group of a kind, as lists of world ranks (shared by every communicator
// maker): the attention groups, and the groups across DP.
std::vector<std::vector<int>> attention_groups(const ParallelConfig& config);
std::vector<std::vector<int>> across_dp_groups(const ParallelConfig& config);

}  // namespace dsinfer::parallel
