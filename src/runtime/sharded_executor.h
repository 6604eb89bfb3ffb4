// The engine's executor over a ShardedModel: every rank runs its own ModelExecutor over its shard
// and cache, and the step's tokens come back from the ranks that hold them.
//
// Without DP attention each step runs on every rank (the same batch: tensor parallel attention,
// experts split by expert or along I) and rank 0's tokens come back; all ranks compute the same logits bit for bit (the sums give every rank the same
// bits), so every rank samples the same tokens and keeps them for its next step's placeholders. With
// DP attention each DP group runs the step's sequences whose first page is its own (page id modulo
// the groups: sequences sharing a prefix-cache page share their first page, so a cached page is
// read where it was computed), and a group without any runs an empty step that still joins the
// experts' collectives; the overlap scheduler's placeholders become rows of each group's part of
// the step before. Each DP group's ranks hold that group's pages
// only: the engine's pool has a group of pages per DP group (page_groups()), a sequence lives in one
// (the one whose prefix cache holds most of its prompt, else the one with the most room), so DP
// attention multiplies the KV cache by the groups.
//
// Decode steps replay CUDA graphs on every rank (sharded_graph_batch says when): NCCL's all-reduce
// and the peer buffers' kernels are captured with the layers. Under DP attention each rank replays
// the bucket of its own group's batch, so every graph holds the peer path; a step with a group over
// the peer buffers' tokens runs eagerly on every rank (ForwardBatch::eager), through the all-to-all.
#pragma once

#include <memory>

#include "runtime/executor.h"
#include "runtime/sharded_model.h"

namespace dsinfer::runtime {

// The largest decode graph on each rank of `model` for a requested one (0: every step eager): the
// request for tensor- and expert-parallel layouts; under DP attention, up to the peer buffers'
// tokens a rank when the experts' dispatch has them, else 0 (gathering tokens, and the all-to-all,
// need the host for their counts).
int sharded_graph_batch(const ShardedModel& model, int requested);

// The engine's executor over every rank, each with a cache of `pages` pages (plus the graphs'
// scratch page, as make_model_executor's): under DP attention the engine's pool is then
// pages x attention_dp pages, in attention_dp groups. With ExpertBalance::rebalance_steps it places
// the experts anew every that many steps, before launching the next (a step in flight finishes on
// the device first), from the loads counted since the last time, and captures the graphs anew.
std::unique_ptr<StepExecutor> make_sharded_executor(ShardedModel& model, int64_t pages,
                                                    const ExecutorOptions& options = {});

}  // namespace dsinfer::runtime
