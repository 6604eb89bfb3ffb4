#include "parallel/expert_placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace dsinfer::parallel {
namespace {

void check_shape(const PlacementShape& shape) {
  const int experts = shape.logical_experts, ranks = shape.ranks;
  DSINFER_CHECK(experts >= 1, "expert placement: the model has no routed experts (logical_experts = ", experts, ")");
  DSINFER_CHECK(shape.nodes >= 1 && ranks >= 1, "expert placement: nodes and ranks must be at least 1, got ",
                shape.nodes, " nodes and ", ranks, " ranks");
  DSINFER_CHECK(ranks % shape.nodes == 0, "expert placement: ", ranks, " ranks do not split evenly over ", shape.nodes,
                " nodes; every node must have the same number of GPUs");
  DSINFER_CHECK(shape.expert_groups >= 1 && experts % shape.expert_groups == 0, "expert placement: ",
                shape.expert_groups, " expert groups (the router's n_group) do not divide the ", experts,
                " routed experts");
  DSINFER_CHECK(shape.redundant_experts >= 0, "expert placement: the number of redundant experts must be >= 0, got ",
                shape.redundant_experts);
  if (shape.physical_slots() % ranks != 0) {
    int fits = shape.redundant_experts;
    while ((experts + fits) % ranks != 0) ++fits;
    throw Error(str_cat("expert placement: ", experts, " routed experts + ", shape.redundant_experts,
                        " redundant = ", shape.physical_slots(), " physical slots do not divide over ", ranks,
                        " ranks; use ", fits, " redundant experts (or that plus a multiple of ", ranks, ")"));
  }
}

void check_load(const PlacementShape& shape, std::span<const double> load) {
  DSINFER_CHECK(load.size() == static_cast<size_t>(shape.logical_experts), "expert placement: got ", load.size(),
                " expert loads for ", shape.logical_experts, " routed experts (one count per logical expert)");
  for (size_t e = 0; e < load.size(); ++e)
    DSINFER_CHECK(std::isfinite(load[e]) && load[e] >= 0, "expert placement: expert ", e, "'s load is ", load[e],
                  "; loads are token counts, finite and >= 0");
}

// Evens out a packing whose bins' item counts are fixed: swaps one item of the heaviest bin with a
// lighter item of another bin, the swap that leaves the larger of the two bins lightest, until no swap
// lowers the heaviest bin. Greedy packing leaves bins up to an item's weight apart once the counts bind;
// this closes most of that. allowed(bin, item): whether item may join bin. Every swap lowers the sum of
// squared bin loads, so this ends; the round limit only bounds the time on pathological inputs.
template <typename Weight, typename Allowed>
void swap_to_balance(std::vector<std::vector<int32_t>>& bins, Weight weight, Allowed allowed) {
  const int bin_count = static_cast<int>(bins.size());
  std::vector<double> bin_load(bin_count, 0.0);
  size_t items = 0;
  for (int b = 0; b < bin_count; ++b) {
    for (int32_t item : bins[b]) bin_load[b] += weight(item);
    items += bins[b].size();
  }
  for (size_t round = 0; round < 16 * items; ++round) {
    const int heavy = static_cast<int>(std::max_element(bin_load.begin(), bin_load.end()) - bin_load.begin());
    int32_t *out = nullptr, *in = nullptr;  // the heavy bin's item and the one it trades for
    int light = -1;
    double best_peak = bin_load[heavy] * (1 - 1e-12);  // a swap must beat rounding, or it could cycle
    for (int b = 0; b < bin_count; ++b) {
      if (b == heavy) continue;
      for (int32_t& x : bins[heavy]) {
        for (int32_t& y : bins[b]) {
          const double moved = weight(x) - weight(y);
          if (moved <= 0) continue;
          const double peak = std::max(bin_load[heavy] - moved, bin_load[b] + moved);
          if (peak >= best_peak || !allowed(b, x) || !allowed(heavy, y)) continue;
          out = &x, in = &y, light = b, best_peak = peak;
        }
      }
    }
    if (out == nullptr) return;
    const double moved = weight(*out) - weight(*in);
    bin_load[heavy] -= moved;
    bin_load[light] += moved;
    std::swap(*out, *in);
  }
}

// The logical experts of each node, by whole router groups when they divide over the nodes (step 1
// of the header); one node holding every expert otherwise.
std::vector<std::vector<int32_t>> experts_by_node(const PlacementShape& shape, std::span<const double> load) {
  const int experts = shape.logical_experts, groups = shape.expert_groups, nodes = shape.nodes;
  if (nodes == 1 || groups % nodes != 0) {
    std::vector<int32_t> all(experts);
    std::iota(all.begin(), all.end(), 0);
    return {all};
  }
  const int group_size = experts / groups, groups_per_node = groups / nodes;
  std::vector<double> group_load(groups, 0.0);
  for (int e = 0; e < experts; ++e) group_load[e / group_size] += load[e];
  std::vector<int> heaviest_first(groups);
  std::iota(heaviest_first.begin(), heaviest_first.end(), 0);
  std::stable_sort(heaviest_first.begin(), heaviest_first.end(),
                   [&](int a, int b) { return group_load[a] > group_load[b]; });

  std::vector<double> node_load(nodes, 0.0);
  std::vector<std::vector<int32_t>> node_groups(nodes);
  for (int g : heaviest_first) {
    int best = -1;
    for (int n = 0; n < nodes; ++n)
      if (static_cast<int>(node_groups[n].size()) < groups_per_node && (best < 0 || node_load[n] < node_load[best]))
        best = n;
    node_groups[best].push_back(g);
    node_load[best] += group_load[g];
  }
  swap_to_balance(node_groups, [&](int32_t g) { return group_load[g]; }, [](int, int32_t) { return true; });
  std::vector<std::vector<int32_t>> result(nodes);
  for (int n = 0; n < nodes; ++n) {
    std::sort(node_groups[n].begin(), node_groups[n].end());
    for (int32_t g : node_groups[n])
      for (int e = g * group_size; e < (g + 1) * group_size; ++e) result[n].push_back(e);
  }
  return result;
}

// Step 2: how many replicas each of a node's experts gets. `spare` slots go one at a time to the
// expert with the largest load per replica (ties: fewer replicas, then the lower id); an expert at
// `cap` replicas takes one only when every expert is at the cap.
void count_replicas(std::span<const int32_t> experts, std::span<const double> load, int spare, int cap,
                    std::vector<int>& count) {
  for (int32_t e : experts) count[e] = 1;
  for (int given = 0; given < spare; ++given) {
    int32_t best = -1;
    bool best_capped = true;
    for (int32_t e : experts) {
      const bool capped = count[e] >= cap;
      bool better = best < 0 || (best_capped && !capped);
      if (!better && capped == best_capped) {
        const double mine = load[e] / count[e], theirs = load[best] / count[best];
        better = mine > theirs || (mine == theirs && count[e] < count[best]);
      }
      if (better) best = e, best_capped = capped;
    }
    ++count[best];
  }
}

bool holds(const std::vector<int32_t>& rank_experts, int32_t expert) {
  return std::find(rank_experts.begin(), rank_experts.end(), expert) != rank_experts.end();
}

// Step 3: the node's replicas onto its ranks; returns each rank's logical experts [ranks][slots_per_rank].
// weight[e] is the load one replica of e carries.
std::vector<std::vector<int32_t>> pack_ranks(std::span<const int32_t> experts, const std::vector<int>& count,
                                             const std::vector<double>& weight, int ranks, int slots_per_rank) {
  std::vector<int32_t> replicas;  // one entry per replica, heaviest first
  for (int32_t e : experts) replicas.insert(replicas.end(), count[e], e);
  std::stable_sort(replicas.begin(), replicas.end(), [&](int32_t a, int32_t b) { return weight[a] > weight[b]; });

  std::vector<std::vector<int32_t>> rank_experts(ranks);
  std::vector<double> rank_load(ranks, 0.0);
  for (int32_t e : replicas) {
    int best = -1;
    bool best_new = false;  // the best rank does not hold e yet
    for (int r = 0; r < ranks; ++r) {
      if (static_cast<int>(rank_experts[r].size()) == slots_per_rank) continue;
      const bool is_new = !holds(rank_experts[r], e);
      if (best < 0 || (is_new && !best_new) || (is_new == best_new && rank_load[r] < rank_load[best]))
        best = r, best_new = is_new;
    }
    rank_experts[best].push_back(e);
    rank_load[best] += weight[e];
  }

  // The greedy can be left with free slots only on ranks that hold the expert already. Trade each
  // second copy for the replica closest to it in load that can go where the copy was.
  for (int r = 0; r < ranks; ++r) {
    for (int32_t& mine : rank_experts[r]) {
      if (std::count(rank_experts[r].begin(), rank_experts[r].end(), mine) < 2) continue;
      int32_t* partner = nullptr;
      double partner_cost = 0;
      for (int s = 0; s < ranks; ++s) {
        if (s == r || holds(rank_experts[s], mine)) continue;
        for (int32_t& theirs : rank_experts[s]) {
          const double cost = std::abs(weight[mine] - weight[theirs]);
          if (holds(rank_experts[r], theirs) || (partner && cost >= partner_cost)) continue;
          partner = &theirs, partner_cost = cost;
        }
      }
      if (partner) std::swap(mine, *partner);
    }
  }
  swap_to_balance(rank_experts, [&](int32_t e) { return weight[e]; },
                  [&](int rank, int32_t e) { return !holds(rank_experts[rank], e); });
  return rank_experts;
}

// replicas[e] from logical_of.
void index_replicas(ExpertPlacement& placement, int logical_experts) {
  placement.replicas.assign(logical_experts, {});
  for (size_t p = 0; p < placement.logical_of.size(); ++p)
    placement.replicas[placement.logical_of[p]].push_back(static_cast<int32_t>(p));
}

}  // namespace

