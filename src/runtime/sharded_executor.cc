// See sharded_executor.h.
#include "runtime/sharded_executor.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <utility>

#include "core/log.h"
#include "model/batch_builder.h"

namespace dsinfer::runtime {

namespace {

// A step of DP attention: each DP group's part of the batch (its sequences, with their sampling
// rows), and where each of the step's sampled rows comes back from.
struct DpStep {
  std::vector<model::ForwardBatch> batches;        // [groups]
  std::vector<backend::SamplingBatch> sampling;    // [groups]
  std::vector<std::pair<int, int32_t>> row_home;   // [logit rows]: (group, its row in that group)
  std::vector<std::pair<int, int32_t>> score_home; // [scored rows]: (group, its scored row there)
};

// A sequence's DP group is its pages' group: the engine's pool gives each group `group_pages`
// consecutive page ids (PagePool's groups, the engine's scheduler keeps a sequence in one), and
// each group's ranks hold those pages as their cache's pages from 0.
//
// A placeholder -(r + 1) (the overlap scheduler's: row r of the tokens the step launched just before
// sampled) becomes -(i + 1) for the row i of its group's part of that step that sampled row r:
// `previous_rows` is that step's row_home. A sequence stays in its pages' group, so the row is
// always its own group's.
DpStep split_by_group(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling, int groups,
                      int64_t group_pages, int64_t vocab,
                      const std::vector<std::pair<int, int32_t>>& previous_rows) {
  const backend::AttentionBatch& attention = batch.attention;
  const int sequences = attention.num_sequences();
  std::vector<int> sequence_of(batch.token_ids.size());
  for (int s = 0; s < sequences; ++s)
    for (int32_t row = attention.query_start[s]; row < attention.query_start[s + 1]; ++row) sequence_of[row] = s;
  auto group_of = [&](int s) { return static_cast<int>(attention.pages(s)[0] / group_pages); };
  std::vector<int32_t> token_ids = batch.token_ids;  // placeholders in their group's rows
  for (size_t row = 0; row < token_ids.size(); ++row) {
    if (token_ids[row] >= 0) continue;
    const auto previous = static_cast<size_t>(-token_ids[row] - 1);
    DSINFER_CHECK(previous < previous_rows.size(), "placeholder for row ", previous, " of a previous step of ",
                  previous_rows.size(), " rows");
    const auto [group, local] = previous_rows[previous];
    DSINFER_CHECK(group == group_of(sequence_of[row]), "a placeholder of DP group ", group_of(sequence_of[row]),
                  " for a token sampled in group ", group);
    token_ids[row] = -(local + 1);
  }

  // Sequences in the caller's order (of their logit rows), then those without logit rows.
  std::vector<int> order;
  std::vector<std::vector<int32_t>> offsets(sequences);
  std::vector<bool> placed(sequences, false);
  for (int32_t row : batch.logit_rows) {
    const int s = sequence_of[row];
    DSINFER_CHECK(!placed[s] || order.back() == s, "the logit rows of a sequence must follow each other");
    if (!placed[s]) order.push_back(s);
    placed[s] = true;
    offsets[s].push_back(row - attention.query_start[s]);
  }
  for (int s = 0; s < sequences; ++s)
    if (!placed[s]) order.push_back(s);

  // Each sequence's scored rows (vLLM's prompt_logprobs), by their place in batch.scored_rows.
  std::vector<std::vector<int32_t>> scored_of(sequences);
  for (size_t i = 0; i < batch.scored_rows.size(); ++i)
    scored_of[sequence_of[batch.scored_rows[i].row]].push_back(static_cast<int32_t>(i));

  DpStep step;
  step.score_home.resize(batch.scored_rows.size());
  std::vector<int32_t> scored_in(groups, 0);  // scored rows given to each group so far
  std::vector<model::BatchBuilder> builders(groups);
  std::vector<std::vector<int32_t>> sampled(groups);  // each group's sampling rows, by the step's row
  for (int s : order) {
    const int32_t first = attention.query_start[s], count = attention.query_start[s + 1] - first;
    std::span<const int32_t> pages = attention.pages(s);
    const int g = group_of(s);
    DSINFER_CHECK(g < groups, "page ", pages[0], " is past the ", groups, " DP groups' ", groups * group_pages);
    std::vector<int32_t> local;  // its group's cache's page ids
    for (int32_t page : pages) {
      DSINFER_CHECK(page / group_pages == g, "a sequence's pages span DP groups (pages ", pages[0], " and ", page,
                    ", ", group_pages, " a group)");
      local.push_back(static_cast<int32_t>(page - g * group_pages));
    }
    builders[g].add(std::span<const int32_t>(token_ids).subspan(first, count), attention.positions[first],
                    std::move(local), offsets[s]);
    for (int32_t i : scored_of[s]) {  // after its sequence: score() takes rows of the last one added
      const model::ScoredRow& scored = batch.scored_rows[i];
      builders[g].score(scored.row - first, std::span<const int32_t>(&scored.target, 1), scored.top_n);
      step.score_home[i] = {g, scored_in[g]++};
    }
  }
  for (size_t row = 0; row < batch.logit_rows.size(); ++row) {
    const int g = group_of(sequence_of[batch.logit_rows[row]]);
    step.row_home.emplace_back(g, static_cast<int32_t>(sampled[g].size()));
    sampled[g].push_back(static_cast<int32_t>(row));
  }
  for (int g = 0; g < groups; ++g) {
    step.batches.push_back(builders[g].build(batch.mode));
    step.sampling.push_back(sampling.select_rows(sampled[g], vocab));
  }
  return step;
}

// Why a layout's decode steps cannot replay graphs (null: they can).
const char* why_eager(const ShardedModel& model) {
  const parallel::ParallelConfig& config = model.config();
  if (config.attention_dp > 1 && !(config.dispatches_experts() && config.low_latency_tokens > 0))
    return "DP attention gathers tokens, or dispatches them by the all-to-all, with counts through the host";
  return nullptr;
}

// Every rank runs its own ModelExecutor over its shard and cache. Without DP attention every rank
// runs the whole batch and rank 0's tokens are the step's; with it each DP group runs its part
// (split_by_group; a group with none runs an empty step, joining the experts' collectives), and
// each group's first rank's tokens go back to their rows.
class ShardedExecutor final : public StepExecutor {
 public:
  ShardedExecutor(ShardedModel& model, int64_t pages, const ExecutorOptions& options)
      : model_(model), pages_(pages) {
    ranks_.resize(model.size());
    // No drafting on the ranks: a sharded model does not draft (can_draft() is false, which the
    // engine checks before it asks for speculative decoding).
    const ExecutorOptions rank_options{.cuda_graph_max_batch = sharded_graph_batch(model, options.cuda_graph_max_batch),
                                       .speculative = {}};
    if (options.cuda_graph_max_batch > 0 && rank_options.cuda_graph_max_batch == 0)
      log_info("sharded model: decode steps run eagerly (", why_eager(model), ")");
    graphs_ = rank_options.cuda_graph_max_batch > 0;
    on_every_rank_capturing([&](int r) { ranks_[r] = make_model_executor(model.rank(r), pages, rank_options); });
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
    rebalance_when_due();
    if (groups() == 1) {
      model_.on_every_rank([&](int r) { ranks_[r]->launch(batch, sampling); });
      return;
    }
    // Placeholders point into the step launched just before, if it is still in flight (the overlap
    // scheduler launches a step before collecting the one before it).
    static const std::vector<std::pair<int, int32_t>> kNone;
    DpStep step = split_by_group(batch, sampling, groups(), pages_, vocab_size(),
                                 launched_.empty() ? kNone : launched_.back().row_home);
    size_t most = 0;  // the largest group's tokens: whether the experts' dispatch fits the peer buffers
    for (const model::ForwardBatch& part : step.batches) most = std::max(most, part.token_ids.size());
    model_.set_step_tokens(static_cast<int64_t>(most));
    // A graph holds the peer path: when the all-to-all runs, no rank may replay one.
    if (static_cast<int64_t>(most) > model_.config().low_latency_tokens)
      for (model::ForwardBatch& part : step.batches) part.eager = true;
    model_.on_every_rank([&](int r) {
      const int g = model_.rank(r).place().dp_rank();
      ranks_[r]->launch(step.batches[g], step.sampling[g]);
    });
    launched_.push_back(
        {std::move(step.row_home), std::move(step.score_home), sampling.any_logprobs(), sampling.max_top_logprobs()});
  }
  backend::SampledTokens collect() override {
    std::vector<backend::SampledTokens> tokens(ranks_.size());
    model_.on_every_rank([&](int r) { tokens[r] = ranks_[r]->collect(); });
    ++steps_since_rebalance_;
    backend::SampledTokens out = tokens[0];
    if (groups() > 1) {
      Launched step = std::move(launched_.front());
      launched_.pop_front();
      out = assemble(step, tokens);
      collected_score_home_ = std::move(step.score_home);
    }
    return out;
  }
  std::vector<PromptLogprob> take_scores() override {
    std::vector<std::vector<PromptLogprob>> scores(ranks_.size());
    for (size_t r = 0; r < ranks_.size(); ++r) scores[r] = ranks_[r]->take_scores();
    if (groups() == 1) return scores[0];
    // Each group's first rank scored its rows; they go back to the step's order.
    std::vector<PromptLogprob> out;
    for (const auto& [group, index] : std::exchange(collected_score_home_, {}))
      out.push_back(scores[static_cast<size_t>(group) * model_.config().attention_tp].at(index));
    return out;
  }

