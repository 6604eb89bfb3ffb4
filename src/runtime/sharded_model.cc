#include "runtime/sharded_model.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "core/log.h"
#include "runtime/step_error.h"

namespace dsinfer::runtime {

// What the ranks of one on_every_rank call report as they finish, in any order.
struct RankResults {
  std::mutex mutex;
  std::condition_variable changed;
  int finished = 0;
  std::vector<std::exception_ptr> errors;  // [rank]
};

// A thread that runs one task at a time for its rank (a GPU's current device is per thread, and a
// rank's backend stays on the thread that made it).
class ShardedModel::RankThread {
 public:
  RankThread() : thread_([this] { loop(); }) {}
  ~RankThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  // Runs task; its outcome goes to results->errors[rank].
  void start(std::function<void()> task, RankResults* results, int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    task_ = std::move(task);
    results_ = results;
    rank_ = rank;
    wake_.notify_all();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return stopping_ || task_; });
      if (stopping_) return;
      std::function<void()> task = std::move(task_);
      task_ = nullptr;
      RankResults* results = results_;
      int rank = rank_;
      lock.unlock();
      std::exception_ptr error;
      try {
        task();
      } catch (...) {
        error = std::current_exception();
      }
      {
        // Notified under the lock: once the caller sees every rank finished it returns and `results`
        // (its local) is gone, so nothing may touch it after the lock is released.
        std::lock_guard<std::mutex> done(results->mutex);
        results->errors[rank] = error;
        ++results->finished;
        results->changed.notify_all();
      }
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::function<void()> task_;
  RankResults* results_ = nullptr;
  int rank_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the rest is ready
};

ShardedModel::ShardedModel(const std::string& dir, const parallel::ParallelConfig& config,
                           const model::ModelOptions& options, const BackendMaker& make_backend,
                           const GroupMaker& make_groups, ExpertBalance balance)
    : config_(config), balance_(std::move(balance)), model_config_(io::load_model_config(dir)) {
  const int ranks = config.world_size();
  if (options.num_layers > 0) model_config_ = io::truncate_layers(model_config_, options.num_layers);
  if (balance_.redundant_experts > 0 || balance_.rebalance_steps > 0) {
    DSINFER_CHECK(config.expert_parallel, "expert-parallel load balancing (EPLB) needs expert parallelism");
    balance_.count_load = true;
    if (balance_.placements.empty()) {  // uniform loads until the first rebalance
      Tensor uniform = Tensor::empty(DType::kI64, {moe_layers(model_config_), model_config_.n_routed_experts});
      std::fill_n(uniform.data<int64_t>(), uniform.numel(), int64_t{1});
      balance_.placements = placements_from(uniform);
    }
  }
  for (int r = 0; r < ranks; ++r) threads_.push_back(std::make_unique<RankThread>());
  backends_.resize(ranks);
  models_.resize(ranks);
  on_every_rank([&](int r) { backends_[r] = make_backend(r); });
  std::vector<backend::Backend*> backends;
  for (auto& backend : backends_) backends.push_back(backend.get());
  groups_ = make_groups(backends);
  DSINFER_CHECK(static_cast<int>(groups_.size()) == ranks, "made groups for ", groups_.size(), " of ", ranks, " ranks");
  // The peer buffers before the weights, on every rank at once, so that a memory plan counts them.
  if (model_config_.n_routed_experts > 0)
    on_every_rank([&](int r) {
      for (parallel::PeerExchange* peer : {groups_[r].peer.get(), groups_[r].peer_chunks.get()})
        if (peer)
          peer->reserve(*backends_[r], model_config_.hidden_size, model_config_.num_experts_per_tok,
                        backends_[r]->compute_dtype());
    });
  for (int r = 0; r < ranks; ++r) {
    plans_.push_back(parallel::RankPlan::of({config, r}, groups_[r]));
    plans_.back().placements = &balance_.placements;
    plans_.back().count_expert_load = balance_.count_load;
  }
  on_every_rank([&](int r) {
    model::ModelOptions rank_options = options;
    rank_options.plan = &plans_[r];
    models_[r] = model::DeepseekModel::load(dir, *backends_[r], rank_options);
  });
  log_info("sharded ", dir, " over ", config.describe());
}

ShardedModel::~ShardedModel() {
  // Each rank's model and backend go on the thread that made them.
  if (!threads_.empty() && !broken_) {
    try {
      on_every_rank([&](int r) {
        models_[r].reset();
        backends_[r].reset();
      });
    } catch (const std::exception& error) {
      log_warning("releasing the ranks: ", error.what());
    }
  }
  groups_.clear();
  threads_.clear();
}

void ShardedModel::set_step_tokens(int64_t tokens) {
  for (parallel::RankGroups& groups : groups_)
    for (parallel::PeerExchange* peer : {groups.peer.get(), groups.peer_chunks.get()})
      if (peer) peer->set_step_tokens(tokens);
}

