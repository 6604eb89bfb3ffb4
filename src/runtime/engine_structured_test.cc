// Structured output and logit_bias through the engine (issue 12), on the CPU sampler: a stand-in
// model whose logits are noise, so that only the grammar's masks (or the biases) can make the
// output what the request asked for. Every constrained test runs with the overlap scheduler and
// without it (--disable-overlap-schedule), and both must give the same tokens.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "backend/cpu/ops.h"
#include "core/json.h"
#include "core/source_path.h"
#include "model/kv_cache.h"
#include "runtime/engine.h"
#include "runtime/stream_collector.h"
#include "structured/grammar_compiler.h"
#include "structured/grammar_matcher.h"

namespace dsinfer::runtime {
namespace {

constexpr int64_t kVocab = 1024;  // the v3-tiny fixture's tokenizer and logit width

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  return x ^ (x >> 29);
}

// A stand-in model whose logits are noise in [-4, 4), a function of each row's input token and
// position only (so the same sequence gets the same logits whatever else runs). It takes the
// overlap scheduler's form like a device executor: a launched batch's placeholders are resolved
// from the tokens of the step launched before it. Fresh logits every step: the CPU sampler writes
// the biases and masks into them.
class NoiseExecutor final : public StepExecutor {
 public:
  // ignore_masks: a broken sampler that drops the bitmasks (what the engine must survive).
  explicit NoiseExecutor(bool overlaps, bool ignore_masks = false) : overlaps_(overlaps), ignore_masks_(ignore_masks) {}

  backend::SampledTokens run(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) override {
    return sample(batch, batch.token_ids, sampling);
  }
  bool overlaps() const override { return overlaps_; }
  void launch(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) override {
    DSINFER_CHECK(launched_.size() < kMaxLaunchedSteps, "too many launched steps");
    std::vector<int32_t> ids = batch.token_ids;
    if (std::any_of(ids.begin(), ids.end(), [](int32_t id) { return id < 0; })) {
      DSINFER_CHECK(overlaps_ && last_tokens_.defined(), "placeholders with no step launched before");
      Tensor view = Tensor::wrap(ids.data(), DType::kI32, {static_cast<int64_t>(ids.size())}, Device::kCpu, nullptr);
      backend::cpu::resolve_placeholders(view, last_tokens_);
    }
    backend::SampledTokens sampled = sample(batch, ids, sampling);
    last_tokens_ = sampled.tokens;
    launched_.push_back(std::move(sampled));
  }
  backend::SampledTokens collect() override {
    DSINFER_CHECK(!launched_.empty(), "collect: no step was launched");
    backend::SampledTokens oldest = std::move(launched_.front());
    launched_.pop_front();
    return oldest;
  }
  int64_t vocab_size() const override { return kVocab; }
  int64_t max_model_len() const override { return 4096; }
  int64_t num_pages() const override { return 256; }
  std::vector<int32_t> eos_token_ids() const override { return {}; }

 private:
  backend::SampledTokens sample(const model::ForwardBatch& batch, const std::vector<int32_t>& ids,
                                const backend::SamplingBatch& sampling) {
    auto rows = static_cast<int64_t>(batch.logit_rows.size());
    Tensor logits = Tensor::empty(DType::kF32, {rows, kVocab});
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t t = batch.logit_rows[r];
      const uint64_t seed = mix(static_cast<uint64_t>(ids[t]), static_cast<uint64_t>(batch.attention.positions[t]));
      for (int64_t v = 0; v < kVocab; ++v)
        logits.data<float>()[r * kVocab + v] = static_cast<float>(mix(seed, v) >> 40) * 0x1p-24f * 8.0f - 4.0f;
    }
    if (!ignore_masks_) return backend::cpu::sample_tokens(logits, sampling);
    backend::SamplingBatch unmasked = sampling;
    unmasked.bitmask.clear();
    unmasked.bitmask_row.clear();
    return backend::cpu::sample_tokens(logits, unmasked);
  }

  bool overlaps_;
  bool ignore_masks_;
  std::deque<backend::SampledTokens> launched_;
  Tensor last_tokens_;
};

