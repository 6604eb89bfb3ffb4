// The table and JSON of report.h.
#include "loadgen/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "core/error.h"

namespace dsinfer::loadgen {
namespace {

constexpr size_t kTableWidth = 50;
constexpr size_t kLabelWidth = 40;

// Python's "{:^50}" with a fill character: the odd column goes right.
std::string centered(std::string_view title, char fill) {
  const size_t pad = title.size() < kTableWidth ? kTableWidth - title.size() : 0;
  return std::string(pad / 2, fill) + std::string(title) + std::string(pad - pad / 2, fill) + "\n";
}

std::string fixed2(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

void add_row(std::string& out, std::string_view label, const std::string& value) {
  std::string row(label);
  row.resize(std::max(kLabelWidth, label.size()), ' ');
  out += row + " " + value + "\n";
}

void add_distribution(std::string& out, std::string_view title, std::string_view name, const Distribution& d) {
  out += centered(title, '-');
  add_row(out, str_cat("Mean ", name, " (ms):"), fixed2(d.mean_ms));
  add_row(out, str_cat("Median ", name, " (ms):"), fixed2(d.median_ms));
  add_row(out, str_cat("P90 ", name, " (ms):"), fixed2(d.p90_ms));
  add_row(out, str_cat("P99 ", name, " (ms):"), fixed2(d.p99_ms));
}

void add_distribution_json(Json& out, std::string_view name, const Distribution& d) {
  out[str_cat("mean_", name, "_ms")] = d.mean_ms;
  out[str_cat("median_", name, "_ms")] = d.median_ms;
  out[str_cat("p90_", name, "_ms")] = d.p90_ms;
  out[str_cat("p99_", name, "_ms")] = d.p99_ms;
}

void add_spec_decode_rows(std::string& out, const SpecDecodeStats& spec) {
  add_row(out, "Acceptance rate (%):", fixed2(spec.acceptance_rate * 100));
  add_row(out, "Mean acceptance length:", fixed2(spec.mean_acceptance_length));
  add_row(out, "Drafts:", std::to_string(spec.drafts));
  add_row(out, "Draft tokens:", std::to_string(spec.draft_tokens));
  add_row(out, "Accepted tokens:", std::to_string(spec.accepted_tokens));
  for (size_t p = 0; p < spec.acceptance_rate_per_position.size(); ++p)
    add_row(out, str_cat("Position ", p, " acceptance rate (%):"), fixed2(spec.acceptance_rate_per_position[p] * 100));
}

}  // namespace

std::string summary_table(const RunMetrics& metrics, const RunSetting& setting,
                          const std::optional<SpecDecodeStats>& spec) {
  std::string out = centered(" Serving Benchmark Result ", '=');
  add_row(out, "Successful requests:", std::to_string(metrics.completed));
  add_row(out, "Failed requests:", std::to_string(metrics.failed));
  if (setting.max_concurrency > 0) {
    add_row(out, "Maximum request concurrency:", std::to_string(setting.max_concurrency));
  }
  if (std::isfinite(setting.request_rate)) add_row(out, "Request rate configured (RPS):", fixed2(setting.request_rate));
  add_row(out, "Benchmark duration (s):", fixed2(metrics.duration_s));
  add_row(out, "Total input tokens:", std::to_string(metrics.total_input_tokens));
  add_row(out, "Total generated tokens:", std::to_string(metrics.total_output_tokens));
  add_row(out, "Request throughput (req/s):", fixed2(metrics.request_throughput));
  if (setting.has_slo) add_row(out, "Request goodput (req/s):", fixed2(metrics.request_goodput));
  add_row(out, "Input token throughput (tok/s):", fixed2(metrics.input_throughput));
  add_row(out, "Output token throughput (tok/s):", fixed2(metrics.output_throughput));
  add_row(out, "Total token throughput (tok/s):", fixed2(metrics.total_token_throughput));
  add_row(out, "Requests per minute (QPM):", fixed2(metrics.qpm));
  if (setting.has_slo) add_row(out, "Goodput (QPM):", fixed2(metrics.request_goodput * 60));
  add_distribution(out, "Time to First Token", "TTFT", metrics.ttft);
  add_distribution(out, "Time per Output Token (excl. 1st token)", "TPOT", metrics.tpot);
  add_distribution(out, "Inter-token Latency", "ITL", metrics.itl);
  add_distribution(out, "End-to-end Latency", "E2E", metrics.e2e);
  if (spec) {
    out += centered("Speculative Decoding", '-');
    add_spec_decode_rows(out, *spec);
  }
  out += std::string(kTableWidth, '=') + "\n";
  return out;
}

std::string spec_decode_table(const SpecDecodeStats& spec) {
  std::string out = centered(" Speculative Decoding ", '=');
  add_spec_decode_rows(out, spec);
  out += std::string(kTableWidth, '=') + "\n";
  return out;
}

std::string failure_lines(std::span<const RequestRecord> records, size_t most) {
  std::string out;
  size_t shown = 0;
  for (size_t i = 0; i < records.size() && shown < most; ++i) {
    if (records[i].success) continue;
    out += str_cat("request ", i, " failed: ", records[i].error, "\n");
    ++shown;
  }
  return out;
}

Json figures_json(const RunMetrics& metrics, bool has_slo) {
  Json out;
  out["completed"] = metrics.completed;
  out["failed"] = metrics.failed;
  out["duration_s"] = metrics.duration_s;
  out["total_input_tokens"] = metrics.total_input_tokens;
  out["total_output_tokens"] = metrics.total_output_tokens;
  out["request_throughput"] = metrics.request_throughput;
  out["input_throughput"] = metrics.input_throughput;
  out["output_throughput"] = metrics.output_throughput;
  out["total_token_throughput"] = metrics.total_token_throughput;
  out["qpm"] = metrics.qpm;
  out["request_goodput"] = has_slo ? Json(metrics.request_goodput) : Json();
  out["goodput_qpm"] = has_slo ? Json(metrics.request_goodput * 60) : Json();
  add_distribution_json(out, "ttft", metrics.ttft);
  add_distribution_json(out, "tpot", metrics.tpot);
  add_distribution_json(out, "itl", metrics.itl);
  add_distribution_json(out, "e2e", metrics.e2e);
  return out;
}

void add_spec_decode_figures(Json& figures, const SpecDecodeStats& spec) {
  figures["mean_acceptance_length"] = spec.mean_acceptance_length;
  figures["acceptance_rate"] = spec.acceptance_rate;
  Json per_position = Json::array();
  for (double rate : spec.acceptance_rate_per_position) per_position.push_back(rate);
  figures["acceptance_rate_per_position"] = per_position;
  figures["num_drafts"] = spec.drafts;
  figures["num_draft_tokens"] = spec.draft_tokens;
  figures["num_accepted_tokens"] = spec.accepted_tokens;
}

Json per_request_json(std::span<const RequestRecord> records) {
  Json input_lens = Json::array(), output_lens = Json::array(), start_s = Json::array(), ttft_ms = Json::array(),
       tpot_ms = Json::array(), e2e_ms = Json::array(), errors = Json::array();
  for (const RequestRecord& record : records) {
    input_lens.push_back(record.prompt_tokens);
    output_lens.push_back(record.output_tokens);
    start_s.push_back(record.start_s);
    ttft_ms.push_back(record.success ? Json(record.ttft_s * 1000) : Json());
    const std::optional<double> tpot = record.success ? tpot_s(record) : std::nullopt;
    tpot_ms.push_back(tpot ? Json(*tpot * 1000) : Json());
    e2e_ms.push_back(record.success ? Json(record.e2e_s * 1000) : Json());
    errors.push_back(record.error);
  }
  Json out;
  out["input_lens"] = input_lens;
  out["output_lens"] = output_lens;
  out["start_s"] = start_s;
  out["ttft_ms"] = ttft_ms;
  out["tpot_ms"] = tpot_ms;
  out["e2e_ms"] = e2e_ms;
  out["errors"] = errors;
  return out;
}

std::string search_table(const SearchResult& result, double slo_tpot_ms) {
  std::string out = centered(str_cat(" Max QPM Search (p90 TPOT <= ", fixed2(slo_tpot_ms), " ms) "), '=');
  out += "probe  rate (req/s)       QPM  p90 TPOT (ms)  failed  meets\n";
  for (const Probe& probe : result.probes) {
    char row[128];
    std::snprintf(row, sizeof row, "%5d  %12.3f  %8.2f  %13.2f  %6lld  %s\n", probe.index, probe.request_rate,
                  probe.metrics.qpm, probe.metrics.tpot.p90_ms, static_cast<long long>(probe.metrics.failed),
                  probe.meets_slo ? "yes" : "no");
    out += row;
  }
  if (result.best) {
    add_row(out, "Max QPM meeting the SLO:", fixed2(result.best->metrics.qpm));
    add_row(out, "At request rate (req/s):", fixed2(result.best->request_rate));
    add_row(out, "Its P90 TPOT (ms):", fixed2(result.best->metrics.tpot.p90_ms));
  } else {
    out += "No probe met the SLO.\n";
  }
  out += std::string(kTableWidth, '=') + "\n";
  return out;
}

Json search_json(const SearchResult& result, double slo_tpot_ms) {
  Json out;
  out["slo_tpot_ms"] = slo_tpot_ms;
  out["max_qpm"] = result.best ? Json(result.best->metrics.qpm) : Json();
  out["max_qpm_request_rate"] = result.best ? Json(result.best->request_rate) : Json();
  out["max_qpm_p90_tpot_ms"] = result.best ? Json(result.best->metrics.tpot.p90_ms) : Json();
  Json probes = Json::array();
  for (const Probe& probe : result.probes) {
    Json entry;
    entry["request_rate"] = probe.request_rate;
    entry["meets_slo"] = probe.meets_slo;
    entry["qpm"] = probe.metrics.qpm;
    entry["p90_tpot_ms"] = probe.metrics.tpot.p90_ms;
    entry["completed"] = probe.metrics.completed;
    entry["failed"] = probe.metrics.failed;
    entry["duration_s"] = probe.metrics.duration_s;
    probes.push_back(entry);
  }
  out["probes"] = probes;
  return out;
}

}  // namespace dsinfer::loadgen
