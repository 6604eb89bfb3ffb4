// Workloads: length ranges as vLLM's random dataset draws them, reproducible prompts, and arrival
// times with the configured mean rate and the spread of a Poisson process.
#include "loadgen/workload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <set>
#include <string>

#include "core/error.h"
#include "core/source_path.h"
#include "core/strings.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::loadgen {
namespace {

WorkloadOptions options(int64_t num_prompts, int64_t input_len, int64_t output_len, double range_ratio,
                        uint64_t seed) {
  WorkloadOptions workload;
  workload.num_prompts = num_prompts;
  workload.input_len = input_len;
  workload.output_len = output_len;
  workload.range_ratio = range_ratio;
  workload.seed = seed;
  return workload;
}

TEST(WorkloadTest, LengthRangeAsVllm) {
  EXPECT_EQ(length_range(128, 0, 1).low, 128);
  EXPECT_EQ(length_range(128, 0, 1).high, 128);
  EXPECT_EQ(length_range(100, 0.5, 1).low, 50);
  EXPECT_EQ(length_range(100, 0.5, 1).high, 150);
  EXPECT_EQ(length_range(3, 0.9, 1).low, 1);  // floor(0.3) = 0, raised to the minimum
  EXPECT_EQ(length_range(3, 0.9, 1).high, 6);  // ceil(5.7)
}

TEST(WorkloadTest, TokenIdPromptsHaveExactLengthsInRange) {
  const PromptVocabulary vocabulary{1000, nullptr};
  const std::vector<Prompt> fixed = make_prompts(options(20, 128, 64, 0, 1), PromptFormat::kTokenIds, vocabulary);
  ASSERT_EQ(fixed.size(), 20u);
  for (const Prompt& prompt : fixed) {
    EXPECT_EQ(prompt.input_len, 128);
    EXPECT_EQ(prompt.token_ids.size(), 128u);
    EXPECT_EQ(prompt.output_len, 64);
    for (int32_t id : prompt.token_ids) ASSERT_TRUE(id >= 0 && id < 1000) << id;
  }
  std::set<int64_t> input_lens;
  for (const Prompt& prompt : make_prompts(options(500, 100, 10, 0.5, 1), PromptFormat::kTokenIds, vocabulary)) {
    EXPECT_TRUE(prompt.input_len >= 50 && prompt.input_len <= 150) << prompt.input_len;
    EXPECT_TRUE(prompt.output_len >= 5 && prompt.output_len <= 15) << prompt.output_len;
    EXPECT_EQ(static_cast<int64_t>(prompt.token_ids.size()), prompt.input_len);
    input_lens.insert(prompt.input_len);
  }
  EXPECT_GT(input_lens.size(), 80u);  // spread over the range, not stuck at its ends
}

TEST(WorkloadTest, SameSeedSamePrompts) {
  const PromptVocabulary vocabulary{1000, nullptr};
  const auto a = make_prompts(options(5, 32, 8, 0.25, 7), PromptFormat::kTokenIds, vocabulary);
  const auto b = make_prompts(options(5, 32, 8, 0.25, 7), PromptFormat::kTokenIds, vocabulary);
  const auto c = make_prompts(options(5, 32, 8, 0.25, 8), PromptFormat::kTokenIds, vocabulary);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].token_ids, b[i].token_ids);
    EXPECT_EQ(a[i].output_len, b[i].output_len);
  }
  EXPECT_NE(a[0].token_ids, c[0].token_ids);
}

TEST(WorkloadTest, TextPromptsOfWords) {
  const auto prompts = make_prompts(options(3, 40, 8, 0, 1), PromptFormat::kText, PromptVocabulary{});
  for (const Prompt& prompt : prompts) {
    EXPECT_TRUE(prompt.token_ids.empty());
    EXPECT_EQ(split(prompt.text, ' ').size(), 40u);
    EXPECT_EQ(prompt.input_len, 40);
  }
}

TEST(WorkloadTest, WithATokenizer) {
  const auto tokenizer = tokenizer::Tokenizer::from_dir(source_path("tests/fixtures/models/v3-tiny"));
  const PromptVocabulary vocabulary{0, &tokenizer};
  for (const Prompt& prompt : make_prompts(options(10, 64, 8, 0, 3), PromptFormat::kTokenIds, vocabulary)) {
    for (int32_t id : prompt.token_ids) ASSERT_FALSE(tokenizer.is_special(id)) << id;
  }
  for (const Prompt& prompt : make_prompts(options(10, 64, 8, 0, 3), PromptFormat::kText, vocabulary)) {
    const int64_t tokens = static_cast<int64_t>(tokenizer.encode(prompt.text).size());
    EXPECT_LE(prompt.input_len, 64);
    EXPECT_NEAR(static_cast<double>(tokens), static_cast<double>(prompt.input_len), 2);  // re-encoding the cut text
  }
}

