// GET /metrics: the engine's counters, gauges and histograms in Prometheus' text exposition
// format (version 0.0.4), under vLLM's metric names and help texts so that dashboards and alerts
// built for vLLM read dsinfer unchanged. Every sample carries the label model_name="<served name>".
//
// Counters get the "_total" suffix in every line, as prometheus_client writes them
// (vllm:prompt_tokens_total). Prefix-cache counters are in tokens. KV-cache usage is a fraction
// (1 = full), exported under both its names (vllm:kv_cache_usage_perc and the older
// vllm:gpu_cache_usage_perc).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "runtime/engine.h"
#include "runtime/metrics.h"

namespace dsinfer::server {

// A gauge the server adds from outside the engine ("dsinfer:open_connections", ...).
struct ExtraGauge {
  std::string name;
  std::string help;
  double value = 0.0;
};

std::string format_prometheus(const runtime::Metrics& metrics, const runtime::EngineStats& stats,
                              std::string_view model_name, std::span<const ExtraGauge> extra = {});

}  // namespace dsinfer::server
