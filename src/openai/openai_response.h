// The answers of the generation endpoints when not streamed: a chat.completion or a
// text_completion object, shaped as the OpenAI API sends them, with `usage` always present.
//
// The chat message carries `reasoning_content` (DeepSeek's API and vLLM's field) when a reasoning
// parser is on (null when the request said include_reasoning: false, or separate_reasoning: false,
// which leaves the thinking in content), and `tool_calls` when the request's tools are parsed. The
// chain is the one vLLM runs: the reasoning parser first, then the tool-call parser on what is left
// as content; with calls, empty content is null and a model that stopped by itself finishes with
// "tool_calls".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "runtime/request.h"
#include "openai/openai_logprobs.h"
#include "openai/openai_tools.h"
#include "openai/reasoning_parser.h"

namespace dsinfer::server {

// What every object and chunk of one response repeats.
struct ResponseMeta {
  std::string id;        // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;   // Unix time, seconds
  std::string model;     // the served model name
};

// prefix + 32 random hex digits: "chatcmpl-3f9a...".
std::string new_response_id(std::string_view prefix);
int64_t unix_time_now();

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
};

// The counts the engine reports with a request's last StreamOutput.
Usage usage_of(const runtime::StreamOutput& last);
// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}
Json usage_json(const Usage& usage);

// "stop", "length", "abort" (vLLM's, for a cancelled request), "error"; null while unfinished.
Json finish_reason_json(runtime::FinishReason reason);

// A whole generation, gathered from one request's StreamOutputs.
struct Generation {
  std::string text;
  std::vector<runtime::TokenLogprob> logprobs;
  std::vector<runtime::PromptLogprob> prompt_logprobs;  // vLLM's prompt_logprobs, when asked for
  runtime::FinishReason finish_reason = runtime::FinishReason::kNone;
  std::string error;  // with FinishReason::kError: the server answers 500 instead of an object
  Usage usage;

  void add(const runtime::StreamOutput& output);
};

// How the text of a generation is presented.
struct OutputFormat {
  bool logprobs = false;  // the request asked for them
  TokenText token_text;   // needed when logprobs or prompt_logprobs is set
  bool reasoning = false; // --reasoning-parser deepseek-r1: <think>...</think> becomes reasoning_content
  ToolParsing tools;      // the content's tool calls become tool_calls (openai_tools.h)
  // With `reasoning`: the request's choice (include_reasoning, separate_reasoning). Not kSeparate:
  // reasoning_content is null in a whole answer and absent from a stream's deltas.
  ReasoningOutput reasoning_output = ReasoningOutput::kSeparate;
  // vLLM's prompt_logprobs were asked for: a completion choice carries them, a chat answer at its top.
  bool prompt_logprobs = false;
};

// The chat finish_reason: "tool_calls" instead of "stop" when the answer made calls. A cut-off
// answer stays "length", so that the client knows its last call may be missing.
Json chat_finish_reason_json(runtime::FinishReason reason, bool made_calls);

// One choice of a whole answer, at `index` (several with n > 1 or batched prompts; see
// choice_fanout.h): {"index", "message", "logprobs", "finish_reason"} for chat, {"index", "text",
// "logprobs", "finish_reason"} for completions, plus "prompt_logprobs" when format asks.
Json chat_answer_choice(int64_t index, const Generation& generation, const OutputFormat& format);
Json completion_answer_choice(int64_t index, const Generation& generation, const OutputFormat& format);
// The whole answer around its choices: object "chat.completion" or "text_completion".
Json response_envelope(const ResponseMeta& meta, std::string_view object, Json::Array choices, const Usage& usage);
// A chat answer's "prompt_logprobs" (vLLM puts them beside the choices, since every choice shares
// the prompt), from the generation that scored it, when format asks.
void add_chat_prompt_logprobs(Json& answer, const Generation& generation, const OutputFormat& format);

// A whole answer of one choice.
Json chat_completion_response(const ResponseMeta& meta, const Generation& generation, const OutputFormat& format);
Json completion_response(const ResponseMeta& meta, const Generation& generation, const OutputFormat& format);

}  // namespace dsinfer::server
