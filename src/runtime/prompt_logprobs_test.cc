// vLLM's prompt_logprobs in the engine: one row's scoring against a plain reference; then whole
// requests on the fixture model against one direct forward pass of the prompt (across chunked-prefill
// boundaries, with a prefix cache that holds the prompt, under preemption), and on the hashing
// stand-in, whose rows say which context they read, with overlapped steps and preemption.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "backend/make_backend.h"
#include "backend/test_device.h"
#include "core/source_path.h"
#include "model/batch_builder.h"
#include "runtime/engine.h"
#include "runtime/prompt_scores.h"
#include "runtime/stream_collector.h"
#include "runtime/testing_executor.h"

namespace dsinfer::runtime {
namespace {

std::string fixture_dir() { return source_path("tests/fixtures/models/v3-tiny"); }

std::vector<int32_t> prompt_of(int length, int salt) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < length; ++i) prompt.push_back(16 + (i * 37 + salt * 101) % 1000);
  return prompt;
}

RequestOptions scored(int top_n, int64_t max_tokens = 2) {
  RequestOptions options;
  options.sampling.temperature = 0.0f;
  options.max_tokens = max_tokens;
  options.ignore_eos = true;
  options.prompt_logprobs = top_n;
  return options;
}

void wait_idle(Engine& engine) {
  for (int i = 0; i < 5000 && (engine.stats().running || engine.stats().waiting); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EngineStats stats = engine.stats();
  EXPECT_EQ(stats.running + stats.waiting, 0);
  EXPECT_EQ(stats.free_pages, stats.total_pages);
}

// A row scored the plain way: log-softmax in long double, rank by counting, top n by a full sort.
struct Reference {
  int32_t token = 0;
  double logprob = 0.0;
  int32_t rank = 0;
  std::vector<std::pair<int32_t, double>> top;
};

Reference reference_of(const float* row, int64_t V, int32_t target, int top_n) {
  long double max_logit = *std::max_element(row, row + V), total = 0.0L;
  for (int64_t i = 0; i < V; ++i) total += std::exp(static_cast<long double>(row[i]) - max_logit);
  const long double normalizer = max_logit + std::log(total);
  Reference out;
  out.token = target;
  out.logprob = static_cast<double>(row[target] - normalizer);
  for (int64_t i = 0; i < V; ++i) out.rank += row[i] >= row[target] ? 1 : 0;
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  for (int i = 0; i < top_n && i < V; ++i)
    out.top.emplace_back(order[i], static_cast<double>(row[order[i]] - normalizer));
  return out;
}

void expect_matches(const std::vector<PromptLogprob>& got, const std::vector<Reference>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t p = 0; p < got.size(); ++p) {
    SCOPED_TRACE(testing::Message() << "prompt token " << p + 1);
    EXPECT_EQ(got[p].token_id, want[p].token);
    EXPECT_NEAR(got[p].logprob, want[p].logprob, 1e-4);
    EXPECT_EQ(got[p].rank, want[p].rank);
    ASSERT_EQ(got[p].top.size(), want[p].top.size());
    for (size_t i = 0; i < got[p].top.size(); ++i) {
      EXPECT_EQ(got[p].top[i].first, want[p].top[i].first) << "top " << i;
      EXPECT_NEAR(got[p].top[i].second, want[p].top[i].second, 1e-4) << "top " << i;
    }
  }
}

TEST(ScoreLogits, GivesTheLogSoftmaxTheRankAndTheTopTokens) {
  const std::vector<float> logits = {0.5f, 2.0f, 2.0f, -1.0f, 1.0f};
  const Reference want = reference_of(logits.data(), 5, 4, 3);
  PromptLogprob got = score_logits(logits, 4, 3);
  EXPECT_EQ(got.token_id, 4);
  EXPECT_NEAR(got.logprob, want.logprob, 1e-6);
  EXPECT_EQ(got.rank, 3);  // the two 2.0s and itself
  ASSERT_EQ(got.top.size(), 3u);
  EXPECT_EQ(got.top[0].first, 1);  // a tie goes to the lower id
  EXPECT_EQ(got.top[1].first, 2);
  EXPECT_EQ(got.top[2].first, 4);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(got.top[i].second, want.top[i].second, 1e-6);
  // A tied token ranks behind every token it ties with (vLLM counts them).
  EXPECT_EQ(score_logits(logits, 1, 0).rank, 2);
  EXPECT_EQ(score_logits(logits, 3, 0).rank, 5);
  EXPECT_TRUE(score_logits(logits, 3, 0).top.empty());
  EXPECT_EQ(score_logits(logits, 0, 20).top.size(), 5u);  // no more than the vocabulary
  EXPECT_THROW(score_logits(logits, 5, 1), Error);
}