const tokenizer::Tokenizer& tiny_tokenizer() {
  static const tokenizer::Tokenizer tokenizer =
      tokenizer::Tokenizer::from_dir(source_path("tests/fixtures/models/v3-tiny"));
  return tokenizer;
}

// Compact JSON (no free whitespace), so that noise cannot spend the tokens on blanks.
structured::GrammarCompiler& tiny_compiler() {
  static structured::GrammarCompiler compiler = [] {
    structured::GrammarCompilerOptions options;
    options.vocab_size = kVocab;
    options.json_any_whitespace = false;
    return structured::GrammarCompiler(tiny_tokenizer(), options);
  }();
  return compiler;
}

struct Result {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason finish = FinishReason::kNone;
  std::string error;
};

class StructuredEngine : public ::testing::TestWithParam<bool> {  // the parameter: overlap on
 protected:
  StructuredEngine() {
    EngineConfig config;
    config.overlap_schedule = GetParam();
    config.num_pages = 256;
    engine_ = std::make_unique<Engine>(std::make_unique<NoiseExecutor>(GetParam()), tiny_tokenizer(), config);
  }

  // Runs requests at once (so that constrained rows share steps with free ones) and collects them.
  std::vector<Result> run(std::vector<RequestOptions> requests) {
    std::vector<std::unique_ptr<Collector>> collectors;
    for (size_t i = 0; i < requests.size(); ++i) {
      collectors.push_back(std::make_unique<Collector>());
      engine_->submit(tiny_tokenizer().encode("Answer: " + std::to_string(i)), requests[i], collectors.back()->sink());
    }
    std::vector<Result> results;
    for (auto& collector : collectors) {
      collector->wait();
      results.push_back({collector->tokens, collector->text, collector->last.finish_reason, collector->last.error});
    }
    for (int i = 0; i < 2000 && engine_->stats().running + engine_->stats().waiting > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EngineStats stats = engine_->stats();
    EXPECT_EQ(stats.free_pages, stats.total_pages);
    return results;
  }

  static RequestOptions constrained(const structured::GrammarSpec& spec, uint64_t seed, int64_t max_tokens = 200) {
    RequestOptions options;
    options.sampling.temperature = 1.0f;
    options.sampling.seed = seed;
    options.max_tokens = max_tokens;
    options.constraint = OutputConstraint{tiny_compiler().compile(spec), {}};
    return options;
  }

  // The grammar accepts the tokens (the stop token last) and ends there.
  static void expect_accepted(const structured::GrammarSpec& spec, const Result& result) {
    EXPECT_EQ(result.finish, FinishReason::kStop) << result.error;
    structured::GrammarMatcher matcher(tiny_compiler().compile(spec));
    for (int32_t token : result.tokens) ASSERT_TRUE(matcher.accept(token)) << "token " << token << " in " << result.text;
    EXPECT_TRUE(matcher.is_terminated()) << result.text;
  }

  std::unique_ptr<Engine> engine_;
};

TEST_P(StructuredEngine, ARegexConstraintGivesTextTheRegexMatches) {
  const std::string pattern = "[a-z]{3,8}@[a-z]{2,5}\\.(com|org)";
  structured::GrammarSpec spec = structured::GrammarSpec::regex(pattern);
  std::vector<RequestOptions> requests;
  for (uint64_t seed = 1; seed <= 4; ++seed) requests.push_back(constrained(spec, seed));
  RequestOptions free_text;  // unconstrained rows in the same steps stay unconstrained
  free_text.max_tokens = 20;
  requests.push_back(free_text);
  std::vector<Result> results = run(requests);
  std::set<std::string> distinct;
  for (size_t i = 0; i < 4; ++i) {
    expect_accepted(spec, results[i]);
    EXPECT_TRUE(std::regex_match(results[i].text, std::regex(pattern))) << results[i].text;
    distinct.insert(results[i].text);
  }
  EXPECT_GT(distinct.size(), 1u) << "seeded draws should differ";
  EXPECT_EQ(results[4].finish, FinishReason::kLength);
  EXPECT_FALSE(std::regex_match(results[4].text, std::regex(pattern)));
}

TEST_P(StructuredEngine, AChoiceConstraintGivesOneOfTheChoices) {
  const std::vector<std::string> choices = {"apple pie", "banana", "cherry tart", "dates"};
  structured::GrammarSpec spec = structured::GrammarSpec::choice(choices);
  std::vector<RequestOptions> requests;
  for (uint64_t seed = 10; seed < 16; ++seed) requests.push_back(constrained(spec, seed));
  for (const Result& result : run(requests)) {
    expect_accepted(spec, result);
    EXPECT_NE(std::find(choices.begin(), choices.end(), result.text), choices.end()) << result.text;
  }
}

TEST_P(StructuredEngine, AJsonSchemaConstraintGivesAnObjectWithTheRequiredKeys) {
  structured::GrammarSpec spec = structured::GrammarSpec::json_schema(R"({
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 6}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
                   "ok": {"type": "boolean"}, "kind": {"enum": ["cat", "dog"]}},
    "required": ["name", "age", "ok", "kind"], "additionalProperties": false})");
  std::vector<RequestOptions> requests;
  for (uint64_t seed = 20; seed < 24; ++seed) requests.push_back(constrained(spec, seed));
  for (const Result& result : run(requests)) {
    expect_accepted(spec, result);
    Json value;
    ASSERT_NO_THROW(value = Json::parse(result.text)) << result.text;
    ASSERT_TRUE(value.is_object()) << result.text;
    EXPECT_EQ(value.size(), 4u) << result.text;
    ASSERT_TRUE(value.contains("age") && value.find("age")->is_int()) << result.text;
    EXPECT_LE(value.find("age")->as_int(), 120);
    ASSERT_TRUE(value.contains("kind")) << result.text;
    EXPECT_TRUE(value.find("kind")->as_string() == "cat" || value.find("kind")->as_string() == "dog");
    ASSERT_TRUE(value.contains("ok") && value.find("ok")->is_bool()) << result.text;
    ASSERT_TRUE(value.contains("name") && value.find("name")->is_string()) << result.text;
  }
}

