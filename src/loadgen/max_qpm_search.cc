// find_max_qpm: bracket by doubling or halving, then bisect.
#include "loadgen/max_qpm_search.h"

#include <cmath>

#include "core/error.h"

namespace dsinfer::loadgen {
namespace {

bool meets(const RunMetrics& metrics, double slo_tpot_ms) {
  return metrics.completed > 0 && metrics.failed == 0 && metrics.tpot.p90_ms <= slo_tpot_ms;
}

// The rates that met the target and missed it, closest to the boundary so far.
struct Bracket {
  std::optional<double> good;  // highest rate that met it
  std::optional<double> bad;   // lowest rate that missed it

  void add(double rate, bool met) {
    std::optional<double>& side = met ? good : bad;
    if (!side || (met ? rate > *side : rate < *side)) side = rate;
  }
  // The next rate to probe, or none once the boundary is found (or noise crossed the bounds).
  std::optional<double> next(double tolerance) const {
    if (!bad) return *good * 2;
    if (!good) return *bad / 2;
    if (*bad <= *good * (1 + tolerance)) return std::nullopt;
    return (*good + *bad) / 2;
  }
};

}  // namespace

SearchResult find_max_qpm(const ProbeRunner& run_probe, const SearchOptions& options) {
  DSINFER_CHECK(options.initial_rate > 0 && std::isfinite(options.initial_rate),
                "the search needs a finite starting rate above 0, got ", options.initial_rate);
  DSINFER_CHECK(options.max_probes >= 1, "the search needs at least one probe");
  SearchResult result;
  Bracket bracket;
  std::optional<double> rate = options.initial_rate;
  for (int index = 0; rate && index < options.max_probes; ++index) {
    Probe probe;
    probe.index = index;
    probe.request_rate = *rate;
    probe.metrics = run_probe(*rate, index);
    probe.meets_slo = meets(probe.metrics, options.slo_tpot_ms);
    const bool saturated = !bracket.bad && probe.meets_slo && result.best &&
                           probe.metrics.qpm < result.best->metrics.qpm * (1 + options.tolerance);
    bracket.add(*rate, probe.meets_slo);
    if (probe.meets_slo && (!result.best || probe.metrics.qpm > result.best->metrics.qpm)) result.best = probe;
    result.probes.push_back(probe);
    rate = saturated ? std::nullopt : bracket.next(options.tolerance);
  }
  return result;
}

}  // namespace dsinfer::loadgen
