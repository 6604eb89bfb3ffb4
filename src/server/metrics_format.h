// GET /metrics: the engine's counters, gauges and histograms in Prometheus' text exposition
// format (version 0.0.4), under vLLM's metric names and help texts so that dashboards and alerts
// built for vLLM read dsinfer unchanged. Every sample carries the label model_name="<served name>".
//
// Counters get the "_total" suffix in every line, as prometheus_client writes them
// (vllm:prompt_tokens_total). Prefix-cache counters are in tokens. KV-cache usage is a fraction
// (1 = full), exported under both its names (vllm:kv_cache_usage_perc and the older
// vllm:gpu_cache_usage_perc).
//
// With speculative decoding on, vLLM's spec_decode counters: vllm:spec_decode_num_drafts,
// vllm:spec_decode_num_draft_tokens, vllm:spec_decode_num_accepted_tokens, and
// vllm:spec_decode_num_accepted_tokens_per_pos with a label position="0".."N-1" (0-based, as vLLM
// labels it) for each of the N draft positions; none of them when it is off, as vLLM.
//
// With the host KV tier on (issue 14, runtime/host_kv_tier.h), its own: dsinfer:host_kv_cache_pages,
// _bytes and _capacity_bytes (gauges), dsinfer:host_kv_cache_spilled_pages_total,
// _restored_pages_total and _hit_tokens_total (counters; the hit tokens also count in
// vllm:prefix_cache_hits); none of them when it is off.
//
// Beside them: the KV cache's settings as vLLM's info gauge (vllm:cache_config_info, value 1, the
// settings in its labels), and the process_* metrics without labels, as prometheus_client writes
// them (process_metrics.h).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "runtime/disaggregation.h"
#include "runtime/engine.h"
#include "runtime/metrics.h"
#include "runtime/speculative.h"
#include "server/process_metrics.h"

namespace dsinfer::server {

// A gauge the server adds from outside the engine ("dsinfer:open_connections", ...).
struct ExtraGauge {
  std::string name;
  std::string help;
  double value = 0.0;
};

// A prefill instance (disaggregation) adds dsinfer:kv_pushes_total and dsinfer:kv_layerwise_pushes_total.
std::string format_prometheus(const runtime::Metrics& metrics, const runtime::EngineStats& stats,
                              std::string_view model_name, std::span<const ExtraGauge> extra = {},
                              const runtime::SpeculativeConfig& speculative = {},
                              runtime::DisaggregationMode disaggregation = runtime::DisaggregationMode::kNone);

// vllm:cache_config_info's labels, under vLLM's names (num_gpu_blocks counts the KV pages wherever
// they live; booleans read True/False, as Python writes them).
struct CacheConfigInfo {
  int64_t block_size = 0;  // tokens per KV page
  int64_t num_gpu_blocks = 0;
  bool enable_prefix_caching = true;
  std::string cache_dtype = "auto";
};
std::string format_cache_config_info(const CacheConfigInfo& cache, std::string_view model_name);

std::string format_process_metrics(const ProcessStats& process);

}  // namespace dsinfer::server
