#include "runtime/executor.h"

#include <algorithm>
#include <utility>

#include "model/decode_graphs.h"
#include "runtime/mtp_drafter.h"
#include "runtime/prompt_scores.h"

namespace dsinfer::runtime {
namespace {


// A step is queued on the backend's stream: the metadata upload, the placeholders' resolution, the
// graph replay or the eager ops, the sampling and the copy of its tokens to pinned memory. Only
// collect waits. On the CPU every op runs as it is called, so launch returns a finished step and
// overlaps() says so.
class ModelExecutor final : public StepExecutor {
 public:
  ModelExecutor(const model::DeepseekModel& model, int64_t pages, const ExecutorOptions& options)
      : model_(model), pages_(pages), cache_(model.make_cache(pages + executor_scratch_pages(options.cuda_graph_max_batch))),
        graph_options_{options.cuda_graph_max_batch, static_cast<int32_t>(pages)} {
    if (options.speculative.enabled()) {
      drafter_ = std::make_unique<MtpDrafter>(model, cache_, options.speculative);
      verify_options_ = graph_options_;
      verify_options_.tokens_per_sequence = 1 + options.speculative.num_tokens;
      verify_options_.mtp_extend = true;
    }
    capture_graphs();
  }

  backend::SampledTokens run(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) override {
    launch(batch, sampling);
    return collect();
  }

  bool overlaps() const override { return model_.backend().device() != Device::kCpu; }

  void launch(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) override {
    DSINFER_CHECK(launched_.size() < kMaxLaunchedSteps, "at most ", kMaxLaunchedSteps,
                  " steps may be launched and not collected");
    const Tensor* previous = previous_tokens_.defined() ? &previous_tokens_ : nullptr;
    // A step with scored rows runs eagerly: a graph keeps its hidden states to itself.
    const bool scores = !batch.scored_rows.empty();
    std::optional<Tensor> replayed = graphs_ && !scores ? graphs_->logits(batch, previous) : std::nullopt;
    model::ForwardResult result;
    if (replayed) {
      result.logits = *replayed;
    } else {
      result = model_.forward_on_device(batch, cache_, previous);
    }
    Launched step;
    step.tokens = model_.backend().queue_sample_tokens(result.logits, sampling);
    // Waits for the step on a device (prompt_scores.h): the scores are ready before launch returns.
    if (scores) step.scores = score_rows(model_, result.hidden, batch.scored_rows);
    previous_tokens_ = step.tokens->device_tokens();  // kept alive for the next step's placeholders
    launched_.push_back(std::move(step));
  }

  backend::SampledTokens collect() override {
    DSINFER_CHECK(!launched_.empty(), "collect: no step was launched");
    Launched oldest = std::move(launched_.front());
    launched_.pop_front();
    collected_scores_ = std::move(oldest.scores);
    return oldest.tokens->wait();
  }

  bool can_draft() const override { return drafter_ != nullptr; }

  // Waited for: the drafts depend on what the step accepts. A step whose every sequence verifies N
  // drafts replays a verification graph, and the drafter's pass over it the bucket's MTP graph;
  // others (prompt chunks, fewer drafts near a length limit) run eagerly.
  SpeculativeResult run_speculative(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling,
                                    const SpeculativeStep& step) override {
    DSINFER_CHECK(drafter_, "this executor was made without speculative decoding");
    DSINFER_CHECK(launched_.empty(), "a speculative step runs alone, but ", launched_.size(),
                  " steps are in flight");
    const bool scores = !batch.scored_rows.empty();
    std::optional<model::ForwardResult> replayed =
        verify_graphs_ && !scores ? verify_graphs_->forward(batch) : std::nullopt;
    model::ForwardResult result = replayed ? std::move(*replayed) : model_.forward_on_device(batch, cache_);
    std::unique_ptr<backend::PendingTokens> sampled = model_.backend().queue_sample_tokens(result.logits, sampling);
    collected_scores_ = scores ? score_rows(model_, result.hidden, batch.scored_rows) : std::vector<PromptLogprob>{};
    return drafter_->draft(batch, result.hidden, std::move(sampled), step, replayed ? verify_graphs_.get() : nullptr);
  }

