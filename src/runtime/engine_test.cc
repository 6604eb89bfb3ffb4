// The engine end to end: with the hashing stand-in model (paging checked through the tokens it
// produces), with that model failing on demand (a failed step fails its own requests, a fatal
// device error fails all of them), and with a real fixture model (batched greedy output equals
// one-at-a-time output).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "backend/make_backend.h"
#include "backend/test_device.h"
#include "core/source_path.h"
#include "runtime/completion.h"
#include "runtime/engine.h"
#include "runtime/stream_collector.h"
#include "runtime/step_error.h"
#include "runtime/testing_executor.h"

namespace dsinfer::runtime {
namespace {

std::string fixture(const std::string& name) { return source_path("tests/fixtures/models/" + name); }

// Blocks the test until `ready` holds (polling), failing after 60 s.
template <typename Ready>
void wait_until(Ready ready) {
  for (int i = 0; i < 60000 && !ready(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(ready()) << "timed out";
}

RequestOptions greedy(int64_t max_tokens) {
  RequestOptions options;
  options.sampling.temperature = 0.0f;
  options.max_tokens = max_tokens;
  return options;
}

std::vector<int32_t> prompt_of(int length, int salt) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < length; ++i) prompt.push_back(16 + (i * 37 + salt * 101) % 1000);
  return prompt;
}

// The stand-in model with failures on demand. Armed before the requests are submitted (so no
// timing is involved), it fails the step of the first batch that matches: launch throws before the
// model runs, or collect throws after it ran (a sampling failure: the stand-in cache already holds
// the step's tokens); a fatal failure throws FatalDeviceError, as a device with a sticky error would. It fails
// once.
class FailingExecutor final : public StepExecutor {
 public:
  enum class Failure { kNone, kRun, kSample, kFatalRun };

  explicit FailingExecutor(std::unique_ptr<HashingExecutor> inner) : inner_(std::move(inner)) {}
  // The batch hit: the (skip + 1)-th in which exactly `decoding` sequences each add one token;
  // with decoding 0, the first batch of any kind.
  void arm(Failure failure, int decoding = 0, int skip = 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = failure;
    decoding_ = decoding;
    skip_ = skip;
  }

  backend::SampledTokens run(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) override {
    launch(batch, sampling);
    return collect();
  }
  // The overlapped form, as the inner executor has it: a run failure throws from launch, a sampling
  // failure from the collect of that step (the next step may have been launched by then).
  bool overlaps() const override { return inner_->overlaps(); }
  void launch(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) override {
    bool sample_fails = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      bool decode_batch = batch.num_tokens() == batch.attention.num_sequences();
      bool matches = decoding_ == 0 || (decode_batch && batch.attention.num_sequences() == decoding_);
      if (armed_ != Failure::kNone && matches && skip_-- == 0) {
        Failure failure = std::exchange(armed_, Failure::kNone);
        if (failure == Failure::kFatalRun)
          throw FatalDeviceError("CUDA error: an illegal memory access was encountered");
        if (failure == Failure::kRun) throw Error("attention: out of scratch memory");
        sample_fails = true;
      }
    }
    inner_->launch(batch, sampling);
    sample_fails_.push_back(sample_fails);
  }
  backend::SampledTokens collect() override {
    backend::SampledTokens sampled = inner_->collect();
    bool fails = sample_fails_.front();
    sample_fails_.pop_front();
    if (fails) throw Error("sampling: bad logits");
    return sampled;
  }
  int64_t vocab_size() const override { return inner_->vocab_size(); }
  int64_t max_model_len() const override { return inner_->max_model_len(); }
  int64_t num_pages() const override { return inner_->num_pages(); }
  std::vector<int32_t> eos_token_ids() const override { return inner_->eos_token_ids(); }

 private:
  std::unique_ptr<HashingExecutor> inner_;
  std::mutex mutex_;
  Failure armed_ = Failure::kNone;
  int decoding_ = 0;
  int skip_ = 0;
  std::deque<bool> sample_fails_;  // per launched step: its collect throws
};

class HashingEngine : public ::testing::Test {
 protected:
  void SetUp() override { tokenizer_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_dir(fixture("v3-tiny"))); }

  std::unique_ptr<Engine> make(int64_t pages, EngineConfig config = {}) {
    auto executor = std::make_unique<HashingExecutor>(1024, pages, 4096, std::vector<int32_t>{1});
    executor_ = executor.get();
    return std::make_unique<Engine>(std::move(executor), *tokenizer_, config);
  }

