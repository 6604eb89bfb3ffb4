#include "server/metrics_format.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace dsinfer::server {
namespace {

// Python's repr of a float: the shortest digits that read back, in fixed point from 1e-4 up to
// 1e16 and in scientific notation beyond (1e+16, 1.5e-05).
std::string python_repr(double value) {
  char buffer[64];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string_view text(buffer, static_cast<size_t>(end - buffer));  // "-1.2345e+07"
  std::string out;
  if (text.front() == '-') {
    out = "-";
    text.remove_prefix(1);
  }
  const size_t e = text.find('e');
  std::string digits;
  for (char c : text.substr(0, e))
    if (c != '.') digits += c;
  const int exponent = std::stoi(std::string(text.substr(e + 1)));
  const auto size = static_cast<int>(digits.size());
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (size > 1) out.append(".").append(digits, 1);
    char suffix[16];
    std::snprintf(suffix, sizeof(suffix), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + suffix;
  }
  if (exponent < 0) return out + "0." + std::string(-exponent - 1, '0') + digits;
  if (size <= exponent + 1) return out + digits + std::string(exponent + 1 - size, '0') + ".0";
  return out + digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
}

// Numbers as prometheus_client writes them (its floatToGoString: Python's repr, except that a
// positive number with more than six digits before the point goes to Go's exponent form, 1e+06,
// 1.2345678e+07), so that bucket labels match vLLM's exactly (le="1.0", le="100000.0") for rules
// that select a bucket by its label.
std::string number_text(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  std::string text = python_repr(value);
  const size_t dot = text.find('.');
  if (value > 0 && dot != std::string::npos && dot > 6) {
    std::string mantissa = text.substr(0, 1) + "." + text.substr(1, dot - 1) + text.substr(dot + 1);
    mantissa.erase(mantissa.find_last_not_of("0.") + 1);
    // "e+0" and the exponent, as prometheus_client writes it (e+010 from 1e10 on; Go reads both).
    return mantissa + "e+0" + std::to_string(dot - 1);
  }
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
  Exposition() = default;  // samples without labels (the process_* metrics)
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

  // An info gauge: value 1, what it says in its labels.
  void info(std::string_view name, std::string_view help,
            std::span<const std::pair<std::string_view, std::string>> labels) {
    header(name, help, "gauge");
    std::string pairs;
    for (const auto& [label, value] : labels) {
      if (!pairs.empty()) pairs += ",";
      pairs += label_pair(label, value);
    }
    sample(name, pairs, 1.0);
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
    text_.append(name);
    if (!label_.empty() || !extra_label.empty()) {
      text_.append("{").append(label_);
      if (!label_.empty() && !extra_label.empty()) text_.append(",");
      text_.append(extra_label).append("}");
    }
    text_.append(" ").append(number_text(value)).append("\n");
  }

  std::string label_;  // model_name="...", or empty for unlabelled samples
  std::string text_;
};

double load(const std::atomic<uint64_t>& counter) { return static_cast<double>(counter.load()); }

// vLLM's spec_decode counters (its SpecDecodingProm), per-position ones for the `positions` draft
// positions a step has.
void add_spec_decode(Exposition& out, const runtime::Metrics& metrics, int positions) {
  out.counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", load(metrics.spec_decode_drafts));
  out.counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", load(metrics.spec_decode_draft_tokens));
  out.counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
              load(metrics.spec_decode_accepted_tokens));
  const int shown = std::clamp(positions, 0, runtime::Metrics::kMaxDraftPositions);
  std::vector<std::string> labels;  // "0", "1", ...: vLLM's 0-based positions
  for (int i = 0; i < shown; ++i) labels.push_back(std::to_string(i));
  std::vector<std::pair<std::string_view, double>> accepted;
  for (int i = 0; i < shown; ++i) accepted.emplace_back(labels[i], load(metrics.spec_decode_accepted_per_position[i]));
  out.labelled_counter("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.",
                       "position", accepted);
}

