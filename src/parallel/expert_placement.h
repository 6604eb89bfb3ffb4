// Expert-parallel load balancing (EPLB): which routed experts each rank holds, with copies of the hot
// ones.
//
// Under expert parallelism every rank holds E / ranks routed experts of each MoE layer, and a step is
// as slow as its busiest rank. Real routing is skewed (a few experts take a large share of the
// tokens), so whichever rank holds the hot experts sets the pace. EPLB gives every rank a few spare
// expert slots, fills them with replicas of the hot experts, and places experts and replicas so
// that every rank gets about the same load. The placement is a pure, deterministic function of the
// measured load, so every rank computes the same one from the same counters.
//
// For load[e] (tokens routed to logical expert e over some window):
//
//   1. Nodes. With nodes > 1 and the router's expert_groups a multiple of nodes, whole groups go to
//      nodes: heaviest group first, each to the least-loaded node that still has room, every node
//      taking expert_groups / nodes groups, then swaps of groups between the heaviest node and
//      another while they lower the heaviest (greedy alone can miss an even split when every
//      node's group count is fixed). V3's router picks a token's experts from only topk_group of
//      its n_group groups, so keeping groups whole keeps most of a token's dispatch inside one
//      node (NVLink, not the network). Otherwise all ranks count as one node.
//   2. Replicas, per node. Each of the node's experts gets one replica, and each of the node's
//      spare slots (redundant_experts / nodes) goes in turn to the expert with the largest load per
//      replica: the greedy that makes the heaviest single replica as light as it can be. An expert
//      gets at most one replica per rank of its node while another expert can still take one (a
//      second copy on a rank that already holds the expert takes none of that rank's load away).
//   3. Ranks, per node. The replicas (each carrying load[e] / replicas(e)) go heaviest first to
//      the least-loaded rank that has a free slot and does not hold that expert yet (else to the
//      least-loaded rank with a free slot): longest-processing-time-first with a budget of
//      slots_per_rank slots a rank. A swap pass then moves any replica still sharing a rank with
//      another replica of its expert, trading it for the closest-in-load replica that can go back,
//      and swaps between the heaviest rank and another even out what the slot budget left uneven.
//
// Nodes come before replicas because a node's slot count is fixed: its experts can use only its
// own redundant_experts / nodes spare slots, however hot they are. Balance across nodes is
// therefore only as good as whole groups allow (a few groups, each far from the mean, cannot be split);
// within a node, replicas fix the rest. Placing 61 layers of 256 experts takes about 10 ms of one core.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dsinfer::parallel {

struct PlacementShape {
  int logical_experts = 0;    // E, e.g. 256
  int expert_groups = 1;      // n_group of the router (8 for V3); groups stay on one node when they fit
  int nodes = 1;              // hosts
  int ranks = 1;              // GPUs in all (a multiple of nodes)
  int redundant_experts = 0;  // spare physical slots in all, e.g. 32 for 256 + 32 = 288 slots

  int physical_slots() const { return logical_experts + redundant_experts; }
};

// Where each logical expert's replicas live: physical slot p (0 .. E + redundant - 1) runs logical
// expert logical_of[p]; rank r holds physical slots [r * slots_per_rank, (r + 1) * slots_per_rank),
// in increasing logical id within the rank.
struct ExpertPlacement {
  int slots_per_rank = 0;
  std::vector<int32_t> logical_of;             // [physical slots]
  std::vector<std::vector<int32_t>> replicas;  // [logical] -> its physical slots, increasing

  int ranks() const { return slots_per_rank == 0 ? 0 : static_cast<int>(logical_of.size()) / slots_per_rank; }
  // The largest rank load over the mean rank load for `load` [E] (the imbalance this placement gives
  // when each logical expert's load is split evenly over its replicas); 1.0 when there is no load.
  double imbalance(std::span<const double> load) const;
};

// load: [E] tokens routed to each logical expert over some window (the device counters' values),
// finite and >= 0. Throws dsinfer::Error when the shape does not divide or the load does not fit it.
ExpertPlacement place_experts(const PlacementShape& shape, std::span<const double> load);

// The placement with no replicas (what expert parallelism does without EPLB): rank r holds experts
// [r E / ranks, (r + 1) E / ranks). shape.redundant_experts is ignored.
ExpertPlacement contiguous_placement(const PlacementShape& shape);

// The placement as Backend::map_expert_ids reads it (the op that turns the router's logical ids into
// slots, token t's choice j of expert e going to e's replica (t + j) % replicas(e)): start [E + 1],
// expert e's replicas at slots[start[e] .. start[e + 1]).
struct ReplicaTable {
  std::vector<int32_t> start;
  std::vector<int32_t> slots;
};
ReplicaTable replica_table(const ExpertPlacement& placement);

}  // namespace dsinfer::parallel
