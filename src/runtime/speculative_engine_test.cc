// Speculative decoding end to end (speculative.h, mtp_drafter.h) on the bundled model, whose MTP
// module was trained with it: with strict acceptance every output equals the output without
// drafts, greedy and seeded sampling alike, with requests batched, chunked, preempted, stopped and
// aborted in the middle of a step; the drafts are accepted often; every page goes back.
// On the CPU (ctest) outputs are equal exactly. On a GPU (DSINFER_TEST_DEVICE=cuda, gpu-test.sh's
// `speculative` step) the greedy test allows a parting at a near-tie, and the tests of exact
// equality (seeded sampling, stops, preemption) are left to the CPU, as with batch invariance.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "backend/make_backend.h"
#include "backend/test_device.h"
#include "core/file.h"
#include "core/json.h"
#include "core/source_path.h"
#include "core/strings.h"
#include "runtime/completion.h"
#include "runtime/engine.h"

namespace dsinfer::runtime {
namespace {

class SpeculativeEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = source_path("models/dsv3-tiny");
    backend_ = backend::make_backend(backend::test_device()).release();
    model_ = model::DeepseekModel::load(dir_, *backend_).release();
    tokenizer_ = new tokenizer::Tokenizer(tokenizer::Tokenizer::from_dir(dir_));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete model_;
    delete backend_;
  }

  // Prompts of the bundled model's held-out tasks (each answer thinks first, then answers).
  static std::vector<std::vector<int32_t>> prompts(int count) {
    std::vector<std::vector<int32_t>> out;
    for (const char* task : {"arith", "sort", "count", "reverse"}) {
      const std::vector<std::string> lines = split(read_file(dir_ + "/eval/" + task + ".jsonl"), '\n');
      for (int i = 0; i < 2 && static_cast<int>(out.size()) < count; ++i)
        out.push_back(tokenizer_->encode(Json::parse(lines[i]).find("prompt")->as_string(), false));
    }
    return out;
  }

  // Every prompt submitted at once; the tokens of each, in order (and their logprobs, when asked).
  static std::vector<std::vector<int32_t>> run_all(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                                   const RequestOptions& options,
                                                   std::vector<std::vector<TokenLogprob>>* logprobs = nullptr) {
    std::mutex mutex;
    std::condition_variable done;
    size_t finished = 0;
    std::vector<std::vector<int32_t>> tokens(prompts.size());
    if (logprobs) logprobs->assign(prompts.size(), {});
    for (size_t i = 0; i < prompts.size(); ++i) {
      engine.submit(prompts[i], options, [&, i](const StreamOutput& output) {
        std::lock_guard lock(mutex);
        tokens[i].insert(tokens[i].end(), output.token_ids.begin(), output.token_ids.end());
        if (logprobs) (*logprobs)[i].insert((*logprobs)[i].end(), output.logprobs.begin(), output.logprobs.end());
        if (output.finished) {
          ++finished;
          done.notify_all();
        }
      });
    }
    std::unique_lock lock(mutex);
    done.wait(lock, [&] { return finished == prompts.size(); });
    return tokens;
  }

  static EngineConfig config(int drafts) {
    EngineConfig config;
    config.num_pages = 64;
    config.max_num_batched_tokens = 96;  // prompts in chunks next to decodes
    config.speculative.num_tokens = drafts;
    return config;
  }

  static void expect_every_page_free(Engine& engine) {
    for (int i = 0; i < 2000 && (engine.stats().running || engine.stats().waiting); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EngineStats stats = engine.stats();
    EXPECT_EQ(stats.running + stats.waiting, 0);
    EXPECT_EQ(stats.free_pages, stats.total_pages);
  }

  // Greedy outputs with drafts against those without: equal on the CPU; on a GPU, where verifying
  // several rows at once computes with other kernels, equal up to the first near-tie of the output
  // without drafts (top two within 0.1 nats), where they may part.
  static void expect_greedy_equal(const std::vector<std::vector<int32_t>>& actual,
                                  const std::vector<std::vector<int32_t>>& expected,
                                  const std::vector<std::vector<TokenLogprob>>& expected_logprobs) {
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i) {
      if (backend::test_device() == "cpu") {
        EXPECT_EQ(actual[i], expected[i]) << "request " << i;
        continue;
      }
      for (size_t t = 0; t < std::max(actual[i].size(), expected[i].size()); ++t) {
        if (t < actual[i].size() && t < expected[i].size() && actual[i][t] == expected[i][t]) continue;
        ASSERT_LT(t, expected_logprobs[i].size()) << "request " << i << " is longer than its output without drafts";
        const auto& top = expected_logprobs[i][t].top;
        ASSERT_GE(top.size(), 2u);
        EXPECT_LT(top[0].second - top[1].second, 0.1f) << "request " << i << " parts at token " << t
                                                        << " where the margin is clear";
        break;
      }
    }
  }

