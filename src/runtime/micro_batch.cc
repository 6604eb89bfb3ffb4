#include "runtime/micro_batch.h"

#include <algorithm>

namespace dsinfer::runtime {

std::vector<PlannedWork> plan_micro_batch(const std::vector<Candidate>& candidates, const MicroBatchLimits& limits) {
  std::vector<const Candidate*> decodes, continuing, fresh;
  for (const Candidate& c : candidates) {
    if (!c.running) fresh.push_back(&c);
    else if (c.pending_tokens == 1) decodes.push_back(&c);
    else continuing.push_back(&c);
  }
  // New prompts: by arrival window, then shortest first, then arrival.
  auto window = [&](const Candidate* c) {
    auto since = std::chrono::duration<double, std::milli>(c->arrival - fresh.front()->arrival).count();
    return limits.arrival_window_ms > 0 ? static_cast<int64_t>(since / limits.arrival_window_ms) : 0;
  };
  if (!fresh.empty()) {
    std::vector<const Candidate*> by_arrival = fresh;
    std::stable_sort(by_arrival.begin(), by_arrival.end(),
                     [](const Candidate* a, const Candidate* b) { return a->arrival < b->arrival; });
    fresh = by_arrival;
    std::stable_sort(fresh.begin(), fresh.end(), [&](const Candidate* a, const Candidate* b) {
      int64_t wa = window(a), wb = window(b);
      if (wa != wb) return wa < wb;
      return a->prompt_length < b->prompt_length;
    });
  }

  std::vector<PlannedWork> plan;
  int64_t budget = limits.max_batched_tokens;
  auto take = [&](const std::vector<const Candidate*>& group) {
    for (const Candidate* c : group) {
      if (budget <= 0 || static_cast<int64_t>(plan.size()) >= limits.max_seqs) return;
      int64_t tokens = std::min(c->pending_tokens, budget);
      plan.push_back({c->index, tokens});
      budget -= tokens;
    }
  };
  take(decodes);
  take(continuing);
  take(fresh);
  return plan;
}

}  // namespace dsinfer::runtime
