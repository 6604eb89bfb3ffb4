#include "router/placement.h"

#include <algorithm>

namespace dsinfer::router {
namespace {

bool is_excluded(std::span<const size_t> excluded, size_t id) {
  return std::find(excluded.begin(), excluded.end(), id) != excluded.end();
}

// The free share of `total` when `used` of it is taken; `unknown` when there is no total.
double free_fraction(int64_t used, int64_t total, double unknown) {
  if (total <= 0) return unknown;
  return static_cast<double>(std::max<int64_t>(0, total - used)) / static_cast<double>(total);
}

}  // namespace

size_t choose_prefill(std::span<const PrefillCandidate> candidates, const BalanceThresholds& thresholds) {
  size_t least = 0;
  size_t best = 0;
  for (size_t i = 1; i < candidates.size(); ++i) {
    const PrefillCandidate& c = candidates[i];
    if (c.in_flight < candidates[least].in_flight) least = i;
    const PrefillCandidate& b = candidates[best];
    if (c.matched_blocks > b.matched_blocks || (c.matched_blocks == b.matched_blocks && c.in_flight < b.in_flight))
      best = i;
  }
  if (candidates[best].matched_blocks == 0) return least;
  const int64_t best_load = candidates[best].in_flight;
  const int64_t least_load = candidates[least].in_flight;
  const bool overloaded = best_load - least_load > thresholds.absolute &&
                          static_cast<double>(best_load) > thresholds.relative * static_cast<double>(least_load);
  return overloaded ? least : best;
}

double decode_headroom(const DecodeCandidate& candidate) {
  return std::min(free_fraction(candidate.load, candidate.slots, 0.0),
                  free_fraction(candidate.used_kv_tokens, candidate.total_kv_tokens, 1.0));
}

size_t choose_decode(std::span<const DecodeCandidate> candidates) {
  size_t best = 0;
  double best_headroom = decode_headroom(candidates[0]);
  for (size_t i = 1; i < candidates.size(); ++i) {
    const double headroom = decode_headroom(candidates[i]);
    if (headroom > best_headroom || (headroom == best_headroom && candidates[i].load < candidates[best].load)) {
      best = i;
      best_headroom = headroom;
    }
  }
  return best;
}

PlaceOutcome place(const WorkerRegistry& workers, std::span<const uint64_t> prompt_blocks, bool decode_alone,
                   const BalanceThresholds& thresholds, std::span<const size_t> excluded, Placement* placement) {
  std::vector<PrefillCandidate> prefills;
  std::vector<DecodeCandidate> decodes;
  bool any_decode = false;
  for (size_t id = 0; id < workers.size(); ++id) {
    const Worker& worker = workers[id];
    if (!worker.healthy || is_excluded(excluded, id)) continue;
    if (worker.role == WorkerRole::kPrefill) {
      if (!decode_alone) prefills.push_back({id, worker.in_flight, worker.prefixes.match(prompt_blocks)});
      continue;
    }
    any_decode = true;
    if (worker.remaining_slots() == 0) continue;
    DecodeCandidate candidate{id, worker.load(), worker.slots};
    if (worker.reported) {
      candidate.used_kv_tokens = worker.reported->used_tokens;
      candidate.total_kv_tokens = worker.reported->total_tokens;
    }
    decodes.push_back(candidate);
  }
  if (!decode_alone && prefills.empty()) return PlaceOutcome::kNoPrefill;
  if (!any_decode) return PlaceOutcome::kNoDecode;
  if (decodes.empty()) return PlaceOutcome::kNoSlot;
  placement->decode = decodes[choose_decode(decodes)].worker;
  placement->prefill.reset();
  if (!decode_alone) placement->prefill = prefills[choose_prefill(prefills, thresholds)].worker;
  return PlaceOutcome::kPlaced;
}

}  // namespace dsinfer::router
