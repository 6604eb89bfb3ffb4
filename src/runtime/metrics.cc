#include "runtime/metrics.h"

#include <algorithm>

namespace dsinfer::runtime {
namespace {

// vLLM's buckets for the same histograms (seconds), so dashboards built for it read ours.
std::vector<double> ttft_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
          20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> token_latency_buckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
          40.0, 80.0};
}
std::vector<double> request_latency_buckets() {
  return {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
          480.0, 960.0, 1920.0, 7680.0};
}

// vLLM's 1-2-5 token buckets. vLLM stops them at the served context length; these go on to 10^6,
// past any context a DeepSeek model serves, so that one set of labels fits every server.
std::vector<double> token_count_buckets() {
  std::vector<double> bounds;
  for (double decade = 1; decade <= 1e6; decade *= 10)
    for (double step : {1.0, 2.0, 5.0})
      if (step * decade <= 1e6) bounds.push_back(step * decade);
  return bounds;
}
// vLLM's iteration_tokens_total buckets.
std::vector<double> step_token_buckets() { return {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}; }

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {}

void Histogram::observe(double value) {
  size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  auto bump = [](std::atomic<uint64_t>& counter) {
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  };
  bump(counts_[bucket]);
  sum_.store(sum_.load(std::memory_order_relaxed) + value, std::memory_order_relaxed);
  bump(count_);
}

Histogram::Snapshot Histogram::snapshot() const {
  // Buckets are read one by one while observations continue: the count is taken from the
  // buckets so that the +Inf bucket always equals _count, as Prometheus expects.
  Snapshot out{bounds_, {}, sum_.load(std::memory_order_relaxed), 0};
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i)
    out.cumulative.push_back(running += counts_[i].load(std::memory_order_relaxed));
  out.count = running;
  return out;
}

Metrics::Metrics()
    : time_to_first_token(ttft_buckets()),
      time_per_output_token(token_latency_buckets()),
      inter_token_latency(token_latency_buckets()),
      e2e_request_latency(request_latency_buckets()),
      queue_time(request_latency_buckets()),
      request_prompt_tokens(token_count_buckets()),
      request_generation_tokens(token_count_buckets()),
      request_prefill_time(request_latency_buckets()),
      request_decode_time(request_latency_buckets()),
      iteration_tokens(step_token_buckets()) {}

void Metrics::observe_finished_request(int64_t prompt_tokens, int64_t generation_tokens, double scheduled_seconds,
                                       double first_token_seconds, double last_token_seconds) {
  request_prompt_tokens.observe(static_cast<double>(prompt_tokens));
  request_generation_tokens.observe(static_cast<double>(generation_tokens));
  if (scheduled_seconds < 0 || first_token_seconds < 0) return;
  request_prefill_time.observe(std::max(0.0, first_token_seconds - scheduled_seconds));
  request_decode_time.observe(std::max(0.0, last_token_seconds - first_token_seconds));
}

}  // namespace dsinfer::runtime