  // The same stand-in model behind a FailingExecutor (failing_ points at it).
  std::unique_ptr<Engine> make_failing(int64_t pages, EngineConfig config = {}) {
    auto inner = std::make_unique<HashingExecutor>(1024, pages, 4096, std::vector<int32_t>{1});
    executor_ = inner.get();
    auto failing = std::make_unique<FailingExecutor>(std::move(inner));
    failing_ = failing.get();
    return std::make_unique<Engine>(std::move(failing), *tokenizer_, config);
  }

  void expect_every_page_free(Engine& engine) {
    wait_idle(engine);
    EngineStats stats = engine.stats();
    EXPECT_EQ(stats.running + stats.waiting, 0);
    EXPECT_EQ(stats.free_pages, stats.total_pages);
  }

  void wait_idle(Engine& engine) {
    for (int i = 0; i < 2000 && (engine.stats().running || engine.stats().waiting); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  HashingExecutor* executor_ = nullptr;
  FailingExecutor* failing_ = nullptr;
};

TEST_F(HashingEngine, ConcurrentRequestsProduceTheirOwnTokensAndFreeEveryPage) {
  auto engine = make(256);
  std::vector<std::unique_ptr<Collector>> collectors;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 64; ++i) {
    prompts.push_back(prompt_of(5 + (i * 13) % 150, i));
    collectors.push_back(std::make_unique<Collector>());
    engine->submit(prompts.back(), greedy(20 + i % 7), collectors.back()->sink());
  }
  for (int i = 0; i < 64; ++i) {
    collectors[i]->wait();
    EXPECT_EQ(collectors[i]->tokens, executor_->expected(prompts[i], 20 + i % 7)) << "request " << i;
    EXPECT_EQ(collectors[i]->last.finish_reason, FinishReason::kLength);
    EXPECT_EQ(collectors[i]->last.completion_tokens, 20 + i % 7);
    EXPECT_EQ(collectors[i]->text, tokenizer_->decode(collectors[i]->tokens, true));
  }
  wait_idle(*engine);
  EngineStats stats = engine->stats();
  EXPECT_EQ(stats.free_pages, stats.total_pages);
}

TEST_F(HashingEngine, ARepeatedPromptHitsThePrefixCacheWithIdenticalOutput) {
  auto engine = make(64);
  std::vector<int32_t> prompt = prompt_of(200, 3);
  Collector first, second;
  engine->submit(prompt, greedy(10), first.sink());
  first.wait();
  wait_idle(*engine);
  int64_t hits_before = engine->stats().prefix_hits;
  engine->submit(prompt, greedy(10), second.sink());
  second.wait();
  EXPECT_EQ(second.tokens, first.tokens);
  EXPECT_EQ(second.last.cached_tokens, 192);  // three full pages of 64
  EXPECT_EQ(engine->stats().prefix_hits - hits_before, 192);
}

TEST_F(HashingEngine, PreemptionUnderATinyPoolStillGivesCorrectOutputs) {
  EngineConfig config;
  config.enable_prefix_caching = false;
  auto engine = make(12, config);  // 768 slots for 8 requests wanting ~200 each
  std::vector<std::unique_ptr<Collector>> collectors;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(prompt_of(100 + i, i));
    collectors.push_back(std::make_unique<Collector>());
    engine->submit(prompts.back(), greedy(100), collectors.back()->sink());
  }
  for (int i = 0; i < 8; ++i) {
    collectors[i]->wait();
    EXPECT_EQ(collectors[i]->tokens, executor_->expected(prompts[i], 100)) << "request " << i;
  }
  wait_idle(*engine);
  EXPECT_GT(engine->stats().preemptions, 0);
  EXPECT_EQ(engine->stats().free_pages, 12);
}

