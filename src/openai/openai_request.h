// The request bodies of POST /v1/chat/completions and POST /v1/completions, parsed and validated.
//
// Field names, defaults and limits follow the OpenAI API plus vLLM's extensions (top_k, min_p,
// repetition_penalty, stop_token_ids, ignore_eos, min_tokens, skip_special_tokens,
// include_stop_str_in_output, chat_template_kwargs, add_generation_prompt), so clients written
// for either work unchanged. As in vLLM, unknown fields are ignored and a known field of the wrong
// type is an error. A field we know but cannot honour yet (best_of > n, echo with logprobs,
// prompt_logprobs in a stream, images) is refused with a 400 rather than silently ignored, because
// ignoring it would change the answer without telling the client.
//
// n > 1 asks for n choices of each prompt (choice_fanout.h runs them); /v1/completions takes a batch
// of prompts; chat's continue_final_message continues the last (assistant) message (chat_prompt.h).
//
// Every refusal is a ProtocolError (400) whose message names the field and the value at fault.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/json.h"
#include "runtime/request.h"
#include "openai/openai_messages.h"
#include "openai/openai_structured.h"
#include "openai/openai_tools.h"
#include "openai/reasoning_parser.h"

namespace dsinfer::server {

// The most choices one request may ask for: n per prompt, and n times the prompts of a batch. Each
// is an engine request of its own, so these bound what one HTTP request can put in the queue.
inline constexpr int64_t kMaxChoicesPerPrompt = 128;
inline constexpr int64_t kMaxChoicesPerRequest = 1024;

// What both endpoints say about generating and delivering the answer.
struct GenerationParams {
  std::optional<int64_t> max_tokens;  // unset: up to the end of the context
  int64_t min_tokens = 0;
  double temperature = 1.0;
  double top_p = 1.0;
  int32_t top_k = 0;                  // 0: off (vLLM's -1 is read as 0)
  double min_p = 0.0;
  std::optional<uint64_t> seed;       // a negative seed keeps its bits
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  double repetition_penalty = 1.0;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  int32_t logprobs = -1;              // -1: none; N >= 0: the chosen token's logprob and the top N
  // vLLM's prompt_logprobs: -1: none; N >= 0: each prompt token's logprob and rank, and the top N.
  // Whole answers only (vLLM refuses them in a stream too): completions give them in each choice,
  // chat in the response.
  int32_t prompt_logprobs = -1;
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  // stream_options.continuous_usage_stats, with include_usage (as vLLM reads it): every chunk
  // carries its choice's usage so far.
  bool continuous_usage = false;
  int64_t n = 1;                      // choices per prompt; best_of, when given, must equal it
  // Structured output, in whichever spelling the client used (openai_structured.h), and logit_bias.
  std::optional<StructuredOutputRequest> structured_output;
  std::vector<runtime::LogitBias> logit_bias;
};

struct ChatCompletionRequest {
  std::string model;                  // empty: the served model
  std::vector<ChatMessage> messages;
  GenerationParams params;
  Json tools;                         // null, or the list of tool definitions, as sent (openai_tools.h)
  ToolChoice tool_choice = ToolChoice::kNone;
  std::string tool_choice_function;   // ToolChoice::kNamed: the function the answer must call
  bool parallel_tool_calls = true;    // false: at most one call (forced calls stop after it; later
                                      // calls the model writes are dropped)
  Json chat_template_kwargs;          // null, or an object of extra template variables
  bool add_generation_prompt = true;  // false by default when continuing the final message
  // vLLM's field: the last message is the assistant's, and the answer continues its text instead
  // of starting a new turn (chat_prompt.h renders it). Needs add_generation_prompt false.
  bool continue_final_message = false;
  // With a reasoning parser: vLLM's include_reasoning: false drops the thinking (kOmit); SGLang's
  // separate_reasoning: false leaves it in content (kInline). Both false contradict each other: a 400.
  ReasoningOutput reasoning_output = ReasoningOutput::kSeparate;

  // The `messages` the chat template reads: each message with its text content as one string.
  Json template_messages() const;
  // The template's other variables for ChatTemplate::render: `tools` when given, then
  // chat_template_kwargs (which win on a clash, as in vLLM).
  Json template_context() const;
  // The engine's options once the rendered prompt is known to be prompt_tokens long: max_tokens
  // defaults to the rest of the context; a prompt or a max_tokens that does not fit is a 400
  // ProtocolError worded as OpenAI and vLLM word it ("This model's maximum context length is ...").
  runtime::RequestOptions request_options(int64_t prompt_tokens, int64_t max_model_len) const;
};

struct CompletionRequest {
  std::string model;
  // One prompt, or a batch: each text, or token ids used as given. Choice prompt_index * n + i of
  // the answer is the i-th sample of prompt prompt_index, as in OpenAI's API.
  std::vector<std::variant<std::string, std::vector<int32_t>>> prompts;
  GenerationParams params;            // max_tokens defaults to 16 here, as in OpenAI's API
  bool add_special_tokens = true;     // vLLM's extension: BOS before a text prompt
  bool echo = false;                  // each choice's text starts with its prompt's

  runtime::RequestOptions request_options(int64_t prompt_tokens, int64_t max_model_len) const;  // as for chat
};

// A request body as JSON; malformed text is a 400 ProtocolError with the parser's line and column.
Json parse_json_body(std::string_view body);

ChatCompletionRequest parse_chat_request(const Json& body);
CompletionRequest parse_completion_request(const Json& body);

}  // namespace dsinfer::server
