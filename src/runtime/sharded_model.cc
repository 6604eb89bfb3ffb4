#include "runtime/sharded_model.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "core/log.h"
#include "runtime/prompt_scores.h"
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
        std::lock_guard<std::mutex> done(results->mutex);
        results->errors[rank] = error;
        ++results->finished;
      }
      results->changed.notify_all();
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
                           const GroupMaker& make_groups, std::vector<parallel::ExpertPlacement> placements)
    : config_(config), placements_(std::move(placements)) {
  const int ranks = config.world_size();
  for (int r = 0; r < ranks; ++r) threads_.push_back(std::make_unique<RankThread>());
  backends_.resize(ranks);
  models_.resize(ranks);
  on_every_rank([&](int r) { backends_[r] = make_backend(r); });
  std::vector<backend::Backend*> backends;
  for (auto& backend : backends_) backends.push_back(backend.get());
  groups_ = make_groups(backends);
  DSINFER_CHECK(static_cast<int>(groups_.size()) == ranks, "made groups for ", groups_.size(), " of ", ranks, " ranks");
  for (int r = 0; r < ranks; ++r) {
    plans_.push_back(parallel::RankPlan::of({config, r}, groups_[r]));
    plans_.back().placements = &placements_;
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
    while (results.finished < size()) {
      results.changed.wait(lock);
      for (int r = 0; r < size() && failed < 0; ++r) {
        if (!results.errors[r]) continue;
        failed = r;
        lock.unlock();
        for (const parallel::RankGroups& groups : groups_)
          for (parallel::Communicator* group : {groups.world.get(), groups.attention.get(), groups.across_dp.get()})
            if (group) group->abort();
        broken_ = !groups_.empty();
        lock.lock();
      }
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

namespace {

// Every rank runs its own ModelExecutor over its shard and cache; rank 0's tokens are the step's.
class ShardedExecutor final : public StepExecutor {
 public:
  ShardedExecutor(const ShardedModel& model, int64_t pages) : model_(model), pages_(pages) {
    ranks_.resize(model.size());
    model.on_every_rank([&](int r) { ranks_[r] = make_model_executor(model.rank(r), pages, {}); });
  }
  ~ShardedExecutor() override {
    try {
      model_.on_every_rank([&](int r) { ranks_[r].reset(); });
    } catch (const std::exception&) {
      // A broken model: its caches go with this executor on this thread.
    }
  }

  backend::SampledTokens run(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) override {
    launch(batch, sampling);
    return collect();
  }
  bool overlaps() const override { return ranks_[0]->overlaps(); }
  void launch(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) override {
    model_.on_every_rank([&](int r) { ranks_[r]->launch(batch, sampling); });
  }
  backend::SampledTokens collect() override {
    std::vector<backend::SampledTokens> tokens(ranks_.size());
    model_.on_every_rank([&](int r) { tokens[r] = ranks_[r]->collect(); });
    return tokens[0];
  }
  std::vector<PromptLogprob> take_scores() override {
    for (size_t r = 1; r < ranks_.size(); ++r) ranks_[r]->take_scores();
    return ranks_[0]->take_scores();
  }

  int64_t vocab_size() const override { return ranks_[0]->vocab_size(); }
  int64_t max_model_len() const override { return ranks_[0]->max_model_len(); }
  int64_t num_pages() const override { return pages_; }
  std::vector<int32_t> eos_token_ids() const override { return ranks_[0]->eos_token_ids(); }

 private:
  const ShardedModel& model_;
  int64_t pages_;
  std::vector<std::unique_ptr<StepExecutor>> ranks_;
};

}  // namespace

std::unique_ptr<StepExecutor> make_sharded_executor(const ShardedModel& model, int64_t pages,
                                                    const ExecutorOptions& options) {
  DSINFER_CHECK(model.config().attention_dp == 1,
                "serving with DP attention (each DP group its own batch) is not built yet; the sharded model runs "
                "it one forward pass at a time (tests), and tensor and expert parallelism serve");
  if (options.cuda_graph_max_batch > 0 && model.rank(0).backend().device() != Device::kCpu)
    log_info("sharded model: decode steps run eagerly (no CUDA graphs with NCCL yet)");
  return std::make_unique<ShardedExecutor>(model, pages);
}

}  // namespace dsinfer::runtime
