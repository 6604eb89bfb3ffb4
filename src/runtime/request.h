// What a caller asks of the engine, and what flows back to it.
//
// A request moves through RequestState in time order; "has it reached X" is a comparison.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "structured/compiled_grammar.h"

namespace dsinfer::runtime {

enum class RequestState : uint8_t { kWaiting, kPrefilling, kDecoding, kFinished, kAborted };

enum class FinishReason : uint8_t { kNone, kStop, kLength, kAbort, kError };
const char* finish_reason_name(FinishReason reason);  // "stop", "length", "abort", "error"; "" for none

struct SamplingOptions {
  float temperature = 1.0f;  // 0: greedy
  float top_p = 1.0f;
  int top_k = 0;  // 0: off
  float min_p = 0.0f;
  std::optional<uint64_t> seed;      // unset: drawn from the engine's generator
  float repetition_penalty = 1.0f;   // >1 discourages tokens already in prompt or output (HF style)
  float frequency_penalty = 0.0f;    // OpenAI: minus penalty * count in the output so far
  float presence_penalty = 0.0f;     // OpenAI: minus penalty if present in the output so far
};

// OpenAI's logit_bias entry: `bias` is added to the token's logit before sampling (after the
// penalties); +100 all but forces it, -100 all but bans it.
struct LogitBias {
  int32_t token = 0;
  float bias = 0.0f;
  friend bool operator==(const LogitBias&, const LogitBias&) = default;
};

// Structured output (issue 12): the output must match `grammar` (compiled for this engine's
// vocabulary; the server compiles it off the engine thread). The engine gives the request a
// matcher: each step's row gets the grammar's bitmask of allowed tokens, and the request finishes
// with "stop" once the grammar has ended (a stop token accepted where the grammar may end).
struct OutputConstraint {
  structured::CompiledGrammarPtr grammar;
  // Reasoning models: the grammar applies only after these tokens (structured::reasoning_end_tokens,
  // `</think>`); empty: from the first output token.
  std::vector<int32_t> reasoning_end;
};

// Prefill/decode disaggregation (disaggregation.h): the request is one half of a pair the router
// tagged with `room`. kSend, on a prefill engine: compute the prompt, sample the first token, push
// the prompt's KV pages to the decode engine, end with that one token ("length"). kReceive, on a
// decode engine: reserve the prompt's pages, announce them, take the prompt's KV and first token
// from the note, then decode the rest.
struct KvHandoff {
  enum class Role : uint8_t { kSend, kReceive };
  Role role = Role::kSend;
  std::string room;
  // kReceive: where the request's prefill instance takes destinations (the server's bootstrap
  // host:port), handed to DisaggregationConfig::announce as it is; the engine never reads it.
  std::string peer;
};

struct RequestOptions {
  SamplingOptions sampling;
  std::vector<LogitBias> logit_bias;   // distinct tokens inside the vocabulary (the engine checks)
  std::optional<OutputConstraint> constraint;
  int64_t max_tokens = 16;             // new tokens at most (the context may end it sooner)
  int64_t min_tokens = 0;              // stop conditions ignored before this many new tokens
  std::vector<std::string> stop;       // stop strings; the text ends before the first match
  std::vector<int32_t> stop_token_ids; // in addition to the model's EOS (unless ignore_eos)
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
  int logprobs = -1;                   // -1: none; N >= 0: the chosen token's logprob plus the top N
  // vLLM's prompt_logprobs. -1: none; N >= 0: every prompt token after the first is scored against
  // the tokens before it (PromptLogprob, with the top N). Such a request takes no prefix-cache hits
  // for the rows it still has to score (cached rows are never computed), but publishes its pages.
  int prompt_logprobs = -1;
  bool skip_special_tokens = true;     // in the streamed text
  std::optional<KvHandoff> kv_handoff;
};

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // the N most likely tokens and their logprobs
};

// One prompt token scored against the tokens before it (vLLM's prompt_logprobs), on the raw
// logits as TokenLogprob is: log_softmax before penalties, logit_bias and temperature.
struct PromptLogprob {
  int32_t token_id = 0;  // the prompt token
  float logprob = 0.0f;
  // Its rank over the whole vocabulary, vLLM's count: the tokens whose logit is at least its own
  // (itself included), so 1 is the most likely and a tie ranks every tied token last.
  int32_t rank = 0;
  std::vector<std::pair<int32_t, float>> top;  // the N most likely tokens (ranks 1..N), ties to the lower id
};

// One delivery to a request's sink. The engine calls the sink from its output thread, in order,
// once per step that produced output for the request, and a last time with `finished` set.
struct StreamOutput {
  std::vector<int32_t> token_ids;   // new tokens since the last delivery
  std::string text;                 // new text since the last delivery (stop strings withheld)
  std::vector<TokenLogprob> logprobs;  // one per new token when asked for
  // With the first delivery of a request that asked for prompt_logprobs (and with no other): one per
  // prompt token after the first, in order; the first has no context to be scored against.
  std::vector<PromptLogprob> prompt_logprobs;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string stop_reason;          // the stop string that matched, if any
  std::string error;                // set with FinishReason::kError
  int64_t prompt_tokens = 0;        // usage, filled on the last delivery
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;        // prompt tokens served from the prefix cache
};

// Called on the engine's output thread, never its scheduling thread: a slow sink delays other
// requests' outputs, not the steps (until OutputProcessor::kMaxQueuedSteps steps wait). The output
// is only valid during the call (the engine reuses it).
using StreamSink = std::function<void(const StreamOutput&)>;
using RequestId = uint64_t;
using Clock = std::chrono::steady_clock;

}  // namespace dsinfer::runtime
