// The engine end to end: with the hashing stand-in model (paging checked through the tokens it
// produces) and with a real fixture model (batched greedy output equals one-at-a-time output).
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "core/source_path.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/testing_executor.h"

namespace dsinfer::runtime {
namespace {

std::string fixture(const std::string& name) { return source_path("tests/fixtures/models/" + name); }

// Collects a request's stream; wait() blocks until the last delivery.
struct Collector {
  std::mutex mutex;
  std::condition_variable done_cv;
  std::vector<int32_t> tokens;
  std::string text;
  bool done = false;
  StreamOutput last;
  int deliveries = 0;

  StreamSink sink() {
    return [this](const StreamOutput& output) {
      std::lock_guard<std::mutex> lock(mutex);
      tokens.insert(tokens.end(), output.token_ids.begin(), output.token_ids.end());
      text += output.text;
      ++deliveries;
      if (output.finished) {
        done = true;
        last = output;
        done_cv.notify_all();
      }
    };
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    ASSERT_TRUE(done_cv.wait_for(lock, std::chrono::seconds(60), [&] { return done; })) << "request never finished";
  }
};

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

class HashingEngine : public ::testing::Test {
 protected:
  void SetUp() override { tokenizer_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_dir(fixture("v3-tiny"))); }

  std::unique_ptr<Engine> make(int64_t pages, EngineConfig config = {}) {
    auto executor = std::make_unique<HashingExecutor>(1024, pages, 4096, std::vector<int32_t>{1});
    executor_ = executor.get();
    return std::make_unique<Engine>(std::move(executor), *tokenizer_, config);
  }

  void wait_idle(Engine& engine) {
    for (int i = 0; i < 2000 && (engine.stats().running || engine.stats().waiting); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  HashingExecutor* executor_ = nullptr;
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

TEST_F(HashingEngine, RejectsBadRequests) {
  auto engine = make(8);
  Collector unused;
  EXPECT_THROW(engine->submit({}, greedy(5), unused.sink()), InvalidRequest);
  EXPECT_THROW(engine->submit({5000}, greedy(5), unused.sink()), InvalidRequest);
  EXPECT_THROW(engine->submit(prompt_of(600, 1), greedy(5), unused.sink()), InvalidRequest);  // > 8 pages
  EXPECT_EQ(engine->stats().free_pages, 8);
}

TEST(RealModelEngine, BatchedGreedyOutputEqualsOneAtATime) {
  std::string dir = fixture("v3-tiny");
  auto backend = backend::make_cpu_backend();
  auto model = model::DeepseekModel::load(dir, *backend);
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(dir);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(prompt_of(3 + i * 11, i));
  std::vector<std::vector<int32_t>> alone;
  for (const auto& prompt : prompts) {
    GenerateOptions options;
    options.max_new_tokens = 12;
    alone.push_back(generate(*model, prompt, options).output_ids);
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