double ExpertPlacement::imbalance(std::span<const double> load) const {
  DSINFER_CHECK(load.size() == replicas.size(), "expert placement: got ", load.size(), " expert loads for ",
                replicas.size(), " routed experts");
  std::vector<double> rank_load(ranks(), 0.0);
  double total = 0;
  for (size_t p = 0; p < logical_of.size(); ++p) {
    const int32_t e = logical_of[p];
    const double share = load[e] / static_cast<double>(replicas[e].size());
    rank_load[p / slots_per_rank] += share;
    total += share;
  }
  if (rank_load.empty() || total <= 0) return 1.0;
  return *std::max_element(rank_load.begin(), rank_load.end()) / (total / static_cast<double>(rank_load.size()));
}

ExpertPlacement place_experts(const PlacementShape& shape, std::span<const double> load) {
  check_shape(shape);
  check_load(shape, load);
  const int experts = shape.logical_experts;
  ExpertPlacement placement;
  placement.slots_per_rank = shape.physical_slots() / shape.ranks;
  placement.logical_of.resize(shape.physical_slots());

  const std::vector<std::vector<int32_t>> nodes = experts_by_node(shape, load);
  const int node_count = static_cast<int>(nodes.size());
  const int ranks_per_node = shape.ranks / node_count;
  const int spare_per_node = shape.redundant_experts / node_count;  // divides: see check_shape
  std::vector<int> count(experts, 0);
  std::vector<double> weight(experts, 0.0);
  for (int n = 0; n < node_count; ++n) {
    count_replicas(nodes[n], load, spare_per_node, ranks_per_node, count);
    for (int32_t e : nodes[n]) weight[e] = load[e] / count[e];
    std::vector<std::vector<int32_t>> rank_experts =
        pack_ranks(nodes[n], count, weight, ranks_per_node, placement.slots_per_rank);
    for (int q = 0; q < ranks_per_node; ++q) {
      std::sort(rank_experts[q].begin(), rank_experts[q].end());
      std::copy(rank_experts[q].begin(), rank_experts[q].end(),
                placement.logical_of.begin() + (n * ranks_per_node + q) * placement.slots_per_rank);
    }
  }
  index_replicas(placement, experts);
  return placement;
}

ExpertPlacement contiguous_placement(const PlacementShape& shape) {
  DSINFER_CHECK(shape.logical_experts >= 1 && shape.ranks >= 1 && shape.logical_experts % shape.ranks == 0,
                "expert placement: expert parallelism over ", shape.ranks, " ranks does not divide the ",
                shape.logical_experts, " routed experts");
  ExpertPlacement placement;
  placement.slots_per_rank = shape.logical_experts / shape.ranks;
  placement.logical_of.resize(shape.logical_experts);
  std::iota(placement.logical_of.begin(), placement.logical_of.end(), 0);
  index_replicas(placement, shape.logical_experts);
  return placement;
}

ReplicaTable replica_table(const ExpertPlacement& placement) {
  ReplicaTable table;
  table.start.push_back(0);
  for (const std::vector<int32_t>& replicas : placement.replicas) {
    table.slots.insert(table.slots.end(), replicas.begin(), replicas.end());
    table.start.push_back(static_cast<int32_t>(table.slots.size()));
  }
  return table;
}

}  // namespace dsinfer::parallel