  int64_t graph_steps() const override {
    int64_t most = 0;
    for (const auto& rank : ranks_) most = std::max(most, rank->graph_steps());
    return most;
  }

  int64_t vocab_size() const override { return ranks_[0]->vocab_size(); }
  int64_t max_model_len() const override { return ranks_[0]->max_model_len(); }
  // Under DP attention every group's ranks hold a cache of pages_ pages of their own.
  int64_t num_pages() const override { return pages_ * groups(); }
  int64_t page_groups() const override { return groups(); }
  std::vector<int32_t> eos_token_ids() const override { return ranks_[0]->eos_token_ids(); }

 private:
  struct Launched {
    std::vector<std::pair<int, int32_t>> row_home;
    std::vector<std::pair<int, int32_t>> score_home;
    bool logprobs = false;
    int top_n = 0;
  };

  int groups() const { return model_.config().attention_dp; }

  // task(r) on every rank, with the graphs of a DP layout captured through the peer buffers (every
  // rank captures the same buckets in the same order, so the warm-up runs' exchanges pair up).
  void on_every_rank_capturing(const std::function<void(int)>& task) {
    if (groups() > 1 && graphs_) model_.set_step_tokens(model_.config().low_latency_tokens);
    model_.on_every_rank(task);
    model_.set_step_tokens(-1);
  }