TEST(WorkloadTest, RejectsImpossibleOptions) {
  EXPECT_THROW(make_prompts(options(1, 10, 10, 1.0, 0), PromptFormat::kTokenIds, {100, nullptr}), Error);
  EXPECT_THROW(make_prompts(options(1, 0, 10, 0, 0), PromptFormat::kTokenIds, {100, nullptr}), Error);
  EXPECT_THROW(make_prompts(options(1, 10, 10, 0, 0), PromptFormat::kTokenIds, {0, nullptr}), Error);
  EXPECT_THROW(arrival_times(10, 0, 1, 0), Error);
}

TEST(ArrivalTimesTest, PoissonWithTheMeanRate) {
  constexpr int64_t kCount = 20000;
  constexpr double kRate = 8;
  const std::vector<double> times = arrival_times(kCount, kRate, 1.0, 42);
  ASSERT_EQ(times.size(), static_cast<size_t>(kCount));
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
  EXPECT_GT(times.front(), 0);  // the first request waits one gap too, as in vLLM
  EXPECT_NEAR(times.back(), kCount / kRate, 1e-9);  // scaled to the exact offered load

  std::vector<double> gaps(times.size());
  std::adjacent_difference(times.begin(), times.end(), gaps.begin());
  const double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / kCount;
  double variance = 0;
  for (double gap : gaps) variance += (gap - mean) * (gap - mean);
  variance /= kCount;
  EXPECT_NEAR(mean, 1 / kRate, 1e-9);
  // Exponential gaps: the standard deviation equals the mean.
  EXPECT_NEAR(std::sqrt(variance) / mean, 1.0, 0.03);
  // Poisson counts: as many arrivals in each second as the rate, on average, with variance equal to it.
  std::vector<int> per_second(static_cast<size_t>(kCount / kRate) + 1, 0);
  for (double time : times) ++per_second[static_cast<size_t>(time)];
  per_second.pop_back();  // the last, partial second
  double count_mean = std::accumulate(per_second.begin(), per_second.end(), 0.0) / per_second.size();
  double count_variance = 0;
  for (int n : per_second) count_variance += (n - count_mean) * (n - count_mean);
  count_variance /= per_second.size();
  EXPECT_NEAR(count_mean, kRate, 0.1);
  EXPECT_NEAR(count_variance / count_mean, 1.0, 0.1);
}

TEST(ArrivalTimesTest, SeededAndDistinct) {
  EXPECT_EQ(arrival_times(50, 3, 1, 5), arrival_times(50, 3, 1, 5));
  EXPECT_NE(arrival_times(50, 3, 1, 5), arrival_times(50, 3, 1, 6));
}

TEST(ArrivalTimesTest, EqualGapsAndAllAtOnce) {
  const std::vector<double> fixed = arrival_times(4, 2, INFINITY, 0);
  ASSERT_EQ(fixed.size(), 4u);
  for (size_t i = 0; i < fixed.size(); ++i) EXPECT_DOUBLE_EQ(fixed[i], 0.5 * static_cast<double>(i + 1));
  EXPECT_EQ(arrival_times(3, INFINITY, 1, 0), (std::vector<double>{0, 0, 0}));
}

TEST(ArrivalTimesTest, BurstinessSpreadsTheGaps) {
  // Gamma gaps of shape k have a coefficient of variation of 1/sqrt(k).
  for (double shape : {0.25, 4.0}) {
    const std::vector<double> times = arrival_times(20000, 5, shape, 1);
    std::vector<double> gaps(times.size());
    std::adjacent_difference(times.begin(), times.end(), gaps.begin());
    const double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / gaps.size();
    double variance = 0;
    for (double gap : gaps) variance += (gap - mean) * (gap - mean);
    variance /= gaps.size();
    EXPECT_NEAR(std::sqrt(variance) / mean, 1 / std::sqrt(shape), 0.06 / std::sqrt(shape)) << "shape " << shape;
  }
}

}  // namespace
}  // namespace dsinfer::loadgen