// Issue 14: the host KV tier under the prefix cache (runtime/host_kv_tier.h); its hit tokens are
// in vllm:prefix_cache_hits too.
void add_host_kv_cache(Exposition& out, const runtime::HostKvStats& host) {
  auto value = [](int64_t n) { return static_cast<double>(n); };
  out.gauge("dsinfer:host_kv_cache_capacity_bytes", "Host memory budget of the host KV cache tier in bytes.",
            value(host.capacity_bytes));
  out.gauge("dsinfer:host_kv_cache_pages", "KV pages held in the host KV cache tier.", value(host.pages));
  out.gauge("dsinfer:host_kv_cache_bytes", "Bytes of KV pages held in the host KV cache tier.", value(host.bytes));
  out.counter("dsinfer:host_kv_cache_spilled_pages", "KV pages copied to host memory when the prefix cache evicted "
              "them.", value(host.spilled_pages));
  out.counter("dsinfer:host_kv_cache_restored_pages", "KV pages copied back from host memory for a prompt.",
              value(host.restored_pages));
  out.counter("dsinfer:host_kv_cache_hit_tokens", "Prompt tokens restored from host memory instead of computed.",
              value(host.hit_tokens));
}

}  // namespace

// Issue 14: a prefill instance's pushes of prompts' pages to decode instances.
void add_kv_pushes(Exposition& out, const runtime::EngineStats& stats) {
  out.counter("dsinfer:kv_pushes", "Prompts whose KV pages this prefill instance pushed to a decode instance.",
              static_cast<double>(stats.kv_pushes));
  out.counter("dsinfer:kv_layerwise_pushes", "Of those, prompts sent layer by layer while later layers computed.",
              static_cast<double>(stats.kv_layerwise_pushes));
}

std::string format_prometheus(const runtime::Metrics& metrics, const runtime::EngineStats& stats,
                              std::string_view model_name, std::span<const ExtraGauge> extra,
                              const runtime::SpeculativeConfig& speculative,
                              runtime::DisaggregationMode disaggregation) {
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
  out.histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
                metrics.request_prefill_time.snapshot());
  out.histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
                metrics.request_decode_time.snapshot());
  out.histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.",
                metrics.request_prompt_tokens.snapshot());
  out.histogram("vllm:request_generation_tokens", "Number of generation tokens processed.",
                metrics.request_generation_tokens.snapshot());
  // A histogram whose family name ends in _total, as vLLM names it (its series are _total_bucket, ...).
  out.histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
                metrics.iteration_tokens.snapshot());
  if (speculative.enabled()) add_spec_decode(out, metrics, speculative.num_tokens);
  if (stats.host_kv.capacity_bytes > 0) add_host_kv_cache(out, stats.host_kv);
  if (disaggregation == runtime::DisaggregationMode::kPrefill) add_kv_pushes(out, stats);
  for (const ExtraGauge& gauge : extra) out.gauge(gauge.name, gauge.help, gauge.value);
  return out.take();
}

std::string format_cache_config_info(const CacheConfigInfo& cache, std::string_view model_name) {
  Exposition out(model_name);
  const std::pair<std::string_view, std::string> labels[] = {
      {"block_size", std::to_string(cache.block_size)},
      {"cache_dtype", cache.cache_dtype},
      {"enable_prefix_caching", cache.enable_prefix_caching ? "True" : "False"},
      {"num_gpu_blocks", std::to_string(cache.num_gpu_blocks)},
  };
  out.info("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels);
  return out.take();
}

std::string format_process_metrics(const ProcessStats& process) {
  Exposition out;
  out.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", process.virtual_memory_bytes);
  out.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", process.resident_memory_bytes);
  out.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
            process.start_time_seconds);
  out.counter("process_cpu_seconds", "Total user and system CPU time spent in seconds.", process.cpu_seconds);
  out.gauge("process_open_fds", "Number of open file descriptors.", process.open_fds);
  out.gauge("process_max_fds", "Maximum number of open file descriptors.", process.max_fds);
  return out.take();
}

}  // namespace dsinfer::server
