// Speculative decoding's acceptance rule (speculative.h) on its own: strict and relaxed acceptance,
// the config's checks and description, and a statistical check that "sample t ~ p, keep the draft d
// when t == d, else emit t" emits tokens distributed as the target's p, next to a wrong rule the
// same check refuses.
#include "runtime/speculative.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "runtime/uniform_source.h"

namespace dsinfer::runtime {
namespace {

using Tokens = std::vector<int32_t>;

SpeculativeConfig drafts_of(int n) {
  SpeculativeConfig config;
  config.num_tokens = n;
  return config;
}

TEST(AcceptDrafts, StrictKeepsTheDraftsWhileTheyEqualTheTargetsSamples) {
  const SpeculativeConfig config = drafts_of(3);
  // All accepted: the sequence gains the drafts and the sample after the last one.
  Acceptance all = accept_drafts(Tokens{5, 6, 7}, Tokens{5, 6, 7, 8}, config);
  EXPECT_EQ(all.accepted, 3);
  EXPECT_EQ(all.tokens, (Tokens{5, 6, 7, 8}));
  // None: the first row's sample alone.
  Acceptance none = accept_drafts(Tokens{5, 6, 7}, Tokens{4, 6, 7, 8}, config);
  EXPECT_EQ(none.accepted, 0);
  EXPECT_EQ(none.tokens, (Tokens{4}));
  // Partial: up to the first difference, whose sample ends the step; later agreement counts for nothing.
  Acceptance partial = accept_drafts(Tokens{5, 6, 7}, Tokens{5, 9, 7, 8}, config);
  EXPECT_EQ(partial.accepted, 1);
  EXPECT_EQ(partial.tokens, (Tokens{5, 9}));
  Acceptance two = accept_drafts(Tokens{5, 6, 7}, Tokens{5, 6, 1, 8}, config);
  EXPECT_EQ(two.accepted, 2);
  EXPECT_EQ(two.tokens, (Tokens{5, 6, 1}));
  // One draft, and no draft at all (a plain decode row).
  EXPECT_EQ(accept_drafts(Tokens{3}, Tokens{3, 2}, drafts_of(1)).tokens, (Tokens{3, 2}));
  EXPECT_EQ(accept_drafts(Tokens{}, Tokens{2}, drafts_of(1)).tokens, (Tokens{2}));
}

TEST(AcceptDrafts, RowsMustMatchTheDrafts) {
  EXPECT_THROW(accept_drafts(Tokens{5, 6}, Tokens{5, 6}, drafts_of(2)), Error);
  const std::vector<int32_t> ids = {5};
  const std::vector<float> logprobs = {0.0f};
  const std::vector<TargetTop> one = {{ids, logprobs}};
  EXPECT_THROW(accept_drafts(Tokens{5, 6}, Tokens{5, 6, 7}, drafts_of(2), one), Error);
}

// The target's top tokens at one position, from probabilities (most likely first).
struct Top {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  Top(std::vector<int32_t> ids_in, const std::vector<float>& probabilities) : ids(std::move(ids_in)) {
    for (float p : probabilities) logprobs.push_back(std::log(p));
  }
  TargetTop view() const { return {ids, logprobs}; }
};

TEST(AcceptDrafts, RelaxedTakesADraftInsideTopKAndWithinDeltaAndEmitsTheDraft) {
  SpeculativeConfig config = drafts_of(2);
  config.relaxed = true;
  config.relaxed_topk = 3;
  config.relaxed_delta = 0.3f;
  // Position 0: top tokens 10 (0.5), 11 (0.3), 12 (0.15), 13 (0.05). Position 1: 20 (0.9), 21 (0.1).
  const Top first({10, 11, 12, 13}, {0.5f, 0.3f, 0.15f, 0.05f});
  const Top second({20, 21}, {0.9f, 0.1f});
  const std::vector<TargetTop> tops = {first.view(), second.view()};

  // 11 is second (0.3 >= 0.5 - 0.3) though the target sampled 10: taken, and 11 is emitted. 20 then
  // equals the sample.
  Acceptance inside = accept_drafts(Tokens{11, 20}, Tokens{10, 20, 30}, config, tops);
  EXPECT_EQ(inside.accepted, 2);
  EXPECT_EQ(inside.tokens, (Tokens{11, 20, 30}));
  // 12 is inside the top 3 but 0.15 < 0.5 - 0.3: refused; the target's sample ends the step.
  Acceptance below = accept_drafts(Tokens{12, 20}, Tokens{10, 20, 30}, config, tops);
  EXPECT_EQ(below.accepted, 0);
  EXPECT_EQ(below.tokens, (Tokens{10}));
  // 13 is outside the top 3 (and below delta); with a large delta, outside the top k still refuses.
  config.relaxed_delta = 1.0f;
  Acceptance outside = accept_drafts(Tokens{13, 20}, Tokens{10, 20, 30}, config, tops);
  EXPECT_EQ(outside.accepted, 0);
  EXPECT_EQ(outside.tokens, (Tokens{10}));
  // Within delta 1.0 and the top 3, 12 is taken now; at position 1, 21 (0.1 >= 0.9 - 1.0) too.
  Acceptance wide = accept_drafts(Tokens{12, 21}, Tokens{10, 20, 30}, config, tops);
  EXPECT_EQ(wide.accepted, 2);
  EXPECT_EQ(wide.tokens, (Tokens{12, 21, 30}));
  // A draft that is not among the target's tokens at all.
  Acceptance unknown = accept_drafts(Tokens{99, 20}, Tokens{10, 20, 30}, config, tops);
  EXPECT_EQ(unknown.accepted, 0);
}

TEST(AcceptDrafts, RelaxedAppliesOnlyWhereATargetTopIsGiven) {
  SpeculativeConfig config = drafts_of(2);
  config.relaxed = true;
  config.relaxed_delta = 1.0f;
  const Top first({10, 11}, {0.6f, 0.4f});
  // No tops at all: strict, so 11 against the sample 10 is refused.
  EXPECT_EQ(accept_drafts(Tokens{11, 20}, Tokens{10, 20, 30}, config).accepted, 0);
  // A top at position 1 only (position 0 outside the reasoning section): strict at 0, relaxed at 1.
  const std::vector<TargetTop> second_only = {TargetTop{}, first.view()};
  EXPECT_EQ(accept_drafts(Tokens{11, 11}, Tokens{10, 10, 30}, config, second_only).accepted, 0);
  Acceptance relaxed_second = accept_drafts(Tokens{10, 11}, Tokens{10, 10, 30}, config, second_only);
  EXPECT_EQ(relaxed_second.accepted, 2);
  EXPECT_EQ(relaxed_second.tokens, (Tokens{10, 11, 30}));
}

TEST(SpeculativeConfig, ValidateNamesWhatIsWrong) {
  for (int n = 0; n <= 3; ++n) EXPECT_NO_THROW(drafts_of(n).validate()) << n;
  auto message = [](const SpeculativeConfig& config) -> std::string {
    try {
      config.validate();
    } catch (const Error& error) {
      return error.what();
    }
    return "";
  };
  EXPECT_NE(message(drafts_of(4)).find("num_speculative_tokens must be 1 to 3, not 4"), std::string::npos);
  EXPECT_NE(message(drafts_of(-1)).find("not -1"), std::string::npos);
  SpeculativeConfig topk = drafts_of(1);
  topk.relaxed_topk = 0;
  EXPECT_NE(message(topk).find("relaxed_topk must be at least 1, not 0"), std::string::npos);
  SpeculativeConfig delta = drafts_of(1);
  delta.relaxed_delta = -0.1f;
  EXPECT_NE(message(delta).find("relaxed_delta must be within [0, 1]"), std::string::npos);
  delta.relaxed_delta = std::nanf("");
  EXPECT_NE(message(delta).find("relaxed_delta"), std::string::npos);
}

TEST(SpeculativeConfig, DescribeIsVllmsJsonWithOurKeys) {
  SpeculativeConfig config = drafts_of(2);
  Json strict = Json::parse(config.describe());
  EXPECT_EQ(strict["method"].as_string(), "mtp");
  EXPECT_EQ(strict["num_speculative_tokens"].as_int(), 2);
  EXPECT_EQ(strict["mode"].as_string(), "eagle");
  EXPECT_FALSE(strict.contains("use_relaxed_acceptance_for_thinking"));
  config.mode = SpeculativeConfig::Mode::kVanilla;
  config.relaxed = true;
  config.relaxed_topk = 5;
  config.relaxed_delta = 0.25f;
  Json relaxed = Json::parse(config.describe());
  EXPECT_EQ(relaxed["mode"].as_string(), "vanilla");
  EXPECT_TRUE(relaxed["use_relaxed_acceptance_for_thinking"].as_bool());
  EXPECT_EQ(relaxed["relaxed_topk"].as_int(), 5);
  EXPECT_DOUBLE_EQ(relaxed["relaxed_delta"].as_double(), 0.25);
}

// The statistical check. A vocabulary of 6 tokens, the target's p at each position fixed, one-hot
// drafts. Chi-square of the emitted tokens' counts against p, with 5 degrees of freedom: its 0.999
// quantile is 20.52, so a correct rule fails one run in a thousand seeds (this one is fixed).
constexpr int kVocab = 6;
constexpr double kChiSquare999 = 20.52;
using Distribution = std::array<double, kVocab>;
constexpr Distribution kTarget = {0.35, 0.25, 0.15, 0.12, 0.08, 0.05};
constexpr Distribution kSecondTarget = {0.05, 0.10, 0.40, 0.20, 0.15, 0.10};

int32_t sample(const Distribution& p, float u) {
  double cumulative = 0;
  for (int32_t token = 0; token < kVocab; ++token) {
    cumulative += p[token];
    if (u < cumulative) return token;
  }
  return kVocab - 1;
}

double chi_square(const std::array<int64_t, kVocab>& counts, const Distribution& p) {
  int64_t total = 0;
  for (int64_t count : counts) total += count;
  double statistic = 0;
  for (int token = 0; token < kVocab; ++token) {
    const double expected = p[token] * static_cast<double>(total);
    statistic += (static_cast<double>(counts[token]) - expected) * (static_cast<double>(counts[token]) - expected) /
                 expected;
  }
  return statistic;
}

struct Emitted {
  std::array<int64_t, kVocab> first{};   // every step's first token
  std::array<int64_t, kVocab> second{};  // the second token of steps that kept the first draft
};

// `draws` steps of two one-hot drafts (d1, d2) against targets p (position 0) and q (position 1, the
// same whatever came before, so its conditional distribution is q). `target_rows` makes the target's
// row samples from the step's uniform draws; accept_drafts decides what is emitted.
template <typename Rows>
Emitted emit(int draws, Rows target_rows) {
  UniformSource uniforms(17);
  const SpeculativeConfig config = drafts_of(2);
  const Tokens drafts = {0, 3};  // d1 is p's most likely token, d2 a middling one of q
  Emitted emitted;
  for (int i = 0; i < draws; ++i) {
    const Tokens rows = target_rows(uniforms, drafts);
    const Acceptance step = accept_drafts(drafts, rows, config);
    ++emitted.first[step.tokens[0]];
    if (step.accepted >= 1) ++emitted.second[step.tokens[1]];
  }
  return emitted;
}

// speculative.h's rule: every row samples the target with its own draw; a draft is kept when the
// target's sample equals it.
Tokens right_rows(UniformSource& uniforms, const Tokens&) {
  return {sample(kTarget, uniforms.next()), sample(kSecondTarget, uniforms.next()),
          sample(kTarget, uniforms.next())};
}

// A classic mistake: accept a draft with its probability, else sample the target anew *without*
// taking the draft out, which gives the draft p(d) + (1 - p(d)) p(d).
Tokens wrong_rows(UniformSource& uniforms, const Tokens& drafts) {
  auto row = [&](const Distribution& p, int32_t draft) {
    return uniforms.next() < p[draft] ? draft : sample(p, uniforms.next());
  };
  return {row(kTarget, drafts[0]), row(kSecondTarget, drafts[1]), sample(kTarget, uniforms.next())};
}

TEST(SpeculativeSampling, KeepingDraftsThatEqualTheTargetsSampleEmitsTheTargetsDistribution) {
  const Emitted emitted = emit(200'000, right_rows);
  const double first = chi_square(emitted.first, kTarget);
  const double second = chi_square(emitted.second, kSecondTarget);
  RecordProperty("chi_square_first", std::to_string(first));
  RecordProperty("chi_square_second", std::to_string(second));
  EXPECT_LT(first, kChiSquare999) << "first tokens";
  EXPECT_LT(second, kChiSquare999) << "second tokens after an accepted first draft";
  // The first draft is kept as often as the target draws it.
  EXPECT_NEAR(static_cast<double>(emitted.first[0]) / 200'000, kTarget[0], 0.005);
}

TEST(SpeculativeSampling, TheSameCheckRefusesARuleThatFavoursTheDraft) {
  const Emitted emitted = emit(200'000, wrong_rows);
  RecordProperty("chi_square_first", std::to_string(chi_square(emitted.first, kTarget)));
  RecordProperty("chi_square_second", std::to_string(chi_square(emitted.second, kSecondTarget)));
  EXPECT_GT(chi_square(emitted.first, kTarget), 100 * kChiSquare999);
  EXPECT_GT(chi_square(emitted.second, kSecondTarget), 10 * kChiSquare999);
  // Always keeping the draft is refused too: every first token is d1.
  const Emitted always = emit(20'000, [](UniformSource& uniforms, const Tokens& drafts) {
    return Tokens{drafts[0], drafts[1], sample(kTarget, uniforms.next())};
  });
  EXPECT_GT(chi_square(always.first, kTarget), 100 * kChiSquare999);
}

}  // namespace
}  // namespace dsinfer::runtime