TEST_F(HashingEngine, AbortFreesPagesAndEndsTheStream) {
  auto engine = make(64);
  Collector long_running;
  RequestId id = engine->submit(prompt_of(50, 1), greedy(100000), long_running.sink());
  while (engine->stats().running == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  engine->abort(id);
  long_running.wait();
  EXPECT_EQ(long_running.last.finish_reason, FinishReason::kAbort);
  engine->abort(id);    // again: ignored
  engine->abort(9999);  // unknown: ignored
  wait_idle(*engine);
  EXPECT_EQ(engine->stats().free_pages, 64);
}

TEST_F(HashingEngine, StopsAtStopStringsAndStopTokens) {
  auto engine = make(64);
  std::vector<int32_t> prompt = prompt_of(10, 9);
  std::vector<int32_t> expected = executor_->expected(prompt, 30);
  // Stop token: the 5th expected token.
  RequestOptions by_token = greedy(30);
  by_token.stop_token_ids = {expected[4]};
  Collector a;
  engine->submit(prompt, by_token, a.sink());
  a.wait();
  EXPECT_EQ(a.tokens, std::vector<int32_t>(expected.begin(), expected.begin() + 5));
  EXPECT_EQ(a.last.finish_reason, FinishReason::kStop);
  EXPECT_EQ(a.text, tokenizer_->decode(std::vector<int32_t>(expected.begin(), expected.begin() + 4), true));
  // Stop string: the text of tokens 6..7; the output ends right before it.
  std::string full = tokenizer_->decode(expected, true);
  std::string before = tokenizer_->decode(std::vector<int32_t>(expected.begin(), expected.begin() + 6), true);
  std::string stop = full.substr(before.size(), 3);
  ASSERT_FALSE(stop.empty());
  RequestOptions by_string = greedy(30);
  by_string.stop = {stop};
  Collector b;
  engine->submit(prompt, by_string, b.sink());
  b.wait();
  EXPECT_EQ(b.last.finish_reason, FinishReason::kStop);
  EXPECT_EQ(b.last.stop_reason, stop);
  EXPECT_EQ(b.text, full.substr(0, full.find(stop)));
}

TEST_F(HashingEngine, RejectsBadRequestsNamingThePartInItsOwnTerms) {
  auto engine = make(8);
  Collector unused;
  // The part the engine refused (the server names the API field that carried it).
  auto refused_part = [&](std::vector<int32_t> prompt, RequestOptions options) -> std::optional<RequestPart> {
    try {
      engine->submit(std::move(prompt), options, unused.sink());
    } catch (const InvalidRequest& error) {
      return error.part();
    }
    return std::nullopt;
  };
  EXPECT_EQ(refused_part({}, greedy(5)), RequestPart::kPrompt);
  EXPECT_EQ(refused_part({5000}, greedy(5)), RequestPart::kPrompt);
  EXPECT_EQ(refused_part(prompt_of(600, 1), greedy(5)), RequestPart::kPrompt);  // > 8 pages
  RequestOptions negative = greedy(5);
  negative.max_tokens = -1;
  EXPECT_EQ(refused_part({5, 6}, negative), RequestPart::kTokenBudget);
  RequestOptions many_logprobs = greedy(5);
  many_logprobs.logprobs = 21;
  EXPECT_EQ(refused_part({5, 6}, many_logprobs), RequestPart::kLogprobs);
  EXPECT_EQ(engine->stats().free_pages, 8);
}

TEST_F(HashingEngine, AStepThatThrowsFailsExactlyItsRequestsWhileTheOthersComplete) {
  EngineConfig config;
  config.max_num_seqs = 2;  // a and b run; c and d wait outside the step that fails
  auto engine = make_failing(64, config);
  // The second step in which a and b both decode fails (a may have run a few steps alone before b
  // arrived); a and b ask for more tokens than they can get before it.
  failing_->arm(FailingExecutor::Failure::kRun, /*decoding=*/2, /*skip=*/1);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::unique_ptr<Collector>> collectors;
  for (int i = 0; i < 4; ++i) {
    prompts.push_back(prompt_of(20 + i, i));
    collectors.push_back(std::make_unique<Collector>());
    engine->submit(prompts.back(), greedy(i < 2 ? 4000 : 12), collectors.back()->sink());
  }
  for (int i = 0; i < 2; ++i) {
    collectors[i]->wait();
    EXPECT_EQ(collectors[i]->last.finish_reason, FinishReason::kError) << "request " << i;
    EXPECT_NE(collectors[i]->last.error.find("out of scratch memory"), std::string::npos) << collectors[i]->last.error;
    size_t got = collectors[i]->tokens.size();
    EXPECT_GE(got, 2u) << "request " << i;
    EXPECT_EQ(collectors[i]->tokens, executor_->expected(prompts[i], static_cast<int64_t>(got))) << "request " << i;
    EXPECT_EQ(collectors[i]->last.completion_tokens, static_cast<int64_t>(got));
  }
  for (int i = 2; i < 4; ++i) {
    collectors[i]->wait();
    EXPECT_EQ(collectors[i]->last.finish_reason, FinishReason::kLength) << "request " << i;
    EXPECT_EQ(collectors[i]->tokens, executor_->expected(prompts[i], 12)) << "request " << i;
  }
  // A request after the failure runs as if nothing had happened.
  Collector later;
  engine->submit(prompts[0], greedy(30), later.sink());
  later.wait();
  EXPECT_EQ(later.tokens, executor_->expected(prompts[0], 30));
  EXPECT_TRUE(engine->healthy());
  EXPECT_EQ(engine->metrics().requests_failed.load(), 2u);
  expect_every_page_free(*engine);
}

TEST_F(HashingEngine, ASamplingFailureFailsItsStepAndTheSamePromptThenRunsCorrectly) {
  auto engine = make_failing(64);
  std::vector<int32_t> prompt = prompt_of(200, 5);
  failing_->arm(FailingExecutor::Failure::kSample);  // the prompt's first step runs, then sampling throws
  Collector failed;
  engine->submit(prompt, greedy(10), failed.sink());
  failed.wait();
  EXPECT_EQ(failed.last.finish_reason, FinishReason::kError);
  EXPECT_NE(failed.last.error.find("sampling: bad logits"), std::string::npos) << failed.last.error;
  EXPECT_TRUE(failed.tokens.empty());
  expect_every_page_free(*engine);
  Collector retried;
  engine->submit(prompt, greedy(10), retried.sink());
  retried.wait();
  EXPECT_EQ(retried.last.finish_reason, FinishReason::kLength);
  EXPECT_EQ(retried.tokens, executor_->expected(prompt, 10));
  expect_every_page_free(*engine);
}

TEST_F(HashingEngine, PromptPagesCachedBeforeAFailedStepStillGiveCorrectOutput) {
  auto engine = make_failing(64);
  std::vector<int32_t> prompt = prompt_of(200, 6);
  failing_->arm(FailingExecutor::Failure::kRun, /*decoding=*/1, /*skip=*/2);  // after the third token
  Collector failed;
  engine->submit(prompt, greedy(1000), failed.sink());
  failed.wait();
  EXPECT_EQ(failed.last.finish_reason, FinishReason::kError);
  EXPECT_EQ(failed.tokens, executor_->expected(prompt, 3));
  expect_every_page_free(*engine);
  Collector again;
  engine->submit(prompt, greedy(10), again.sink());
  again.wait();
  EXPECT_EQ(again.last.cached_tokens, 192);  // the prompt's three full pages, kept by the prefix cache
  EXPECT_EQ(again.tokens, executor_->expected(prompt, 10));
  expect_every_page_free(*engine);
}

TEST_F(HashingEngine, AFatalDeviceErrorFailsEveryRequestAndMarksTheEngineUnhealthy) {
  EngineConfig config;
  config.max_num_seqs = 2;  // two running, two waiting when the device fails
  auto engine = make_failing(64, config);
  EXPECT_TRUE(engine->healthy());
  EXPECT_EQ(engine->fatal_error(), "");
  std::vector<std::unique_ptr<Collector>> collectors;
  for (int i = 0; i < 4; ++i) {
    collectors.push_back(std::make_unique<Collector>());
    engine->submit(prompt_of(30 + i, i), greedy(4000), collectors.back()->sink());
  }
  // Armed once all four are in (a submit after the failure would be refused): the next step in
  // which the two running ones decode fails.
  failing_->arm(FailingExecutor::Failure::kFatalRun, /*decoding=*/2);
  for (int i = 0; i < 4; ++i) {
    collectors[i]->wait();
    EXPECT_EQ(collectors[i]->last.finish_reason, FinishReason::kError) << "request " << i;
    EXPECT_NE(collectors[i]->last.error.find("illegal memory access"), std::string::npos) << collectors[i]->last.error;
  }
  EXPECT_FALSE(engine->healthy());
  EXPECT_NE(engine->fatal_error().find("illegal memory access"), std::string::npos);
  Collector refused;
  EXPECT_THROW(engine->submit(prompt_of(10, 1), greedy(5), refused.sink()), EngineUnavailable);
  EXPECT_EQ(engine->metrics().requests_failed.load(), 4u);
  expect_every_page_free(*engine);
}

TEST_F(HashingEngine, AStopStringFoundOffTheEngineThreadEndsTheRequestAndFreesItsPages) {
  auto engine = make(64);
  std::vector<int32_t> prompt = prompt_of(10, 9);
  std::vector<int32_t> expected = executor_->expected(prompt, 30);
  std::string full = tokenizer_->decode(expected, true);
  std::string before = tokenizer_->decode(std::vector<int32_t>(expected.begin(), expected.begin() + 6), true);
  std::string stop = full.substr(before.size(), 3);
  ASSERT_FALSE(stop.empty());
  // The tokens up to the one that completes the stop string, and none after it.
  size_t through = 1;
  while (tokenizer_->decode(std::vector<int32_t>(expected.begin(), expected.begin() + through), true).find(stop) ==
         std::string::npos)
    ++through;
  RequestOptions options = greedy(100000);  // only the stop string can end it
  options.stop = {stop};
  Collector stopped;
  engine->submit(prompt, options, stopped.sink());
  stopped.wait();
  EXPECT_EQ(stopped.last.finish_reason, FinishReason::kStop);
  EXPECT_EQ(stopped.last.stop_reason, stop);
  EXPECT_EQ(stopped.text, full.substr(0, full.find(stop)));
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(expected.begin(), expected.begin() + through));
  EXPECT_EQ(stopped.last.completion_tokens, static_cast<int64_t>(through));
  expect_every_page_free(*engine);
  EXPECT_EQ(stopped.after_finish, 0);
  EXPECT_EQ(engine->metrics().requests_finished_stop.load(), 1u);
  EXPECT_EQ(engine->metrics().requests_aborted.load(), 0u);
  // The stop string completes on the last token max_tokens allows: the engine ends the request
  // for length, the client sees the stop string, and the metrics count what the client saw.
  options.max_tokens = static_cast<int64_t>(through);
  Collector at_limit;
  engine->submit(prompt, options, at_limit.sink());
  at_limit.wait();
  EXPECT_EQ(at_limit.last.finish_reason, FinishReason::kStop);
  EXPECT_EQ(at_limit.text, stopped.text);
  expect_every_page_free(*engine);
  EXPECT_EQ(engine->metrics().requests_finished_stop.load(), 2u);
  EXPECT_EQ(engine->metrics().requests_finished_length.load(), 0u);
}

