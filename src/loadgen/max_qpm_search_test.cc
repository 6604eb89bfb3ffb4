// The max-QPM search against fake servers: a function from the offered rate to the figures a run
// would measure, with p90 TPOT growing with the rate.
#include "loadgen/max_qpm_search.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "core/error.h"

namespace dsinfer::loadgen {
namespace {

// A server that keeps up with any rate and whose p90 TPOT is tpot_ms(rate).
ProbeRunner fake_server(std::function<double(double)> tpot_ms, std::vector<int>* indices = nullptr) {
  return [tpot_ms = std::move(tpot_ms), indices](double rate, int index) {
    if (indices) indices->push_back(index);
    RunMetrics metrics;
    metrics.completed = 20;
    metrics.qpm = rate * 60;
    metrics.tpot.p90_ms = tpot_ms(rate);
    return metrics;
  };
}

SearchOptions options(double slo_tpot_ms, double initial_rate, int max_probes) {
  SearchOptions search;
  search.slo_tpot_ms = slo_tpot_ms;
  search.initial_rate = initial_rate;
  search.max_probes = max_probes;
  return search;
}

TEST(MaxQpmSearchTest, FindsTheBoundaryBetweenDoublings) {
  // TPOT = 10 + 4 * rate ms: 50 ms is met up to 10 req/s, i.e. 600 QPM.
  std::vector<int> indices;
  const SearchResult result = find_max_qpm(fake_server([](double rate) { return 10 + 4 * rate; }, &indices),
                                           options(50, 1, 12));
  ASSERT_TRUE(result.best.has_value());
  EXPECT_DOUBLE_EQ(result.best->request_rate, 10);  // probes 1, 2, 4, 8, 16, 12, 10, 11, 10.5
  EXPECT_DOUBLE_EQ(result.best->metrics.qpm, 600);
  EXPECT_EQ(result.probes.size(), 9u);
  // Every probe asked for its own prompts.
  EXPECT_EQ(std::set<int>(indices.begin(), indices.end()).size(), indices.size());
  for (size_t i = 0; i < result.probes.size(); ++i) EXPECT_EQ(result.probes[i].index, static_cast<int>(i));
}

TEST(MaxQpmSearchTest, WithinToleranceOfAnIrrationalBoundary) {
  // Met up to rate 40/pi = 12.73 req/s.
  const double boundary = 40 / 3.14159265358979;
  const SearchResult result = find_max_qpm(fake_server([](double rate) { return 10 + 3.14159265358979 * rate; }),
                                           options(50, 1, 20));
  ASSERT_TRUE(result.best.has_value());
  EXPECT_LE(result.best->request_rate, boundary);
  EXPECT_GE(result.best->request_rate, boundary / 1.05);
  EXPECT_LT(result.probes.size(), 20u);  // stopped on the tolerance, not the probe budget
}

TEST(MaxQpmSearchTest, HalvesWhenTheStartIsTooFast) {
  // Met up to 2.5 req/s; the search starts at 16.
  const SearchResult result =
      find_max_qpm(fake_server([](double rate) { return 20 * rate; }), options(50, 16, 12));
  ASSERT_TRUE(result.best.has_value());
  EXPECT_FALSE(result.probes[0].meets_slo);
  EXPECT_DOUBLE_EQ(result.probes[1].request_rate, 8);
  EXPECT_LE(result.best->request_rate, 2.5);
  EXPECT_GE(result.best->request_rate, 2.5 / 1.05);
}

TEST(MaxQpmSearchTest, ProbeBudgetBoundsTheRuns) {
  const SearchResult result =
      find_max_qpm(fake_server([](double rate) { return 10 + 4 * rate; }), options(50, 1, 3));
  EXPECT_EQ(result.probes.size(), 3u);  // 1, 2, 4: all good, the boundary not reached
  ASSERT_TRUE(result.best.has_value());
  EXPECT_DOUBLE_EQ(result.best->request_rate, 4);
}

TEST(MaxQpmSearchTest, NoRateMeetsTheTarget) {
  const SearchResult result = find_max_qpm(fake_server([](double) { return 80.0; }), options(50, 1, 5));
  EXPECT_FALSE(result.best.has_value());
  EXPECT_EQ(result.probes.size(), 5u);
  EXPECT_DOUBLE_EQ(result.probes.back().request_rate, 1.0 / 16);
}

TEST(MaxQpmSearchTest, FailedRequestsOrNoneCompletedMissTheTarget) {
  ProbeRunner failing = [](double rate, int) {
    RunMetrics metrics;
    metrics.completed = 19;
    metrics.failed = rate > 3 ? 1 : 0;  // the server drops requests above 3 req/s, however fast it is
    metrics.qpm = rate * 60;
    return metrics;
  };
  const SearchResult result = find_max_qpm(failing, options(50, 1, 10));
  ASSERT_TRUE(result.best.has_value());
  EXPECT_LE(result.best->request_rate, 3);
  EXPECT_GE(result.best->request_rate, 3 / 1.05);

  ProbeRunner empty = [](double, int) { return RunMetrics{}; };
  EXPECT_FALSE(find_max_qpm(empty, options(50, 1, 2)).best.has_value());
}

TEST(MaxQpmSearchTest, StopsWhenTheServerSaturates) {
  // A server that falls behind: it completes at most 300 QPM whatever the offered rate.
  ProbeRunner saturating = [](double rate, int) {
    RunMetrics metrics;
    metrics.completed = 20;
    metrics.qpm = std::min(rate * 60, 300.0);
    metrics.tpot.p90_ms = 10 + rate;
    return metrics;
  };
  const SearchResult result = find_max_qpm(saturating, options(50, 1, 12));
  ASSERT_TRUE(result.best.has_value());
  EXPECT_DOUBLE_EQ(result.best->metrics.qpm, 300);
  EXPECT_DOUBLE_EQ(result.best->request_rate, 8);
  // 1, 2, 4, 8, then 16 gains nothing: doubling on would only queue.
  EXPECT_EQ(result.probes.size(), 5u);
}

TEST(MaxQpmSearchTest, RejectsBadOptions) {
  EXPECT_THROW(find_max_qpm(fake_server([](double) { return 1.0; }), options(50, 0, 4)), Error);
  EXPECT_THROW(find_max_qpm(fake_server([](double) { return 1.0; }), options(50, 1, 0)), Error);
}

}  // namespace
}  // namespace dsinfer::loadgen
