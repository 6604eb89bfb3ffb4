// The metric definitions on hand-made timelines, checked against what vLLM's calculate_metrics and
// numpy compute for the same numbers.
#include "loadgen/request_metrics.h"

#include <gtest/gtest.h>

#include <vector>

namespace dsinfer::loadgen {
namespace {

RequestRecord timed(double sent_s, const std::vector<double>& chunks_s, int64_t output_tokens,
                    int64_t prompt_tokens = 100) {
  RequestRecord record;
  record.success = true;
  record.start_s = sent_s;
  record.prompt_tokens = prompt_tokens;
  record.output_tokens = output_tokens;
  set_chunk_timings(record, sent_s, chunks_s);
  return record;
}

TEST(RequestMetricsTest, TimingsOfOneRequest) {
  // Sent at 1.0 s; token chunks at 1.5, 1.6, 1.8 and 2.1 s.
  const RequestRecord record = timed(1.0, {1.5, 1.6, 1.8, 2.1}, 4);
  EXPECT_DOUBLE_EQ(record.ttft_s, 0.5);
  EXPECT_DOUBLE_EQ(record.e2e_s, 1.1);  // to the last token chunk
  ASSERT_EQ(record.itl_s.size(), 3u);
  EXPECT_NEAR(record.itl_s[0], 0.1, 1e-12);
  EXPECT_NEAR(record.itl_s[1], 0.2, 1e-12);
  EXPECT_NEAR(record.itl_s[2], 0.3, 1e-12);
  EXPECT_DOUBLE_EQ(*tpot_s(record), (1.1 - 0.5) / 3);
}

TEST(RequestMetricsTest, TpotCountsTokensNotChunks) {
  // Two chunks carrying 7 tokens (usage.completion_tokens says so): TPOT spreads E2E - TTFT over 6.
  const RequestRecord record = timed(0.0, {0.2, 0.8}, 7);
  EXPECT_DOUBLE_EQ(*tpot_s(record), 0.6 / 6);
  ASSERT_EQ(record.itl_s.size(), 1u);
  EXPECT_DOUBLE_EQ(record.itl_s[0], 0.6);  // ITL stays per chunk
}

TEST(RequestMetricsTest, SingleTokenRequest) {
  const RequestRecord record = timed(2.0, {2.25}, 1);
  EXPECT_DOUBLE_EQ(record.ttft_s, 0.25);
  EXPECT_DOUBLE_EQ(record.e2e_s, 0.25);
  EXPECT_TRUE(record.itl_s.empty());
  EXPECT_FALSE(tpot_s(record).has_value());
  // vLLM: no TPOT sample, but TPOT 0 for goodput.
  const RunMetrics metrics = compute_metrics(std::vector<RequestRecord>{record}, 1.0, Slo{std::nullopt, 1.0});
  EXPECT_EQ(metrics.tpot.mean_ms, 0);
  EXPECT_EQ(metrics.itl.p99_ms, 0);
  EXPECT_EQ(metrics.good_requests, 1);
}

TEST(RequestMetricsTest, PercentilesAsNumpy) {
  // np.percentile(x, p) with its default linear interpolation.
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 99), 3.97);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 25), 1.75);  // order does not matter
  EXPECT_DOUBLE_EQ(percentile({15, 20, 35, 40, 50}, 40), 29);
  EXPECT_DOUBLE_EQ(percentile({15, 20, 35, 40, 50}, 0), 15);
  EXPECT_DOUBLE_EQ(percentile({15, 20, 35, 40, 50}, 100), 50);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_EQ(percentile({}, 50), 0);  // vLLM's `values or 0`
}

TEST(RequestMetricsTest, DistributionInMilliseconds) {
  const Distribution d = distribution_ms({0.010, 0.020, 0.030, 0.040});
  EXPECT_DOUBLE_EQ(d.mean_ms, 25);
  EXPECT_DOUBLE_EQ(d.median_ms, 25);
  EXPECT_DOUBLE_EQ(d.p90_ms, 37);
  EXPECT_DOUBLE_EQ(d.p99_ms, 39.7);
}

TEST(RequestMetricsTest, RunFigures) {
  std::vector<RequestRecord> records = {
      timed(0.0, {0.1, 0.2, 0.3}, 3, 100),  // TTFT 100 ms, TPOT 100 ms
      timed(0.5, {0.9, 1.0, 1.1}, 3, 50),   // TTFT 400 ms, TPOT 100 ms
      timed(1.0, {1.2, 1.7}, 2, 30),        // TTFT 200 ms, TPOT 500 ms
  };
  RequestRecord failed;
  failed.error = "HTTP 500";
  records.push_back(failed);

  const RunMetrics metrics = compute_metrics(records, 2.0, Slo{300.0, 200.0});
  EXPECT_EQ(metrics.completed, 3);
  EXPECT_EQ(metrics.failed, 1);
  EXPECT_EQ(metrics.total_input_tokens, 180);
  EXPECT_EQ(metrics.total_output_tokens, 8);
  EXPECT_DOUBLE_EQ(metrics.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(metrics.qpm, 90);
  EXPECT_DOUBLE_EQ(metrics.input_throughput, 90);
  EXPECT_DOUBLE_EQ(metrics.output_throughput, 4);
  EXPECT_DOUBLE_EQ(metrics.total_token_throughput, 94);
  EXPECT_EQ(metrics.good_requests, 1);  // only the first meets both TTFT <= 300 and TPOT <= 200
  EXPECT_DOUBLE_EQ(metrics.request_goodput, 0.5);
  EXPECT_NEAR(metrics.ttft.mean_ms, (100 + 400 + 200) / 3.0, 1e-9);
  EXPECT_NEAR(metrics.ttft.median_ms, 200, 1e-9);
  EXPECT_NEAR(metrics.tpot.median_ms, 100, 1e-9);
  EXPECT_NEAR(metrics.e2e.p90_ms, percentile({0.3, 0.6, 0.7}, 90) * 1000, 1e-9);
  // ITL pools every request's gaps: 100, 100, 100, 100, 500 ms.
  EXPECT_NEAR(metrics.itl.mean_ms, 180, 1e-9);
  EXPECT_NEAR(metrics.itl.median_ms, 100, 1e-9);
  EXPECT_NEAR(metrics.itl.p90_ms, 340, 1e-9);
}

TEST(RequestMetricsTest, SloBoundIsInclusive) {
  const RequestRecord record = timed(0.0, {0.25, 0.75}, 2);  // TTFT 250 ms, TPOT 500 ms
  EXPECT_TRUE(meets_slo(record, {250.0, 500.0}));
  EXPECT_FALSE(meets_slo(record, {249.0, std::nullopt}));
  EXPECT_FALSE(meets_slo(record, {std::nullopt, 499.0}));
  EXPECT_TRUE(meets_slo(record, {}));
}

TEST(RequestMetricsTest, NothingCompleted) {
  RequestRecord failed;
  const RunMetrics metrics = compute_metrics(std::vector<RequestRecord>{failed}, 1.0, {});
  EXPECT_EQ(metrics.completed, 0);
  EXPECT_EQ(metrics.failed, 1);
  EXPECT_EQ(metrics.qpm, 0);
  EXPECT_EQ(metrics.ttft.mean_ms, 0);
}

}  // namespace
}  // namespace dsinfer::loadgen
