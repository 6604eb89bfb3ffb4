// The definitions of request_metrics.h, one function each.
#include "loadgen/request_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace dsinfer::loadgen {
namespace {

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double per_second(double amount, double duration_s) { return duration_s > 0 ? amount / duration_s : 0; }

}  // namespace

void set_chunk_timings(RequestRecord& record, double sent_s, std::span<const double> chunk_times_s) {
  DSINFER_CHECK(!chunk_times_s.empty(), "internal: a request's timings need at least one token chunk");
  record.ttft_s = chunk_times_s.front() - sent_s;
  record.e2e_s = chunk_times_s.back() - sent_s;
  record.itl_s.clear();
  for (size_t i = 1; i < chunk_times_s.size(); ++i) record.itl_s.push_back(chunk_times_s[i] - chunk_times_s[i - 1]);
}

std::optional<double> tpot_s(const RequestRecord& record) {
  if (record.output_tokens <= 1) return std::nullopt;
  return (record.e2e_s - record.ttft_s) / static_cast<double>(record.output_tokens - 1);
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = static_cast<double>(values.size() - 1) * (p / 100);
  const double below = std::floor(rank);
  const size_t lower = static_cast<size_t>(below);
  const size_t upper = std::min(lower + 1, values.size() - 1);
  const double fraction = rank - below;
  const double a = values[lower], b = values[upper];
  // numpy's _lerp: from the nearer end, so that the result stays exact at both ends.
  return fraction >= 0.5 ? b - (b - a) * (1 - fraction) : a + (b - a) * fraction;
}

Distribution distribution_ms(const std::vector<double>& seconds) {
  Distribution out;
  out.mean_ms = mean(seconds) * 1000;
  out.median_ms = percentile(seconds, 50) * 1000;
  out.p90_ms = percentile(seconds, 90) * 1000;
  out.p99_ms = percentile(seconds, 99) * 1000;
  return out;
}

bool meets_slo(const RequestRecord& record, const Slo& slo) {
  if (slo.ttft_ms && record.ttft_s * 1000 > *slo.ttft_ms) return false;
  if (slo.tpot_ms && tpot_s(record).value_or(0) * 1000 > *slo.tpot_ms) return false;
  return true;
}

RunMetrics compute_metrics(std::span<const RequestRecord> records, double duration_s, const Slo& slo) {
  RunMetrics metrics;
  metrics.duration_s = duration_s;
  std::vector<double> ttfts, tpots, itls, e2es;
  for (const RequestRecord& record : records) {
    if (!record.success) {
      ++metrics.failed;
      continue;
    }
    ++metrics.completed;
    metrics.total_input_tokens += record.prompt_tokens;
    metrics.total_output_tokens += record.output_tokens;
    if (meets_slo(record, slo)) ++metrics.good_requests;
    ttfts.push_back(record.ttft_s);
    if (std::optional<double> tpot = tpot_s(record)) tpots.push_back(*tpot);
    itls.insert(itls.end(), record.itl_s.begin(), record.itl_s.end());
    e2es.push_back(record.e2e_s);
  }
  const auto completed = static_cast<double>(metrics.completed);
  metrics.request_throughput = per_second(completed, duration_s);
  metrics.input_throughput = per_second(static_cast<double>(metrics.total_input_tokens), duration_s);
  metrics.output_throughput = per_second(static_cast<double>(metrics.total_output_tokens), duration_s);
  metrics.total_token_throughput =
      per_second(static_cast<double>(metrics.total_input_tokens + metrics.total_output_tokens), duration_s);
  metrics.qpm = metrics.request_throughput * 60;
  metrics.request_goodput = per_second(static_cast<double>(metrics.good_requests), duration_s);
  metrics.ttft = distribution_ms(ttfts);
  metrics.tpot = distribution_ms(tpots);
  metrics.itl = distribution_ms(itls);
  metrics.e2e = distribution_ms(e2es);
  return metrics;
}

}  // namespace dsinfer::loadgen
