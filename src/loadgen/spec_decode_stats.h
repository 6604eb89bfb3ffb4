// Speculative decoding figures of `dsinfer bench serve`, read as vLLM's benchmarks read them: the
// server's spec_decode counters (GET /metrics, Prometheus text) before and after a run, and from
// their deltas
//
//   mean acceptance length  = 1 + accepted tokens / drafts     (tokens a sequence-step gains)
//   acceptance rate         = accepted tokens / draft tokens
//   position p's rate       = accepted at position p / drafts  (vLLM's 0-based position label)
//
// A server without the counters (speculative decoding off, or not vLLM-compatible metrics) gives
// none of them, and the report leaves them out.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace dsinfer::loadgen {

// The counters at one moment, summed over every label set (several models or engines).
struct SpecDecodeCounters {
  double drafts = 0;
  double draft_tokens = 0;
  double accepted_tokens = 0;
  std::vector<double> accepted_per_position;  // by position label 0, 1, ...
};
// Null when the text has no vllm:spec_decode_num_drafts sample.
std::optional<SpecDecodeCounters> parse_spec_decode_counters(std::string_view prometheus_text);

struct SpecDecodeStats {
  int64_t drafts = 0;
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;
  double mean_acceptance_length = 0;
  double acceptance_rate = 0;                       // a fraction
  std::vector<double> acceptance_rate_per_position;  // fractions, by position
};
// Null unless both snapshots have the counters and drafts were made between them.
std::optional<SpecDecodeStats> spec_decode_stats(const std::optional<SpecDecodeCounters>& before,
                                                 const std::optional<SpecDecodeCounters>& after);

}  // namespace dsinfer::loadgen