  // EPLB: before the first step launched after every rebalance_steps collected ones, the experts
  // are placed anew from the loads counted since the last rebalance. A step still in flight (the
  // overlap scheduler's) finishes on the device first, and is collected as usual; the graphs, which
  // read the old weights, are captured anew.
  void rebalance_when_due() {
    const int64_t every = model_.balance().rebalance_steps;
    if (every <= 0 || steps_since_rebalance_ < every) return;
    model_.on_every_rank([&](int r) { model_.rank(r).backend().synchronize(); });
    Tensor load = model_.expert_load();
    Tensor window = load.clone();
    if (last_load_.defined())
      for (int64_t i = 0; i < window.numel(); ++i) window.data<int64_t>()[i] -= last_load_.data<int64_t>()[i];
    model_.rebalance(window);
    last_load_ = load;
    steps_since_rebalance_ = 0;
    if (graphs_) on_every_rank_capturing([&](int r) { ranks_[r]->recapture_graphs(); });
  }

  // The step's rows from each group's first rank, in the step's order.
  backend::SampledTokens assemble(const Launched& step, const std::vector<backend::SampledTokens>& ranks) const {
    const auto rows = static_cast<int64_t>(step.row_home.size());
    const int tp = model_.config().attention_tp;
    backend::SampledTokens out;
    out.tokens = Tensor::empty(DType::kI32, {rows});
    if (step.logprobs) {
      out.logprobs = Tensor::empty(DType::kF32, {rows});
      out.top_ids = Tensor::empty(DType::kI32, {rows, step.top_n});
      out.top_logprobs = Tensor::empty(DType::kF32, {rows, step.top_n});
    }
    for (int64_t row = 0; row < rows; ++row) {
      const auto [group, index] = step.row_home[row];
      const backend::SampledTokens& from = ranks[static_cast<size_t>(group) * tp];
      out.tokens.data<int32_t>()[row] = from.tokens.data<int32_t>()[index];
      if (!step.logprobs || !from.logprobs.defined()) continue;
      out.logprobs.data<float>()[row] = from.logprobs.data<float>()[index];
      const int64_t n = from.top_ids.defined() ? from.top_ids.dim(1) : 0;
      for (int64_t i = 0; i < n && i < step.top_n; ++i) {
        out.top_ids.data<int32_t>()[row * step.top_n + i] = from.top_ids.data<int32_t>()[index * n + i];
        out.top_logprobs.data<float>()[row * step.top_n + i] = from.top_logprobs.data<float>()[index * n + i];
      }
    }
    return out;
  }

  ShardedModel& model_;
  int64_t pages_;  // each rank's cache
  std::vector<std::unique_ptr<StepExecutor>> ranks_;
  bool graphs_ = false;                // every rank captured decode graphs
  int64_t steps_since_rebalance_ = 0;
  Tensor last_load_;                   // the loads at the last rebalance
  std::deque<Launched> launched_;  // DP steps launched and not collected, oldest first
  std::vector<std::pair<int, int32_t>> collected_score_home_;  // of the DP step collected last
};

}  // namespace

int sharded_graph_batch(const ShardedModel& model, int requested) {  // see why_eager
  const parallel::ParallelConfig& config = model.config();
  if (requested <= 0 || why_eager(model)) return 0;
  return config.attention_dp > 1 ? static_cast<int>(std::min<int64_t>(requested, config.low_latency_tokens)) : requested;
}

std::unique_ptr<StepExecutor> make_sharded_executor(ShardedModel& model, int64_t pages,
                                                    const ExecutorOptions& options) {
  return std::make_unique<ShardedExecutor>(model, pages, options);
}

}  // namespace dsinfer::runtime
