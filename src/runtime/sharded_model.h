// One model held by several ranks (parallel/parallel_config.h): a rank is one GPU, or on the CPU a
// thread standing in for one. Each rank has a thread of its own, on which its backend, its shard of
// the model and its latent cache are made and used; every rank runs every step of an attention
// group at once, and the collectives inside the layers keep them in step.
//
// make_sharded_executor (sharded_executor.h) serves it through the engine.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/deepseek_model.h"
#include "parallel/rank_plan.h"
#include "runtime/executor.h"

namespace dsinfer::runtime {

// Expert-parallel load balancing (parallel/expert_placement.h): where each layer's experts go, and
// whether the layers count their router's choices (the loads a new placement is computed from).
struct ExpertBalance {
  std::vector<parallel::ExpertPlacement> placements;  // by layer index; empty: contiguous, no replicas
  bool count_load = false;
  // Online rebalancing (vLLM's --enable-eplb, SGLang's --enable-eplb): spare expert slots in all
  // (a placement from uniform loads until the first rebalance), and the executor's steps between
  // rebalances (0: never; each places the experts anew from the loads counted since the last).
  int redundant_experts = 0;
  int64_t rebalance_steps = 0;
};

class ShardedModel {
 public:
  // Makes rank r's backend, on rank r's thread.
  using BackendMaker = std::function<std::unique_ptr<backend::Backend>(int rank)>;
  // Makes every rank's groups from the ranks' backends (local threads on the CPU, NCCL on GPUs).
  using GroupMaker = std::function<std::vector<parallel::RankGroups>(const std::vector<backend::Backend*>&)>;

  // Loads DIR's model (model::DeepseekModel::load with `options`) as config.world_size() shards.
  ShardedModel(const std::string& dir, const parallel::ParallelConfig& config, const model::ModelOptions& options,
               const BackendMaker& make_backend, const GroupMaker& make_groups, ExpertBalance balance = {});
  ~ShardedModel();
  ShardedModel(const ShardedModel&) = delete;
  ShardedModel& operator=(const ShardedModel&) = delete;

  const parallel::ParallelConfig& config() const { return config_; }
  int size() const { return config_.world_size(); }
  const model::DeepseekModel& rank(int r) const;

  // Runs task(r) on every rank's thread at once and waits for all of them. When a rank throws, the
  // others may be waiting in a collective for it: the groups are aborted (each waiting rank throws
  // too) and the model can run no more steps; the first rank's error is rethrown, as a
  // FatalDeviceError once the groups are aborted.
  void on_every_rank(const std::function<void(int)>& task) const;

  // The router's choices per logical expert of every MoE layer over every step so far, every token
  // once (summed over the DP groups when each routes its own): [MoE layers, E] int64 on the host.
  // Needs ExpertBalance::count_load; call it between steps (it runs on the rank threads).
  Tensor expert_load() const;
  // EPLB: every MoE layer's experts placed anew from `load` ([MoE layers, E], tokens a window routed
  // to each), with the configured spare slots, and reloaded on every rank. With no step running on
  // the devices (a step launched and not collected must have finished there).
  void rebalance(const Tensor& load);
  int64_t rebalances() const { return rebalances_; }  // so far
  const ExpertBalance& balance() const { return balance_; }
  // The most tokens any rank runs in the coming step, before it is launched (the low-latency
  // expert dispatch takes steps that fit its buffers; parallel/peer_exchange.h). Negative: unknown,
  // and every dispatch takes the all-to-all.
  void set_step_tokens(int64_t tokens);
  // The MoE layers' dispatches through the peer buffers so far, over every rank: the low-latency
  // ones, or the chunked ones (a round each).
  int64_t peer_dispatches(bool chunks = false) const;

 private:
  class RankThread;
  parallel::ParallelConfig config_;
  std::vector<std::unique_ptr<RankThread>> threads_;
  std::vector<std::unique_ptr<backend::Backend>> backends_;
  std::vector<parallel::RankGroups> groups_;
  static int64_t moe_layers(const io::ModelConfig& config);
  // One placement a layer (by layer index) from each MoE layer's load.
  std::vector<parallel::ExpertPlacement> placements_from(const Tensor& load) const;

  ExpertBalance balance_;
  int64_t rebalances_ = 0;
  io::ModelConfig model_config_;  // the model's config, for placements
  std::vector<parallel::RankPlan> plans_;
  std::vector<std::unique_ptr<model::DeepseekModel>> models_;
  mutable bool broken_ = false;
};

}  // namespace dsinfer::runtime