// The fixture model, and the reference for a prompt: one forward pass over all of it, every row's
// logits on the host.
class RealModelPromptLogprobs : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = backend::make_backend(backend::test_device());
    model_ = model::DeepseekModel::load(fixture_dir(), *backend_);
    tokenizer_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_dir(fixture_dir()));
  }

  std::vector<Reference> direct(const std::vector<int32_t>& prompt, int top_n) const {
    const auto length = static_cast<int64_t>(prompt.size());
    const int64_t pages = (length + model::kPageSize - 1) / model::kPageSize;
    model::LatentCache cache = model_->make_cache(pages);
    std::vector<int32_t> page_ids(static_cast<size_t>(pages));
    std::iota(page_ids.begin(), page_ids.end(), 0);
    model::BatchBuilder builder;
    builder.add(prompt, 0, page_ids, model::LogitRows::kAll);
    Tensor logits = model_->forward(builder.build(), cache).logits;  // [prompt, V] on the host
    const int64_t V = logits.dim(1);
    std::vector<Reference> rows;
    for (int64_t p = 0; p + 1 < length; ++p)
      rows.push_back(reference_of(logits.data<float>() + p * V, V, prompt[p + 1], top_n));
    return rows;
  }

  std::unique_ptr<Engine> engine(EngineConfig config) const {
    return std::make_unique<Engine>(*model_, *tokenizer_, config);
  }

  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<model::DeepseekModel> model_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
};

TEST_F(RealModelPromptLogprobs, EqualADirectForwardAcrossChunkedPrefillBoundaries) {
  EngineConfig config;
  config.max_num_batched_tokens = 40;  // the prompts arrive in chunks of at most 40 rows
  auto served = engine(config);
  const std::vector<int32_t> prompt = prompt_of(150, 1), beside = prompt_of(90, 2);
  Collector scored_request, other;
  served->submit(prompt, scored(5), scored_request.sink());
  served->submit(beside, scored(-1), other.sink());  // shares the steps, asks for none
  scored_request.wait();
  other.wait();
  expect_matches(scored_request.prompt_logprobs, direct(prompt, 5));
  EXPECT_EQ(scored_request.prompt_logprob_deliveries, std::vector<int>{0}) << "all of them, with the first token";
  EXPECT_TRUE(other.prompt_logprob_deliveries.empty());
  EXPECT_EQ(scored_request.tokens.size(), 2u);
  EXPECT_GE(served->stats().steps, 150 / 40) << "the prompt was not chunked";
  wait_idle(*served);
}

TEST_F(RealModelPromptLogprobs, APromptThePrefixCacheHoldsIsComputedAndScoredWhole) {
  auto served = engine(EngineConfig{});
  const std::vector<int32_t> prompt = prompt_of(150, 3);
  Collector warm, scoring, after;
  served->submit(prompt, scored(-1), warm.sink());
  warm.wait();
  served->submit(prompt, scored(2), scoring.sink());
  scoring.wait();
  served->submit(prompt, scored(-1), after.sink());
  after.wait();
  EXPECT_EQ(warm.last.cached_tokens, 0);
  EXPECT_EQ(scoring.last.cached_tokens, 0) << "rows taken from the cache are never scored";
  expect_matches(scoring.prompt_logprobs, direct(prompt, 2));
  EXPECT_EQ(after.last.cached_tokens, 128) << "the cache held the prompt's two full pages all along";
  EXPECT_EQ(scoring.tokens, warm.tokens);
  wait_idle(*served);
}

TEST_F(RealModelPromptLogprobs, ARequestThatScoresItsPromptStillPublishesItsPages) {
  auto served = engine(EngineConfig{});
  const std::vector<int32_t> prompt = prompt_of(140, 4);
  Collector scoring, after;
  served->submit(prompt, scored(0), scoring.sink());
  scoring.wait();
  served->submit(prompt, scored(-1), after.sink());
  after.wait();
  expect_matches(scoring.prompt_logprobs, direct(prompt, 0));
  EXPECT_EQ(after.last.cached_tokens, 128);
  wait_idle(*served);
}

TEST_F(RealModelPromptLogprobs, PreemptionNeitherRepeatsNorLosesRows) {
  EngineConfig config;
  config.num_pages = 4;                // 256 slots for a 250-token request and a 200-token prompt
  config.max_num_batched_tokens = 40;  // the scored prompt takes several steps
  config.watermark = 0.0;
  auto served = engine(config);
  const std::vector<int32_t> early = prompt_of(60, 5), late = prompt_of(200, 6);
  Collector decoding, scoring;
  served->submit(early, scored(-1, 190), decoding.sink());
  served->submit(late, scored(3), scoring.sink());
  decoding.wait();
  scoring.wait();
  EXPECT_GT(served->stats().preemptions, 0) << "the pool was meant to run out while the prompt was scored";
  EXPECT_EQ(scoring.last.finish_reason, FinishReason::kLength) << scoring.last.error;
  expect_matches(scoring.prompt_logprobs, direct(late, 3));
  wait_idle(*served);
}