TEST_P(StructuredEngine, OverlappedAndSynchronousStepsGiveTheSameConstrainedTokens) {
  structured::GrammarSpec spec = structured::GrammarSpec::regex("(yes|no|maybe)-[0-9]{2,4}");
  std::vector<RequestOptions> requests;
  for (uint64_t seed = 30; seed < 34; ++seed) requests.push_back(constrained(spec, seed));
  std::vector<Result> here = run(requests);
  EngineConfig config;
  config.overlap_schedule = !GetParam();
  config.num_pages = 256;
  engine_ = std::make_unique<Engine>(std::make_unique<NoiseExecutor>(!GetParam()), tiny_tokenizer(), config);
  std::vector<Result> other = run(requests);
  for (size_t i = 0; i < here.size(); ++i) {
    expect_accepted(spec, here[i]);
    EXPECT_EQ(here[i].tokens, other[i].tokens) << here[i].text << " vs " << other[i].text;
  }
}

TEST_P(StructuredEngine, TheGrammarAppliesOnlyAfterTheReasoningEnds) {
  // The fixture's </think> is token 6. Biased to +100 it is written first, while the gate is closed
  // and every token is allowed; once the gate opens the grammar's mask bans it, bias or not.
  structured::GrammarSpec spec = structured::GrammarSpec::regex("[0-9]{4}");
  RequestOptions options = constrained(spec, 40, 50);
  options.constraint->reasoning_end = {6};
  options.logit_bias = {{6, 100.0f}};
  options.skip_special_tokens = false;
  Result result = run({options})[0];
  EXPECT_EQ(result.finish, FinishReason::kStop) << result.error;
  ASSERT_GE(result.tokens.size(), 2u);
  EXPECT_EQ(result.tokens[0], 6);
  std::vector<int32_t> answer(result.tokens.begin() + 1, result.tokens.end());
  structured::GrammarMatcher matcher(tiny_compiler().compile(spec));
  for (int32_t token : answer) ASSERT_TRUE(matcher.accept(token));
  EXPECT_TRUE(matcher.is_terminated());
  answer.pop_back();  // the stop token
  EXPECT_TRUE(std::regex_match(tiny_tokenizer().decode(answer), std::regex("[0-9]{4}"))) << tiny_tokenizer().decode(answer);
}

