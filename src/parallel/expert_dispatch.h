// Expert dispatch and combine over a communicator (the "normal mode" of DeepEP's kind, on NCCL's
// all-to-all for now): under DP attention with expert parallelism, each rank sends each of its
// tokens once to every rank that holds one of the token's chosen experts, the ranks run their own
// experts on what they received, and the results come back to the token's rank and are summed.
//
//   dispatch: ids [T, k] (the stack ids moe_experts reads: experts, or EPLB's physical slots; slot s
//             is held by rank s / slots_per_rank) come to the host; the token rows for rank j are
//             the tokens with a choice on j, in token order; the counts go round (all_gather_counts)
//             and x's rows, with each row's whole routing (ids and weights), go by all_to_all_rows.
//             A rank receives [R, hidden] rows; moe_experts over its own stack skips the ids it does
//             not hold, so each choice is computed exactly once, on its owner.
//   combine:  the [R, hidden] results go back by all_to_all_rows, and each token's rows (one per rank
//             it went to) are added in rank order: out = sum over ranks j of scatter_j(rows from j),
//             each scatter a gather_rows through a zero row (a token sent nowhere gets zeros).
//
// Bytes per layer: each token's hidden row to each rank holding one of its experts and back (at most
// min(top_k, ranks) copies), against every token to every rank for the gather-and-all-reduce path.
// The counts need the ids on the host, so a step waits for the router once per MoE layer (a graph
// cannot capture it; the low-latency mode with fixed-size buffers will).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "parallel/communicator.h"

namespace dsinfer::parallel {

class ExpertDispatch {
 public:
  // Sends this rank's tokens x [T, hidden] to the ranks of `world` that hold their chosen experts.
  ExpertDispatch(backend::Backend& backend, Communicator& world, const Tensor& x, const backend::Routing& routing,
                 int64_t slots_per_rank);

  // What this rank received: tokens [R, hidden] and their routing (global ids, weights) [R, k].
  const Tensor& tokens() const { return tokens_; }
  const backend::Routing& routing() const { return routing_; }

  // expert_out [R, hidden] (this rank's experts on tokens()) -> [T, hidden]: every rank's part of
  // each of this rank's tokens, summed in rank order.
  Tensor combine(const Tensor& expert_out) const;

 private:
  backend::Backend& backend_;
  Communicator& world_;
  int64_t tokens_here_;                         // T
  std::vector<int64_t> send_rows_, recv_rows_;  // [ranks]
  std::vector<int32_t> sent_token_;             // [sum send_rows]: the token of each row sent, by rank
  Tensor tokens_;
  backend::Routing routing_;
};

}  // namespace dsinfer::parallel