int64_t ShardedModel::peer_dispatches(bool chunks) const {
  int64_t dispatches = 0;
  for (const parallel::RankGroups& groups : groups_)
    if (const parallel::PeerExchange* peer = chunks ? groups.peer_chunks.get() : groups.peer.get())
      dispatches += peer->dispatches();
  return dispatches;
}

const model::DeepseekModel& ShardedModel::rank(int r) const {
  DSINFER_CHECK(r >= 0 && r < size() && models_[r], "rank ", r, " of ", size(), " has no model");
  return *models_[r];
}

void ShardedModel::on_every_rank(const std::function<void(int)>& task) const {
  DSINFER_CHECK(!broken_, "a rank failed an earlier step; the sharded model can run no more");
  RankResults results;
  results.errors.resize(size());
  for (int r = 0; r < size(); ++r) threads_[r]->start([&task, r] { task(r); }, &results, r);
  // Ranks report as they finish. The first failure aborts the groups at once: ranks still running
  // may be waiting for the failed one in a collective, and the abort wakes them with an error.
  int failed = -1;
  {
    std::unique_lock<std::mutex> lock(results.mutex);
    while (true) {
      // Look before waiting: a rank may have failed before this thread first waits, and the others
      // would then never finish (nor notify) until the abort.
      for (int r = 0; r < size() && failed < 0; ++r) {
        if (!results.errors[r]) continue;
        failed = r;
        lock.unlock();
        for (const parallel::RankGroups& groups : groups_)
          for (parallel::Communicator* group : {groups.world.get(), groups.attention.get(), groups.across_dp.get()})
            if (group) group->abort();
        for (const parallel::RankGroups& groups : groups_)
          for (parallel::PeerExchange* peer : {groups.peer.get(), groups.peer_chunks.get()})
            if (peer) peer->abort();
        broken_ = !groups_.empty();
        lock.lock();
      }
      if (results.finished == size()) break;
      results.changed.wait(lock);
    }
  }
  if (failed < 0) return;
  if (!broken_) std::rethrow_exception(results.errors[failed]);  // before the groups existed: nothing to abort
  try {
    std::rethrow_exception(results.errors[failed]);
  } catch (const std::exception& error) {
    throw FatalDeviceError(str_cat("rank ", failed, " failed: ", error.what()));
  }
}

int64_t ShardedModel::moe_layers(const io::ModelConfig& config) {
  int64_t layers = 0;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) layers += config.is_moe_layer(i) ? 1 : 0;
  return layers;
}

std::vector<parallel::ExpertPlacement> ShardedModel::placements_from(const Tensor& load) const {
  const int64_t E = model_config_.n_routed_experts;
  DSINFER_CHECK(load.dtype() == DType::kI64 && load.rank() == 2 && load.dim(0) == moe_layers(model_config_) &&
                    load.dim(1) == E,
                "rebalance: loads ", load.shape().to_string(), " for ", moe_layers(model_config_), " MoE layers of ", E,
                " experts");
  const parallel::PlacementShape shape{.logical_experts = static_cast<int>(E),
                                       .expert_groups = static_cast<int>(model_config_.n_group),
                                       .nodes = 1,
                                       .ranks = config_.world_size(),
                                       .redundant_experts = balance_.redundant_experts};
  std::vector<parallel::ExpertPlacement> placements;
  int64_t row = 0;
  for (int64_t i = 0; i < model_config_.num_hidden_layers; ++i) {
    if (!model_config_.is_moe_layer(i)) {
      placements.push_back(parallel::contiguous_placement(shape));  // never read: a dense layer
      continue;
    }
    std::vector<double> layer(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) layer[e] = static_cast<double>(load.data<int64_t>()[row * E + e]);
    placements.push_back(parallel::place_experts(shape, layer));
    ++row;
  }
  return placements;
}

void ShardedModel::rebalance(const Tensor& load) {
  std::vector<parallel::ExpertPlacement> placements = placements_from(load);
  on_every_rank([&](int r) { models_[r]->place_experts(placements); });
  balance_.placements = std::move(placements);
  ++rebalances_;
  log_info("EPLB: experts placed anew over ", config_.describe(), " with ", balance_.redundant_experts,
           " spare slots");
}

Tensor ShardedModel::expert_load() const {
  // With all-to-all dispatch each rank routes its own DP group's tokens; otherwise every rank routes
  // every token of the step (the whole batch, or every DP group's gathered), and rank 0 counts them all.
  const bool own_tokens = config_.dispatches_experts();
  std::vector<Tensor> loads(size());
  on_every_rank([&](int r) {
    if (r == 0 || own_tokens) loads[r] = models_[r]->expert_load();
  });
  Tensor sum = loads[0].clone();
  for (int r = 1; r < size(); ++r)
    if (loads[r].defined())
      for (int64_t i = 0; i < sum.numel(); ++i) sum.data<int64_t>()[i] += loads[r].data<int64_t>()[i];
  return sum;
}

}  // namespace dsinfer::runtime
