// The micro-batch step of scheduling: which tokens of which sequences run in the next step.
//
// Decode tokens first (every running sequence that has its next token to compute), then prefill
// chunks: sequences already part-way through their prompt, then new ones, shortest prompt first
// within each arrival window so that one long prompt cannot hold up many short ones while the
// windows keep a long prompt from waiting forever. All within `max_batched_tokens` tokens and
// `max_seqs` sequences; a prompt larger than what is left of the budget is chunked.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/request.h"

namespace dsinfer::runtime {

struct Candidate {
  int64_t index = 0;            // the caller's handle
  bool running = false;         // already holds pages (decoding or part-way through its prompt)
  int64_t pending_tokens = 0;   // tokens to compute before it can sample (1 when decoding)
  int64_t prompt_length = 0;    // for shortest-first ordering of new prompts
  Clock::time_point arrival;
};

struct PlannedWork {
  int64_t index = 0;
  int64_t num_tokens = 0;  // this step's tokens for the sequence (a chunk of its pending tokens)
};

struct MicroBatchLimits {
  int64_t max_batched_tokens = 2048;
  int64_t max_seqs = 256;
  double arrival_window_ms = 50.0;
};

// Candidates in arrival order; the plan lists running work first (decodes, then continuing
// prefills), then new prompts in the order they should be admitted.
std::vector<PlannedWork> plan_micro_batch(const std::vector<Candidate>& candidates, const MicroBatchLimits& limits);

}  // namespace dsinfer::runtime
