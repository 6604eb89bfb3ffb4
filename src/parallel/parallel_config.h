// How a model is spread over ranks (one GPU each), and which shard of every module a rank holds.
//
// World = attention_tp x attention_dp ranks. Rank r sits in attention group r / attention_tp (its DP
// group: ranks with one batch) at position r % attention_tp within it.
//
//   attention      heads split over the attention_tp ranks of a DP group (the latent cache, 576
//                  values a token, is the same on each of them); o_proj's partial sums are
//                  all-reduced within the group. Each DP group runs a batch of its own.
//   dense MLPs     (the first_k_dense_replace layers, and every MoE layer's shared experts):
//                  without DP attention split along the intermediate dimension over every rank and
//                  all-reduced; with DP attention whole on every rank, over its own tokens.
//   routed experts split over every rank: by expert with expert parallelism (ep = world, each rank
//                  holds E / world whole experts), else along the intermediate dimension (each rank
//                  holds 1 / world of every expert). Under DP attention with expert parallelism and
//                  one rank a DP group, each token goes to the ranks of its experts and back
//                  (all-to-all dispatch and combine); otherwise the tokens of every DP group are
//                  gathered first and each rank's rows taken back after the all-reduce.
//                  Steps of at most low_latency_tokens tokens a rank dispatch through peer buffers
//                  instead (peer_exchange.h), the same rows moved with no host round trip; larger
//                  ones through peer buffers of chunk_tokens in rounds, when set.
//   embedding, final norm, LM head, router: whole on every rank.
//
// Splits along an intermediate dimension cut FP8 weights at 128-column blocks where they fall on
// one; a shard that would split a scale block is widened to the compute dtype on load.
#pragma once

#include <cstdint>
#include <string>

#include "io/model_config.h"

namespace dsinfer::parallel {

struct ParallelConfig {
  int attention_tp = 1;          // ranks that split each attention's heads
  int attention_dp = 1;          // groups of attention_tp ranks, each with its own batch (DP attention)
  bool expert_parallel = false;  // routed experts split by expert (EP = world) instead of along I
  // DP attention with expert parallelism, one rank a DP group: tokens reach their experts by
  // all-to-all dispatch and combine (expert_dispatch.h); false, or other layouts: every DP group's
  // tokens are gathered on every rank and the experts' sums all-reduced.
  bool all_to_all = true;
  // DeepEP's low-latency mode (peer_exchange.h): when dispatching, a step of at most this many
  // tokens on every rank goes through peer buffers sized for it, with no host round trip; larger
  // steps take the all-to-all. 0: never. Ranks of one process only (one host's GPUs, or CPU threads).
  int64_t low_latency_tokens = 0;
  // DeepEP's normal mode, on the same kind of peer buffers: a step too large for the low-latency
  // ones dispatches through buffers of this many tokens a rank, in as many rounds as its largest
  // rank needs. 0: NCCL's all-to-all instead. Ranks of one process only.
  int64_t chunk_tokens = 0;

  int world_size() const { return attention_tp * attention_dp; }
  int ep_size() const { return expert_parallel ? world_size() : 1; }
  bool sharded() const { return world_size() > 1; }
  bool dispatches_experts() const { return all_to_all && attention_dp > 1 && attention_tp == 1 && expert_parallel; }
  // "tp 2, dp 1, ep 2 (2 ranks)", for logs.
  std::string describe() const;
  // Throws a dsinfer::Error a user can act on when the model's widths do not divide as this asks.
  void check_fits(const io::ModelConfig& model) const;
};

// [begin, end) of some dimension.
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// Part `index` of `parts` equal parts of [0, total) (total % parts == 0; check_fits says so).
inline Range part_of(int64_t total, int parts, int index) {
  int64_t size = total / parts;
  return {index * size, (index + 1) * size};
}

// One rank's place: which shard of each module it holds.
struct RankPlace {
  ParallelConfig config;
  int rank = 0;

  int attention_rank() const { return rank % config.attention_tp; }  // within its DP group
  int dp_rank() const { return rank / config.attention_tp; }         // its DP group
  Range heads(int64_t total) const { return part_of(total, config.attention_tp, attention_rank()); }
  // The intermediate columns of a dense MLP (or shared expert) this rank holds.
  Range dense_columns(int64_t intermediate) const {
    return config.attention_dp > 1 ? Range{0, intermediate} : part_of(intermediate, config.world_size(), rank);
  }
  // The routed experts this rank holds, and the intermediate columns of each.
  Range experts(int64_t total) const {
    return config.expert_parallel ? part_of(total, config.world_size(), rank) : Range{0, total};
  }
  Range expert_columns(int64_t intermediate) const {
    return config.expert_parallel ? Range{0, intermediate} : part_of(intermediate, config.world_size(), rank);
  }
};

}  // namespace dsinfer::parallel