TEST_F(HashingEngine, ASlowOrThrowingSinkDoesNotHoldUpTheEngineLoop) {
  auto engine = make(64);
  std::vector<int32_t> prompt = prompt_of(40, 2);
  std::mutex mutex;
  std::condition_variable released_cv;
  bool released = false;
  Collector slow;
  StreamSink collect = slow.sink();
  engine->submit(prompt, greedy(50), [&](const StreamOutput& output) {
    std::unique_lock<std::mutex> lock(mutex);
    released_cv.wait(lock, [&] { return released; });
    lock.unlock();
    collect(output);
  });
  // The engine finishes the request and frees its pages while its sink is still blocked.
  wait_until([&] { return engine->stats().steps == 50; });
  expect_every_page_free(*engine);
  {
    std::lock_guard<std::mutex> lock(mutex);
    released = true;
  }
  released_cv.notify_all();
  slow.wait();
  EXPECT_EQ(slow.tokens, executor_->expected(prompt, 50));
  // A sink that throws is not called again; nothing else is lost.
  engine->submit(prompt, greedy(5), [](const StreamOutput&) { throw Error("client gone"); });
  Collector fine;
  engine->submit(prompt, greedy(20), fine.sink());
  fine.wait();
  EXPECT_EQ(fine.tokens, executor_->expected(prompt, 20));
  expect_every_page_free(*engine);
}