  std::vector<PromptLogprob> take_scores() override { return std::exchange(collected_scores_, {}); }
  int64_t graph_steps() const override { return earlier_replays_ + replays(); }
  void recapture_graphs() override {
    if (!graphs_) return;
    earlier_replays_ += replays();
    graphs_.reset();  // the old graphs' pool goes back first
    verify_graphs_.reset();
    capture_graphs();
  }

  model::LatentCache* kv_cache() override { return &cache_; }
  int64_t reported_layers() const override { return model_.config().num_hidden_layers; }
  std::unique_ptr<backend::WorkMark> mark_work() override { return model_.backend().mark_work(); }
  void set_wait_poll(std::function<bool()> poll) override { model_.backend().set_wait_poll(std::move(poll)); }

  int64_t vocab_size() const override { return model_.config().vocab_size; }
  int64_t max_model_len() const override { return model_.max_positions(); }
  int64_t num_pages() const override { return pages_; }
  CacheAccess cache_access() override { return {&model_.backend(), &cache_}; }
  std::vector<int32_t> eos_token_ids() const override {
    std::vector<int32_t> ids;
    for (int64_t id : model_.config().eos_token_ids) ids.push_back(static_cast<int32_t>(id));
    return ids;
  }

 private:
  // Steps the current graphs have run.
  int64_t replays() const {
    return (graphs_ ? graphs_->replays() : 0) + (verify_graphs_ ? verify_graphs_->replays() : 0);
  }
  void capture_graphs() {
    if (graph_options_.max_batch <= 0) return;
    graphs_ = std::make_unique<model::DecodeGraphs>(model_, cache_, graph_options_);
    if (drafter_) verify_graphs_ = std::make_unique<model::DecodeGraphs>(model_, cache_, verify_options_);
  }

  const model::DeepseekModel& model_;
  int64_t pages_;  // the pool's pages; a graph scratch page may follow them in the cache
  model::LatentCache cache_;
  model::DecodeGraphOptions graph_options_;
  model::DecodeGraphOptions verify_options_;  // with speculative decoding: 1 + N tokens a sequence
  std::unique_ptr<model::DecodeGraphs> graphs_;
  std::unique_ptr<model::DecodeGraphs> verify_graphs_;  // the verification steps', with the MTP pass
  std::unique_ptr<MtpDrafter> drafter_;  // with speculative decoding
  int64_t earlier_replays_ = 0;  // of graphs captured before the current ones
  struct Launched {
    std::unique_ptr<backend::PendingTokens> tokens;
    std::vector<PromptLogprob> scores;  // of the batch's scored rows
  };
  std::deque<Launched> launched_;  // oldest first
  std::vector<PromptLogprob> collected_scores_;  // of the step collected last, until taken
  Tensor previous_tokens_;  // what the last launched step sampled, where the backend keeps it
};

}  // namespace

void StepExecutor::launch(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) {
  DSINFER_CHECK(ran_.size() < kMaxLaunchedSteps, "at most ", kMaxLaunchedSteps,
                " steps may be launched and not collected");
  ran_.push_back(run(batch, sampling));
}

SpeculativeResult StepExecutor::run_speculative(const model::ForwardBatch&, const backend::SamplingBatch&,
                                                const SpeculativeStep&) {
  throw Error("this executor cannot draft tokens (speculative decoding needs the model's MTP modules)");
}

backend::SampledTokens StepExecutor::collect() {
  DSINFER_CHECK(!ran_.empty(), "collect: no step was launched");
  backend::SampledTokens oldest = std::move(ran_.front());
  ran_.pop_front();
  return oldest;
}

std::unique_ptr<StepExecutor> make_model_executor(const model::DeepseekModel& model, int64_t pages,
                                                  const ExecutorOptions& options) {
  return std::make_unique<ModelExecutor>(model, pages, options);
}

int64_t pages_for(const model::DeepseekModel& model, int64_t sequences, int64_t context, int64_t bytes) {
  int64_t page_bytes = model.page_bytes();
  int64_t wanted = sequences * ((context + model::kPageSize - 1) / model::kPageSize);
  return std::max<int64_t>(1, std::min(wanted, bytes / page_bytes));
}

}  // namespace dsinfer::runtime
