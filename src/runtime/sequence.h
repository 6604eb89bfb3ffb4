// A request inside the engine: its tokens, how far the KV cache has caught up, its pages, its
// sampler and stop state, and its timestamps.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/request.h"
#include "runtime/sampler.h"
#include "runtime/stop_checker.h"
#include "structured/grammar_matcher.h"

namespace dsinfer::runtime {

struct Sequence {
  RequestId id = 0;
  RequestState state = RequestState::kWaiting;
  RequestOptions options;
  StreamSink sink;

  std::vector<int32_t> tokens;  // prompt then output; the last `unresolved` are placeholders
  int64_t prompt_length = 0;
  int64_t num_computed = 0;     // tokens whose latent rows are in the cache
  int64_t cached_tokens = 0;    // prompt tokens reused from the prefix cache (first admission)
  // prompt_logprobs: prompt positions [0, prompt_scored) have been scored (each against the token
  // after it) by launched steps; a recompute after preemption scores none of them again.
  int64_t prompt_scored = 0;
  std::vector<int32_t> pages;   // one hold each
  int64_t max_length = 0;       // prompt + max_tokens, capped by the context
  // The overlap scheduler (engine.cc): tokens a launched step will sample, held as placeholders
  // -(row + 1) at the end of `tokens` until that step is collected, and the launched steps that
  // still refer to this sequence (it is deleted only when none does).
  int64_t unresolved = 0;
  int steps_in_flight = 0;
  // Speculative decoding (speculative.h): the drafts the next step verifies after the last token
  // (made by the step that produced it), and the cache slots past a step's tokens that the step may
  // write (the MTP module's chained drafts), which pages are reserved for.
  std::vector<int32_t> drafts;
  int64_t reserve_ahead = 0;
  // Every computed token's row of the MTP module's cache is written: false once a step without
  // drafting (SpeculativeConfig::disable_by_batch_size) ran it, after which it drafts no more.
  bool mtp_cache_current = true;
  bool thinking = false;  // inside a reasoning section after the known tokens (relaxed acceptance)
  // Prefill/decode disaggregation (kv_handoff.h): a KV handoff has it (a receiver waiting for pages or
  // for its prompt's KV, a sender pushing its prompt's pages), so the scheduler leaves it alone.
  bool handing_off = false;

  SamplerState sampler;
  std::unique_ptr<StopChecker> stop;
  // Structured output: where the request is in its grammar (made from options.constraint).
  std::unique_ptr<structured::GrammarMatcher> matcher;

  Clock::time_point arrival;
  Clock::time_point first_scheduled;
  Clock::time_point last_token_time;
  bool scheduled_once = false;
  double ttft_seconds = -1.0;

  // Output tokens, placeholders included (what the next sampled token follows).
  int64_t output_length() const { return static_cast<int64_t>(tokens.size()) - prompt_length; }
  // Output tokens the host has seen.
  int64_t known_output_length() const { return output_length() - unresolved; }
  // A placeholder stands for its last token: nothing is left to run through the model.
  bool awaiting_last_token() const { return unresolved > 0 && static_cast<int64_t>(tokens.size()) >= max_length; }
  // Tokens still to run through the model before the next token can be sampled (drafts included).
  int64_t pending_tokens() const {
    return static_cast<int64_t>(tokens.size() + drafts.size()) - num_computed;
  }
  bool prefilling() const { return num_computed + 1 < static_cast<int64_t>(tokens.size()); }
  // prompt_logprobs asked for and some prompt row still to score: the prefix cache must not skip it.
  bool scoring_prompt() const { return options.prompt_logprobs >= 0 && prompt_scored < prompt_length - 1; }
};

}  // namespace dsinfer::runtime