// The overlap scheduler: the same tokens whether step N + 1 is planned before or after step N's
// tokens reach the host, including a request that stops on a token while its next row is in
// flight (that row's token is dropped) and requests that end at their length.
TEST_F(HashingEngine, OverlappedStepsGiveTheTokensOfSynchronousSteps) {
  for (bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlapped" : "synchronous");
    EngineConfig config;
    config.overlap_schedule = overlap;
    config.max_num_batched_tokens = 96;  // chunked prefills next to decodes
    auto engine = make(256, config);
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::unique_ptr<Collector>> collectors;
    std::vector<size_t> lengths;
    for (int i = 0; i < 12; ++i) {
      prompts.push_back(prompt_of(7 + (i * 29) % 170, 40 + i));
      lengths.push_back(static_cast<size_t>(3 + (i * 7) % 40));
    }
    const std::vector<int32_t> stopped_expected = executor_->expected(prompts[5], static_cast<int64_t>(lengths[5]));
    for (size_t i = 0; i < prompts.size(); ++i) {
      RequestOptions options = greedy(static_cast<int64_t>(lengths[i]));
      if (i == 5) options.stop_token_ids = {stopped_expected[4]};  // stops at its 5th token
      collectors.push_back(std::make_unique<Collector>());
      engine->submit(prompts[i], options, collectors.back()->sink());
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      collectors[i]->wait();
      std::vector<int32_t> expected = executor_->expected(prompts[i], static_cast<int64_t>(lengths[i]));
      if (i == 5) {
        expected.resize(5);
        EXPECT_EQ(collectors[i]->last.finish_reason, FinishReason::kStop);
      } else {
        EXPECT_EQ(collectors[i]->last.finish_reason, FinishReason::kLength);
      }
      EXPECT_EQ(collectors[i]->tokens, expected) << "request " << i;
      EXPECT_EQ(collectors[i]->last.completion_tokens, static_cast<int64_t>(expected.size())) << "request " << i;
      EXPECT_EQ(collectors[i]->after_finish, 0);
    }
    expect_every_page_free(*engine);
    if (overlap) {
      EXPECT_GT(executor_->placeholders_resolved(), 0) << "no step took its input from the step before it";
    } else {
      EXPECT_EQ(executor_->placeholders_resolved(), 0);
    }
  }
}

