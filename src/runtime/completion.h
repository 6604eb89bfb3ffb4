// One request through an Engine, waited for: what `dsinfer generate`, the evaluation tools and
// tests use, so that offline generation runs the same loop as serving (one generation loop).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/engine.h"

namespace dsinfer::runtime {

struct Completion {
  std::vector<int32_t> tokens;  // every generated token (a stop token included when one ended it)
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;
  double first_token_seconds = 0.0;  // submit to the first token: the prefill
  double decode_seconds = 0.0;       // first token to the last
};

// Submits `prompt` and waits for the request to finish. Throws InvalidRequest as submit does.
Completion complete_request(Engine& engine, std::vector<int32_t> prompt, RequestOptions options);

// Engine settings for `requests` requests of up to `prompt + max_new_tokens` tokens each: KV pages
// for all of them at once, prompts prefilled in one step.
EngineConfig offline_engine_config(int64_t requests, int64_t prompt_tokens, int64_t max_new_tokens);

}  // namespace dsinfer::runtime
