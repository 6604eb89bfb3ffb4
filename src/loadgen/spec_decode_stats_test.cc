// The speculative decoding figures of bench serve: the counters read out of Prometheus text as vLLM
// and dsinfer write it, the figures from two snapshots, and how the report shows them.
#include "loadgen/spec_decode_stats.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "loadgen/report.h"

namespace dsinfer::loadgen {
namespace {

// The spec_decode families as vLLM writes them (two engines, _created samples beside the totals),
// among other metrics.
std::string vllm_text(double drafts, double draft_tokens, double accepted, double pos0, double pos1) {
  std::string text = "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
                     "# TYPE vllm:num_requests_running gauge\n"
                     "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n";
  text += "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n"
          "# TYPE vllm:spec_decode_num_drafts_total counter\n";
  text += str_cat("vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} ", drafts / 2, "\n");
  text += str_cat("vllm:spec_decode_num_drafts_total{engine=\"1\",model_name=\"m\"} ", drafts / 2, "\n");
  text += "vllm:spec_decode_num_drafts_created{engine=\"0\",model_name=\"m\"} 1.7e+09\n";
  text += str_cat("vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"m\"} ", draft_tokens, "\n");
  text += str_cat("vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} ", accepted, "\n");
  text += str_cat("vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"0\"} ",
                  pos0, "\n");
  text += str_cat("vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"1\"} ",
                  pos1, "\n");
  return text;
}

TEST(SpecDecodeStats, CountersAreSummedOverLabelSets) {
  const std::optional<SpecDecodeCounters> counters = parse_spec_decode_counters(vllm_text(100, 200, 150, 90, 60));
  ASSERT_TRUE(counters.has_value());
  EXPECT_DOUBLE_EQ(counters->drafts, 100);  // both engines, not the _created sample
  EXPECT_DOUBLE_EQ(counters->draft_tokens, 200);
  EXPECT_DOUBLE_EQ(counters->accepted_tokens, 150);
  ASSERT_EQ(counters->accepted_per_position.size(), 2u);
  EXPECT_DOUBLE_EQ(counters->accepted_per_position[0], 90);
  EXPECT_DOUBLE_EQ(counters->accepted_per_position[1], 60);
}

TEST(SpecDecodeStats, AServerWithoutTheCountersHasNone) {
  EXPECT_FALSE(parse_spec_decode_counters("").has_value());
  EXPECT_FALSE(parse_spec_decode_counters("vllm:num_requests_running{model_name=\"m\"} 1.0\n"
                                          "vllm:spec_decode_num_drafts_created{model_name=\"m\"} 1.7e+09\n")
                   .has_value());
}

TEST(SpecDecodeStats, LabelValuesWithBracesAndQuotesDoNotConfuseTheReader) {
  const std::optional<SpecDecodeCounters> counters = parse_spec_decode_counters(
      "vllm:spec_decode_num_drafts_total{model_name=\"a}b\\\"c\"} 7 1700000000\n"
      "vllm:spec_decode_num_draft_tokens{model_name=\"x\"} 14\n"  // without _total, as other exporters write
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"lateposition=\\\"9\",position=\"2\"} 5\n");
  ASSERT_TRUE(counters.has_value());
  EXPECT_DOUBLE_EQ(counters->drafts, 7);
  EXPECT_DOUBLE_EQ(counters->draft_tokens, 14);
  ASSERT_EQ(counters->accepted_per_position.size(), 3u);
  EXPECT_DOUBLE_EQ(counters->accepted_per_position[2], 5);
}

TEST(SpecDecodeStats, FiguresComeFromTheDeltasAsVllmDefinesThem) {
  const auto before = parse_spec_decode_counters(vllm_text(100, 200, 150, 90, 60));
  const auto after = parse_spec_decode_counters(vllm_text(300, 600, 450, 280, 170));
  const std::optional<SpecDecodeStats> stats = spec_decode_stats(before, after);
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->drafts, 200);
  EXPECT_EQ(stats->draft_tokens, 400);
  EXPECT_EQ(stats->accepted_tokens, 300);
  EXPECT_DOUBLE_EQ(stats->mean_acceptance_length, 2.5);  // 1 + 300 / 200
  EXPECT_DOUBLE_EQ(stats->acceptance_rate, 0.75);       // 300 / 400
  ASSERT_EQ(stats->acceptance_rate_per_position.size(), 2u);
  EXPECT_DOUBLE_EQ(stats->acceptance_rate_per_position[0], 0.95);  // 190 / 200
  EXPECT_DOUBLE_EQ(stats->acceptance_rate_per_position[1], 0.55);  // 110 / 200

  EXPECT_FALSE(spec_decode_stats(before, before).has_value());  // no draft in between
  EXPECT_FALSE(spec_decode_stats(std::nullopt, after).has_value());
  EXPECT_FALSE(spec_decode_stats(before, std::nullopt).has_value());
}

TEST(SpecDecodeStats, TheReportShowsThemOnlyWhenThereAreSome) {
  SpecDecodeStats stats;
  stats.drafts = 200;
  stats.draft_tokens = 400;
  stats.accepted_tokens = 300;
  stats.mean_acceptance_length = 2.5;
  stats.acceptance_rate = 0.75;
  stats.acceptance_rate_per_position = {0.95, 0.55};
  const RunMetrics metrics;
  const std::string with = summary_table(metrics, RunSetting{}, stats);
  for (const char* row : {"---------------Speculative Decoding---------------\n",
                          "Acceptance rate (%):                     75.00\n",
                          "Mean acceptance length:                  2.50\n",
                          "Drafts:                                  200\n",
                          "Position 0 acceptance rate (%):          95.00\n",
                          "Position 1 acceptance rate (%):          55.00\n"})
    EXPECT_NE(with.find(row), std::string::npos) << row << "\nin:\n" << with;
  EXPECT_EQ(summary_table(metrics, RunSetting{}).find("Speculative"), std::string::npos);
  EXPECT_NE(spec_decode_table(stats).find("Mean acceptance length:"), std::string::npos);

  Json figures = figures_json(metrics, false);
  EXPECT_EQ(figures.find("mean_acceptance_length"), nullptr);
  add_spec_decode_figures(figures, stats);
  EXPECT_DOUBLE_EQ(figures["mean_acceptance_length"].as_double(), 2.5);
  EXPECT_DOUBLE_EQ(figures["acceptance_rate"].as_double(), 0.75);
  ASSERT_EQ(figures["acceptance_rate_per_position"].size(), 2u);
  EXPECT_DOUBLE_EQ(figures["acceptance_rate_per_position"].at(1).as_double(), 0.55);
  EXPECT_EQ(figures["num_drafts"].as_int(), 200);
  EXPECT_EQ(figures["num_draft_tokens"].as_int(), 400);
  EXPECT_EQ(figures["num_accepted_tokens"].as_int(), 300);
}

}  // namespace
}  // namespace dsinfer::loadgen