// The hashing stand-in (testing_executor.h): row p of a prompt is right when its most likely token
// is the one the stand-in favours after the prompt's first p + 1 tokens.
void expect_rows_read_their_contexts(const HashingExecutor& executor, const std::vector<int32_t>& prompt,
                                     const std::vector<PromptLogprob>& rows, size_t top_n) {
  ASSERT_EQ(rows.size(), prompt.size() - 1) << "every prompt token after the first, once";
  for (size_t p = 0; p < rows.size(); ++p) {
    const int32_t favoured = executor.next_token(std::vector<int32_t>(prompt.begin(), prompt.begin() + p + 1));
    EXPECT_EQ(rows[p].token_id, prompt[p + 1]) << "row " << p;
    ASSERT_EQ(rows[p].top.size(), top_n) << "row " << p;
    if (top_n > 0) {
      EXPECT_EQ(rows[p].top[0].first, favoured) << "row " << p << " read another context";
    }
    EXPECT_EQ(rows[p].rank == 1, rows[p].token_id == favoured) << "row " << p;
  }
}

TEST(HashingPromptLogprobs, OverlappedStepsUnderPreemptionScoreEveryRowOnceInOrder) {
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(fixture_dir());
  auto owned = std::make_unique<HashingExecutor>(1024, 12, 4096, std::vector<int32_t>{1});
  HashingExecutor& executor = *owned;
  EngineConfig config;
  config.max_num_batched_tokens = 48;
  Engine engine(std::move(owned), tokenizer, config);  // 768 slots for 8 requests wanting ~200 each
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::unique_ptr<Collector>> collectors;
  for (int i = 0; i < 8; ++i) {
    // Pairs of one prompt, so that the prefix cache holds what a scored request must not take.
    prompts.push_back(prompt_of(100 + i / 2, i / 2));
    collectors.push_back(std::make_unique<Collector>());
    RequestOptions options = scored(i % 2 == 0 ? 2 : -1, 100);
    engine.submit(prompts.back(), options, collectors.back()->sink());
  }
  for (int i = 0; i < 8; ++i) {
    collectors[i]->wait();
    EXPECT_EQ(collectors[i]->tokens, executor.expected(prompts[i], 100)) << "request " << i;
    if (i % 2 == 0) {
      expect_rows_read_their_contexts(executor, prompts[i], collectors[i]->prompt_logprobs, 2);
      EXPECT_EQ(collectors[i]->prompt_logprob_deliveries, std::vector<int>{0}) << "request " << i;
    } else {
      EXPECT_TRUE(collectors[i]->prompt_logprobs.empty()) << "request " << i;
    }
  }
  EXPECT_GT(engine.stats().preemptions, 0);
  EXPECT_GT(executor.placeholders_resolved(), 0) << "the steps were not overlapped";
  wait_idle(engine);
}

// The stand-in behind a wrapper that cannot score (StepExecutor::take_scores' default).
class NonScoringExecutor final : public StepExecutor {
 public:
  explicit NonScoringExecutor(std::unique_ptr<HashingExecutor> inner) : inner_(std::move(inner)) {}
  backend::SampledTokens run(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) override {
    return inner_->run(batch, sampling);
  }
  int64_t vocab_size() const override { return inner_->vocab_size(); }
  int64_t max_model_len() const override { return inner_->max_model_len(); }
  int64_t num_pages() const override { return inner_->num_pages(); }
  std::vector<int32_t> eos_token_ids() const override { return inner_->eos_token_ids(); }

 private:
  std::unique_ptr<HashingExecutor> inner_;
};

TEST(HashingPromptLogprobs, AnExecutorThatCannotScoreFailsTheRequestAndBoundsAreChecked) {
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(fixture_dir());
  Engine engine(std::make_unique<NonScoringExecutor>(
                    std::make_unique<HashingExecutor>(1024, 16, 4096, std::vector<int32_t>{1})),
                tokenizer, EngineConfig{});
  Collector failed, plain;
  engine.submit(prompt_of(30, 1), scored(1), failed.sink());
  failed.wait();
  EXPECT_EQ(failed.last.finish_reason, FinishReason::kError);
  EXPECT_NE(failed.last.error.find("prompt_logprobs: the executor scored 0 of the step's 29 prompt rows"),
            std::string::npos)
      << failed.last.error;
  engine.submit(prompt_of(30, 1), scored(-1), plain.sink());
  plain.wait();
  EXPECT_EQ(plain.last.finish_reason, FinishReason::kLength);
  Collector refused;
  for (int bad : {21, -2}) {
    try {
      engine.submit(prompt_of(5, 1), scored(bad), refused.sink());
      ADD_FAILURE() << "accepted prompt_logprobs " << bad;
    } catch (const InvalidRequest& error) {
      EXPECT_EQ(error.part(), RequestPart::kPromptLogprobs);
    }
  }
  wait_idle(engine);
}

}  // namespace
}  // namespace dsinfer::runtime