TEST_P(StructuredEngine, MinTokensCannotKeepAFinishedGrammarGoing) {
  structured::GrammarSpec spec = structured::GrammarSpec::choice({"ok"});
  RequestOptions options = constrained(spec, 50);
  options.min_tokens = 30;  // bans the stop token until 30 tokens, but the grammar ends after "ok"
  Result result = run({options})[0];
  expect_accepted(spec, result);
  EXPECT_EQ(result.text, "ok");
}

TEST_P(StructuredEngine, LogitBiasOfPlusAHundredForcesATokenAndMinusAHundredBansIt) {
  const int32_t forced = tiny_tokenizer().encode("x", false).at(0);
  RequestOptions force;
  force.sampling.temperature = 1.0f;
  force.sampling.seed = 60;
  force.max_tokens = 12;
  force.logit_bias = {{forced, 100.0f}};
  RequestOptions plain = force;
  plain.logit_bias.clear();
  plain.sampling.temperature = 0.0f;
  std::vector<Result> first = run({force, plain});
  EXPECT_EQ(first[0].tokens, std::vector<int32_t>(12, forced));
  ASSERT_EQ(first[1].tokens.size(), 12u);

  // Greedy without a bias picks plain's tokens; banning the first of them must change it, and
  // the banned token never comes back.
  RequestOptions ban = plain;
  ban.logit_bias = {{first[1].tokens[0], -100.0f}};
  Result banned = run({ban})[0];
  ASSERT_FALSE(banned.tokens.empty());
  EXPECT_NE(banned.tokens[0], first[1].tokens[0]);
  EXPECT_EQ(std::count(banned.tokens.begin(), banned.tokens.end(), first[1].tokens[0]), 0);
}

TEST_P(StructuredEngine, ATokenTheGrammarRefusesFailsOnlyItsRequest) {
  EngineConfig config;
  config.overlap_schedule = GetParam();
  config.num_pages = 256;
  engine_ = std::make_unique<Engine>(std::make_unique<NoiseExecutor>(GetParam(), /*ignore_masks=*/true),
                                     tiny_tokenizer(), config);
  RequestOptions free_text;
  free_text.max_tokens = 30;
  std::vector<Result> results = run({constrained(structured::GrammarSpec::regex("[0-9]{40}"), 70), free_text});
  EXPECT_EQ(results[0].finish, FinishReason::kError);
  EXPECT_NE(results[0].error.find("is not allowed by the grammar (regex \"[0-9]{40}\")"), std::string::npos)
      << results[0].error;
  EXPECT_EQ(results[1].finish, FinishReason::kLength);
  EXPECT_EQ(results[1].tokens.size(), 30u);
  EXPECT_TRUE(engine_->healthy());
}

TEST_P(StructuredEngine, BadLogitBiasAndForeignGrammarsAreRefused) {
  Collector collector;
  RequestOptions outside;
  outside.logit_bias = {{static_cast<int32_t>(kVocab), 1.0f}};
  EXPECT_THROW(engine_->submit({5, 6, 7}, outside, collector.sink()), InvalidRequest);
  RequestOptions twice;
  twice.logit_bias = {{7, 1.0f}, {7, 2.0f}};
  EXPECT_THROW(engine_->submit({5, 6, 7}, twice, collector.sink()), InvalidRequest);
  // A grammar compiled for a wider vocabulary than the model's.
  structured::GrammarCompilerOptions wide;
  wide.vocab_size = kVocab + 64;
  structured::GrammarCompiler other(tiny_tokenizer(), wide);
  RequestOptions foreign;
  foreign.constraint = OutputConstraint{other.compile(structured::GrammarSpec::regex("a+")), {}};
  EXPECT_THROW(engine_->submit({5, 6, 7}, foreign, collector.sink()), InvalidRequest);
}

INSTANTIATE_TEST_SUITE_P(Overlap, StructuredEngine, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Overlapped" : "Synchronous";
                         });

}  // namespace
}  // namespace dsinfer::runtime
