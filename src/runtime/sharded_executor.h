// The engine's executor over a ShardedModel: every rank runs its own ModelExecutor over its shard
// and cache, and the step's tokens come back from the ranks that hold them.
//
// Without DP attention each step runs on every rank (the same batch: tensor parallel attention,
// experts split by expert or along I) and rank 0's tokens come back; all ranks compute the same logits bit for bit (the sums give every rank the same
// bits), so every rank samples the same tokens and keeps them for its next step's placeholders. With
// DP attention each DP group runs the step's sequences whose first page is its own (page id modulo
// the groups: sequences sharing a prefix-cache page share their first page, so a cached page is
// read where it was computed), and a group without any runs an empty step that still joins the
// experts' collectives; such steps are not overlapped. Every rank's cache holds the whole pool, so DP
// attention saves attention work and all-reduces here, not cache memory (a pool per group is next).
#pragma once

#include <memory>

#include "runtime/executor.h"
#include "runtime/sharded_model.h"

namespace dsinfer::runtime {

// The engine's executor over every rank, each with a cache of `pages` pages. Sharded steps run
// eagerly for now (options.cuda_graph_max_batch is ignored: graphs with NCCL inside are a later step).
// With ExpertBalance::rebalance_steps it places the experts anew every that many steps, between
// steps (no step in flight), from the loads counted since the last time.
std::unique_ptr<StepExecutor> make_sharded_executor(ShardedModel& model, int64_t pages,
                                                    const ExecutorOptions& options = {});

}  // namespace dsinfer::runtime