  // Greedy outputs without drafts, and their top-2 logprobs (where a GPU's outputs may part).
  static std::vector<std::vector<int32_t>> without_drafts(const std::vector<std::vector<int32_t>>& prompts,
                                                          int64_t max_tokens,
                                                          std::vector<std::vector<TokenLogprob>>& margins) {
    Engine plain(*model_, *tokenizer_, config(0));
    RequestOptions with_margins = greedy(max_tokens);
    with_margins.logprobs = 2;
    return run_all(plain, prompts, with_margins, &margins);
  }

  static RequestOptions greedy(int64_t max_tokens) {
    RequestOptions options;
    options.max_tokens = max_tokens;
    return options;
  }

  static std::string dir_;
  static backend::Backend* backend_;
  static model::DeepseekModel* model_;
  static tokenizer::Tokenizer* tokenizer_;
};

std::string SpeculativeEngineTest::dir_;
backend::Backend* SpeculativeEngineTest::backend_ = nullptr;
model::DeepseekModel* SpeculativeEngineTest::model_ = nullptr;
tokenizer::Tokenizer* SpeculativeEngineTest::tokenizer_ = nullptr;

TEST_F(SpeculativeEngineTest, GreedyOutputsEqualThoseWithoutDrafts) {
  const auto inputs = prompts(6);
  std::vector<std::vector<TokenLogprob>> margins;
  const auto expected = without_drafts(inputs, 80, margins);
  for (int drafts = 1; drafts <= 3; ++drafts) {
    SCOPED_TRACE(drafts);
    Engine engine(*model_, *tokenizer_, config(drafts));
    expect_greedy_equal(run_all(engine, inputs, greedy(80)), expected, margins);
    Metrics& metrics = engine.metrics();
    const double proposed = static_cast<double>(metrics.spec_decode_draft_tokens.load());
    const double accepted = static_cast<double>(metrics.spec_decode_accepted_tokens.load());
    std::printf("%d drafts a step: %.0f of %.0f accepted, %.2f tokens a step\n", drafts, accepted, proposed,
                1.0 + accepted / static_cast<double>(metrics.spec_decode_drafts.load()));
    EXPECT_GT(metrics.spec_decode_drafts.load(), 0u);
    // The module predicts the next-next token right about 94% of the time on these tasks.
    EXPECT_GT(accepted / proposed, drafts == 1 ? 0.7 : 0.5) << accepted << " of " << proposed;
    EXPECT_EQ(metrics.spec_decode_accepted_per_position[0].load() >= metrics.spec_decode_accepted_per_position[1].load(),
              true);
    expect_every_page_free(engine);
  }
}

// Adaptive drafting: while more requests are live than disable_by_batch_size, steps run without
// drafts (the outputs stay those without speculative decoding); a request that ran such a step
// drafts no more, and requests that come after those have left draft again.
TEST_F(SpeculativeEngineTest, DraftingStopsAboveTheBatchLimitAndResumesAfter) {
  const auto inputs = prompts(6);
  std::vector<std::vector<TokenLogprob>> margins;
  const auto expected = without_drafts(inputs, 60, margins);

  EngineConfig unlimited = config(1);
  unlimited.speculative.disable_by_batch_size = 0;
  Engine always(*model_, *tokenizer_, unlimited);
  expect_greedy_equal(run_all(always, inputs, greedy(60)), expected, margins);
  const uint64_t always_drafted = always.metrics().spec_decode_drafts.load();

  EngineConfig limited = config(1);
  limited.speculative.disable_by_batch_size = 2;
  Engine engine(*model_, *tokenizer_, limited);
  expect_greedy_equal(run_all(engine, inputs, greedy(60)), expected, margins);
  const uint64_t drafted = engine.metrics().spec_decode_drafts.load();
  // Six requests are live from the first steps on (the first may draft a step or two before the
  // others are submitted).
  EXPECT_LT(drafted * 4, always_drafted) << drafted << " drafting steps with the limit, " << always_drafted
                                         << " without";
  expect_every_page_free(engine);

  expect_greedy_equal(run_all(engine, {inputs[0]}, greedy(60)), {expected[0]}, {margins[0]});
  EXPECT_GT(engine.metrics().spec_decode_drafts.load(), drafted + 10);  // alone, it drafts
  expect_every_page_free(engine);
}

TEST_F(SpeculativeEngineTest, SeededSamplingDrawsTheSameTokens) {
  const auto inputs = prompts(4);
  RequestOptions options = greedy(60);
  options.sampling.temperature = 0.9f;
  options.sampling.top_p = 0.95f;
  options.sampling.seed = 1234;
  options.logprobs = 2;
  Engine plain(*model_, *tokenizer_, config(0));
  const auto expected = run_all(plain, inputs, options);
  Engine engine(*model_, *tokenizer_, config(2));
  EXPECT_EQ(run_all(engine, inputs, options), expected);
  EXPECT_GT(engine.metrics().spec_decode_accepted_tokens.load(), 0u);
  expect_every_page_free(engine);
}