// A row with penalties needs its history on the host, so the step after it waits for its token:
// the same tokens as without overlap, and no placeholder ever sent.
TEST_F(HashingEngine, PenaltiesMakeTheNextStepWaitForTheTokensItNeeds) {
  std::vector<int32_t> prompt = prompt_of(30, 7);
  RequestOptions options;
  options.sampling.temperature = 0.8f;
  options.sampling.seed = 11;
  options.sampling.repetition_penalty = 1.5f;
  options.sampling.frequency_penalty = 0.5f;
  options.max_tokens = 24;
  std::vector<int32_t> tokens[2];
  for (bool overlap : {true, false}) {
    EngineConfig config;
    config.overlap_schedule = overlap;
    auto engine = make(64, config);
    Collector collector;
    engine->submit(prompt, options, collector.sink());
    collector.wait();
    tokens[overlap] = collector.tokens;
    EXPECT_EQ(executor_->placeholders_resolved(), 0);
    expect_every_page_free(*engine);
  }
  EXPECT_EQ(tokens[0].size(), 24u);
  EXPECT_EQ(tokens[1], tokens[0]);
}

TEST(RealModelEngine, BatchedGreedyOutputEqualsOneAtATime) {
  std::string dir = fixture("v3-tiny");
  auto backend = backend::make_backend(backend::test_device());
  auto model = model::DeepseekModel::load(dir, *backend);
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(dir);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(prompt_of(3 + i * 11, i));
  std::vector<std::vector<int32_t>> alone;
  for (const auto& prompt : prompts) {
    Engine single(*model, tokenizer, offline_engine_config(1, static_cast<int64_t>(prompt.size()), 12));
    RequestOptions options = greedy(12);
    options.ignore_eos = true;
    alone.push_back(complete_request(single, prompt, options).tokens);
  }
  EngineConfig config;
  config.max_num_batched_tokens = 40;  // forces chunked prefill next to decodes
  Engine engine(*model, tokenizer, config);
  std::vector<std::unique_ptr<Collector>> collectors;
  for (const auto& prompt : prompts) {
    collectors.push_back(std::make_unique<Collector>());
    RequestOptions options = greedy(12);
    options.ignore_eos = true;
    engine.submit(prompt, options, collectors.back()->sink());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    collectors[i]->wait();
    std::vector<int32_t> expected = alone[i];
    EXPECT_EQ(collectors[i]->tokens, expected) << "request " << i;
  }
}

}  // namespace
}  // namespace dsinfer::runtime
