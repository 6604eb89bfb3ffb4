#include "server/metrics_format.h"

#include <atomic>
#include <charconv>
#include <cmath>
#include <string>
#include <utility>

namespace dsinfer::server {
namespace {

// Numbers as prometheus_client writes them (Python's repr: 1.0, 0.25, 1e+20), so that bucket
// labels match vLLM's exactly (le="1.0") for rules that select a bucket by its label.
std::string number_text(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, end);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

// Label values escape backslash, double quote and newline; help texts backslash and newline.
std::string escaped(std::string_view text, bool quote) {
  std::string out;
  for (char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '"' && quote) out += "\\\"";
    else out += c;
  }
  return out;
}

class Exposition {
 public:
  explicit Exposition(std::string_view model_name) : label_(label_pair("model_name", model_name)) {}

  void gauge(std::string_view name, std::string_view help, double value) {
    header(name, help, "gauge");
    sample(name, "", value);
  }

  void counter(std::string_view name, std::string_view help, double value) {
    std::string total = std::string(name) + "_total";
    header(total, help, "counter");
    sample(total, "", value);
  }

  // One counter, one sample per value of `label`.
  void labelled_counter(std::string_view name, std::string_view help, std::string_view label,
                        std::span<const std::pair<std::string_view, double>> values) {
    std::string total = std::string(name) + "_total";
    header(total, help, "counter");
    for (const auto& [label_value, value] : values) sample(total, label_pair(label, label_value), value);
  }

  void histogram(std::string_view name, std::string_view help, const runtime::Histogram::Snapshot& snapshot) {
    header(name, help, "histogram");
    std::string bucket = std::string(name) + "_bucket";
    for (size_t i = 0; i < snapshot.bounds.size(); ++i)
      sample(bucket, label_pair("le", number_text(snapshot.bounds[i])), static_cast<double>(snapshot.cumulative[i]));
    sample(bucket, label_pair("le", "+Inf"), static_cast<double>(snapshot.count));
    sample(std::string(name) + "_sum", "", snapshot.sum);
    sample(std::string(name) + "_count", "", static_cast<double>(snapshot.count));
  }

  std::string take() { return std::move(text_); }

 private:
  static std::string label_pair(std::string_view name, std::string_view value) {
    return std::string(name) + "=\"" + escaped(value, true) + "\"";
  }

  void header(std::string_view name, std::string_view help, std::string_view type) {
    text_.append("# HELP ").append(name).append(" ").append(escaped(help, false)).append("\n");
    text_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
  }

  void sample(std::string_view name, std::string_view extra_label, double value) {
    text_.append(name).append("{").append(label_);
    if (!extra_label.empty()) text_.append(",").append(extra_label);
    text_.append("} ").append(number_text(value)).append("\n");
  }

  std::string label_;  // model_name="..."
  std::string text_;
};

double load(const std::atomic<uint64_t>& counter) { return static_cast<double>(counter.load()); }

}  // namespace

std::string format_prometheus(const runtime::Metrics& metrics, const runtime::EngineStats& stats,
                              std::string_view model_name, std::span<const ExtraGauge> extra) {
  Exposition out(model_name);
  out.gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
            static_cast<double>(stats.running));
  out.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
            static_cast<double>(stats.waiting));
  double kv_usage = stats.total_pages > 0
                        ? static_cast<double>(stats.total_pages - stats.free_pages) / static_cast<double>(stats.total_pages)
                        : 0.0;
  out.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv_usage);
  out.gauge("vllm:gpu_cache_usage_perc",
            "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use vllm:kv_cache_usage_perc instead.",
            kv_usage);
  out.counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
              static_cast<double>(stats.prefix_queries));
  out.counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
              static_cast<double>(stats.prefix_hits));
  out.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
              static_cast<double>(stats.preemptions));
  out.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", load(metrics.prompt_tokens));
  out.counter("vllm:generation_tokens", "Number of generation tokens processed.", load(metrics.generation_tokens));
  const std::pair<std::string_view, double> finished[] = {
      {"stop", load(metrics.requests_finished_stop)},
      {"length", load(metrics.requests_finished_length)},
      {"abort", load(metrics.requests_aborted)},
      {"error", load(metrics.requests_failed)},
  };
  out.labelled_counter("vllm:request_success", "Count of successfully processed requests.", "finished_reason",
                       finished);
  out.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                metrics.time_to_first_token.snapshot());
  out.histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
                metrics.time_per_output_token.snapshot());
  out.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                metrics.inter_token_latency.snapshot());
  out.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                metrics.e2e_request_latency.snapshot());
  out.histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                metrics.queue_time.snapshot());
  for (const ExtraGauge& gauge : extra) out.gauge(gauge.name, gauge.help, gauge.value);
  return out.take();
}

}  // namespace dsinfer::server