// A stop token in the middle of a step's accepted tokens ends the request there, as without drafts;
// so does max_tokens.
TEST_F(SpeculativeEngineTest, StopsInsideAStepEndWhereTheyWouldWithoutDrafts) {
  const auto inputs = prompts(6);
  for (int64_t max_tokens : {1, 2, 5, 17}) {
    SCOPED_TRACE(max_tokens);
    RequestOptions options = greedy(max_tokens);
    Engine plain(*model_, *tokenizer_, config(0));
    Engine engine(*model_, *tokenizer_, config(3));
    EXPECT_EQ(run_all(engine, inputs, options), run_all(plain, inputs, options));
    expect_every_page_free(engine);
  }
  // A token each answer produces early (the newline after <think>) as a stop token.
  RequestOptions options = greedy(80);
  options.stop_token_ids = {tokenizer_->encode("\n", false).at(0)};
  Engine plain(*model_, *tokenizer_, config(0));
  Engine engine(*model_, *tokenizer_, config(3));
  EXPECT_EQ(run_all(engine, inputs, options), run_all(plain, inputs, options));
  expect_every_page_free(engine);
}

// A pool too small for every request at once: requests are preempted and recomputed (drafts
// dropped and made again), and still give the same tokens.
TEST_F(SpeculativeEngineTest, PreemptedRequestsGiveTheSameTokens) {
  const auto inputs = prompts(8);
  EngineConfig small = config(2);
  small.num_pages = 6;
  small.enable_prefix_caching = false;
  EngineConfig small_plain = small;
  small_plain.speculative.num_tokens = 0;
  Engine plain(*model_, *tokenizer_, small_plain);
  Engine engine(*model_, *tokenizer_, small);
  EXPECT_EQ(run_all(engine, inputs, greedy(90)), run_all(plain, inputs, greedy(90)));
  EXPECT_GT(engine.stats().preemptions, 0);
  expect_every_page_free(engine);
}

TEST_F(SpeculativeEngineTest, AbortedRequestsReturnTheirPages) {
  Engine engine(*model_, *tokenizer_, config(3));
  std::vector<RequestId> ids;
  for (const auto& prompt : prompts(6)) ids.push_back(engine.submit(prompt, greedy(200), [](const StreamOutput&) {}));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (RequestId id : ids) engine.abort(id);
  expect_every_page_free(engine);
}

// A short piece (a prompt's last tokens after its prefix-cache hit) planned after longer prompts goes
// ahead of them in the batch (BatchBuilder keeps the absorbed form's rows first): the tokens that
// follow its rows, which the MTP module takes, must move with it. The long prompt's first chunk
// keeps the engine busy while the others arrive, so the short piece joins a step behind prompts
// whichever step takes it.
TEST_F(SpeculativeEngineTest, AShortPieceMovedAheadOfAPromptKeepsItsFollowingTokens) {
  auto synthetic = [](int length, int salt) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < length; ++i) prompt.push_back(16 + (i * 37 + salt * 101) % 6000);
    return prompt;
  };
  const std::vector<int32_t> cached = synthetic(130, 1), fresh = synthetic(100, 2), longer = synthetic(300, 3);
  EngineConfig with_drafts = config(2);
  with_drafts.max_num_batched_tokens = 256;
  EngineConfig without = with_drafts;
  without.speculative.num_tokens = 0;
  RequestOptions options = greedy(8);
  options.sampling.temperature = 0.0f;
  Engine engine(*model_, *tokenizer_, with_drafts);
  run_all(engine, {cached}, options);  // its first two pages into the prefix cache: 2 tokens left
  Engine plain(*model_, *tokenizer_, without);
  EXPECT_EQ(run_all(engine, {longer, fresh, cached}, options), run_all(plain, {longer, fresh, cached}, options));
  EXPECT_GE(engine.stats().prefix_hits, 128);
  expect_every_page_free(engine);
}

// Relaxed acceptance takes more drafts inside <think> and none outside it; outputs stay answers.
TEST_F(SpeculativeEngineTest, RelaxedAcceptanceTakesMoreDraftsWhileThinking) {
  const auto inputs = prompts(6);
  EngineConfig strict_config = config(2);
  EngineConfig relaxed_config = config(2);
  relaxed_config.speculative.relaxed = true;
  relaxed_config.speculative.relaxed_delta = 0.9f;
  Engine strict(*model_, *tokenizer_, strict_config);
  Engine relaxed(*model_, *tokenizer_, relaxed_config);
  RequestOptions options = greedy(80);
  options.sampling.temperature = 1.0f;
  options.sampling.seed = 7;
  run_all(strict, inputs, options);
  auto tokens = run_all(relaxed, inputs, options);
  auto rate = [](Engine& engine) {
    return static_cast<double>(engine.metrics().spec_decode_accepted_tokens.load()) /
           static_cast<double>(engine.metrics().spec_decode_draft_tokens.load());
  };
  EXPECT_GE(rate(relaxed), rate(strict));
  for (const auto& answer : tokens) EXPECT_FALSE(answer.empty());
  expect_every_page_free(relaxed);
}

}  // namespace
}  // namespace dsinfer::runtime
