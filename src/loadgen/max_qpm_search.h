// --find-max-qpm: the highest QPM a server sustains while its p90 TPOT meets a target (the figure
// the DeepSeek serving reports quote), found by probing request rates.
//
// Latency grows with the offered rate, so the search brackets the largest good rate and bisects:
// from the initial rate it doubles until a probe misses the target (or halves until one meets it),
// then bisects between the best good rate and the lowest bad one until they are within the
// tolerance or the probes run out. A probe meets the target when it completed requests, none
// failed, and its p90 TPOT is at most the target. While doubling, a good probe that gains less
// than the tolerance in QPM over the best so far shows the server saturated below the target (a
// higher offered rate only queues), and the search stops there. The answer is the good probe with
// the highest measured QPM (below 60 x rate when the server falls behind).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "loadgen/request_metrics.h"

namespace dsinfer::loadgen {

struct SearchOptions {
  double slo_tpot_ms = 50;
  double initial_rate = 1;  // requests/s
  int max_probes = 8;
  double tolerance = 0.05;  // relative: of the bracket's width at the end, of a QPM gain that counts
};

struct Probe {
  int index = 0;            // 0, 1, ...: the probe's prompts differ by it
  double request_rate = 0;  // offered, requests/s
  RunMetrics metrics;
  bool meets_slo = false;
};

struct SearchResult {
  std::vector<Probe> probes;  // in the order they ran
  std::optional<Probe> best;  // none when no probe met the target
};

// Runs one probe: `index` requests a fresh set of prompts, `rate` is in requests/s.
using ProbeRunner = std::function<RunMetrics(double rate, int index)>;

SearchResult find_max_qpm(const ProbeRunner& run_probe, const SearchOptions& options);

}  // namespace dsinfer::loadgen
