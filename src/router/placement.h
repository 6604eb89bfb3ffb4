// Which prefill (P) and decode (D) instance a request goes to.
//
// P: by prefix-cache affinity, unless that P is overloaded. The candidate is the healthy P whose
// prefix record (prefix_record.h) matches the most leading blocks of the prompt (ties: the fewer
// requests in flight, then the order given). It is overridden by the least loaded P (fewest of the
// router's requests in flight) when the prompt matches nowhere, or when the candidate's load
// exceeds the least loaded one's by more than both thresholds: more than `absolute` requests and
// more than `relative` times as many (SGLang's cache-aware policy has the same two thresholds).
// A long queue on one P costs more than the prefill a cached prefix saves.
//
// D: among healthy D's with a slot left (load below the slot budget, worker_registry.h), the one
// whose scarcer resource has the most headroom: the larger of the two free fractions is no use if
// the other is exhausted, so the score is min(free slots / slots, free KV tokens / KV tokens), the
// KV part from the D's last /v1/loads (1 before it reported). Ties: fewer requests, then the order
// given. No D with a slot left: the request waits in the admission queue (admission.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "router/worker_registry.h"

namespace dsinfer::router {

struct BalanceThresholds {
  int64_t absolute = 16;
  double relative = 1.5;
};

struct PrefillCandidate {
  size_t worker = 0;
  int64_t in_flight = 0;
  size_t matched_blocks = 0;
};
// The index in `candidates` (not empty) of the P to use.
size_t choose_prefill(std::span<const PrefillCandidate> candidates, const BalanceThresholds& thresholds);

struct DecodeCandidate {
  size_t worker = 0;
  int64_t load = 0;
  int64_t slots = 0;
  int64_t used_kv_tokens = 0;
  int64_t total_kv_tokens = 0;  // 0: not reported
};
double decode_headroom(const DecodeCandidate& candidate);  // in [0, 1]
// The index in `candidates` (not empty) of the D to use.
size_t choose_decode(std::span<const DecodeCandidate> candidates);

// A request's pair: `prefill` is empty for a request the D serves alone (a short prompt it absorbs).
struct Placement {
  std::optional<size_t> prefill;
  size_t decode = 0;
};

enum class PlaceOutcome { kPlaced, kNoPrefill, kNoDecode, kNoSlot };

// Chooses among the healthy workers not in `excluded` (those that failed this request already).
// Changes nothing: the caller reserves what it takes (Router::reserve).
PlaceOutcome place(const WorkerRegistry& workers, std::span<const uint64_t> prompt_blocks, bool decode_alone,
                   const BalanceThresholds& thresholds, std::span<const size_t> excluded, Placement* placement);

}  // namespace dsinfer::router
