// What `dsinfer bench serve` prints and writes: the summary table in the layout of vLLM's
// "Serving Benchmark Result" (a label padded to 40 columns, then the value), and the same figures
// as JSON for the "figures" of a bench result (bench/result_file.h); with the server's speculative
// decoding figures when it drafts (spec_decode_stats.h).
#pragma once

#include <optional>
#include <span>
#include <string>

#include "loadgen/max_qpm_search.h"
#include "loadgen/request_metrics.h"
#include "loadgen/spec_decode_stats.h"
#include "core/json.h"

namespace dsinfer::loadgen {

// What the table says about how the load was offered.
struct RunSetting {
  double request_rate = 0;       // requests/s; inf: all at once
  int64_t max_concurrency = 0;   // 0: no limit
  bool has_slo = false;          // print goodput
};

// With `spec` (the server's speculative decoding counters moved during the run), a "Speculative
// Decoding" section before the closing line.
std::string summary_table(const RunMetrics& metrics, const RunSetting& setting,
                          const std::optional<SpecDecodeStats>& spec = std::nullopt);
// The same rows as a table of their own (after the max-QPM search): acceptance rate (%), mean
// acceptance length, drafts, draft and accepted tokens, and each position's acceptance rate (%).
std::string spec_decode_table(const SpecDecodeStats& spec);
// The first lines of failed requests' errors (vLLM prints up to ten), or "" when none failed.
std::string failure_lines(std::span<const RequestRecord> records, size_t most = 10);

// {completed, failed, duration_s, total_input_tokens, ..., qpm, request_goodput, goodput_qpm,
//  mean_ttft_ms, median_ttft_ms, p90_ttft_ms, p99_ttft_ms, ... tpot, itl, e2e}; goodput is null
// without an SLO.
Json figures_json(const RunMetrics& metrics, bool has_slo);
// Adds {mean_acceptance_length, acceptance_rate (a fraction), acceptance_rate_per_position,
// num_drafts, num_draft_tokens, num_accepted_tokens} to `figures`.
void add_spec_decode_figures(Json& figures, const SpecDecodeStats& spec);
// Compact per-request arrays: input_lens, output_lens, start_s, ttft_ms, tpot_ms, e2e_ms, errors.
Json per_request_json(std::span<const RequestRecord> records);

// One line per probe and the answer.
std::string search_table(const SearchResult& result, double slo_tpot_ms);
// {"slo_tpot_ms", "max_qpm", "max_qpm_request_rate", "max_qpm_p90_tpot_ms", "probes": [...]};
// the max_qpm fields are null when no probe met the target.
Json search_json(const SearchResult& result, double slo_tpot_ms);

}  // namespace dsinfer::loadgen
