#include "openai/openai_response.h"

#include <chrono>
#include <optional>
#include <random>
#include <utility>

#include "openai/reasoning_parser.h"
#include "openai/tool_call_parser.h"

namespace dsinfer::server {

std::string new_response_id(std::string_view prefix) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device device;
  std::string id(prefix);
  for (int word = 0; word < 4; ++word) {
    uint32_t bits = device();
    for (int digit = 0; digit < 8; ++digit, bits >>= 4) id += kHex[bits & 0xf];
  }
  return id;
}

int64_t unix_time_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Usage usage_of(const runtime::StreamOutput& last) {
  return {last.prompt_tokens, last.completion_tokens, last.cached_tokens};
}

Json usage_json(const Usage& usage) {
  Json json = Json::object();
  json["prompt_tokens"] = usage.prompt_tokens;
  json["completion_tokens"] = usage.completion_tokens;
  json["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  Json details = Json::object();
  details["cached_tokens"] = usage.cached_tokens;
  json["prompt_tokens_details"] = std::move(details);
  return json;
}

Json finish_reason_json(runtime::FinishReason reason) {
  switch (reason) {
    case runtime::FinishReason::kNone: return Json();
    case runtime::FinishReason::kStop: return "stop";
    case runtime::FinishReason::kLength: return "length";
    case runtime::FinishReason::kAbort: return "abort";
    case runtime::FinishReason::kError: return "error";
  }
  return Json();
}

void Generation::add(const runtime::StreamOutput& output) {
  text += output.text;
  logprobs.insert(logprobs.end(), output.logprobs.begin(), output.logprobs.end());
  prompt_logprobs.insert(prompt_logprobs.end(), output.prompt_logprobs.begin(), output.prompt_logprobs.end());
  if (!output.finished) return;
  finish_reason = output.finish_reason;
  error = output.error;
  usage = usage_of(output);
}

Json response_envelope(const ResponseMeta& meta, std::string_view object, Json::Array choices, const Usage& usage) {
  Json response = Json::object();
  response["id"] = meta.id;
  response["object"] = object;
  response["created"] = meta.created;
  response["model"] = meta.model;
  response["choices"] = Json(std::move(choices));
  response["usage"] = usage_json(usage);
  return response;
}

Json chat_finish_reason_json(runtime::FinishReason reason, bool made_calls) {
  if (made_calls && reason == runtime::FinishReason::kStop) return "tool_calls";
  return finish_reason_json(reason);
}

Json chat_answer_choice(int64_t index, const Generation& generation, const OutputFormat& format) {
  std::optional<std::string> content = generation.text;
  Json reasoning;
  if (format.reasoning && format.reasoning_output != ReasoningOutput::kInline) {
    ReasoningSplit split = ReasoningParser::split(generation.text);
    content = std::move(split.content);
    if (format.reasoning_output == ReasoningOutput::kSeparate) reasoning = std::move(split.reasoning);
  }
  Json tool_calls = Json::array();
  if (format.tools.enabled() && content) {
    ToolCallParse parse = ToolCallParser(format.tools.parser, format.tools.offered).parse(*content);
    for (const ToolCall& call : parse.calls) {
      if (format.tools.max_calls > 0 && tool_calls.size() >= format.tools.max_calls) break;  // parallel_tool_calls
      tool_calls.push_back(tool_call_json(call));
    }
    content = std::move(parse.content);
    if (content->empty()) content.reset();
  }
  Json message = Json::object();
  message["role"] = "assistant";
  message["content"] = content ? Json(*content) : Json();
  if (format.reasoning) message["reasoning_content"] = std::move(reasoning);
  bool made_calls = tool_calls.size() > 0;
  if (made_calls) message["tool_calls"] = std::move(tool_calls);
  Json choice = Json::object();
  choice["index"] = index;
  choice["message"] = std::move(message);
  choice["logprobs"] = format.logprobs ? chat_logprobs(generation.logprobs, format.token_text) : Json();
  choice["finish_reason"] = chat_finish_reason_json(generation.finish_reason, made_calls);
  return choice;
}

Json completion_answer_choice(int64_t index, const Generation& generation, const OutputFormat& format) {
  Json choice = Json::object();
  choice["index"] = index;
  choice["text"] = generation.text;
  int64_t text_offset = 0;
  choice["logprobs"] =
      format.logprobs ? completion_logprobs(generation.logprobs, format.token_text, text_offset) : Json();
  choice["finish_reason"] = finish_reason_json(generation.finish_reason);
  if (format.prompt_logprobs)
    choice["prompt_logprobs"] = prompt_logprobs_json(generation.prompt_logprobs, format.token_text);
  return choice;
}

void add_chat_prompt_logprobs(Json& answer, const Generation& generation, const OutputFormat& format) {
  if (format.prompt_logprobs)
    answer["prompt_logprobs"] = prompt_logprobs_json(generation.prompt_logprobs, format.token_text);
}

Json chat_completion_response(const ResponseMeta& meta, const Generation& generation, const OutputFormat& format) {
  Json answer =
      response_envelope(meta, "chat.completion", {chat_answer_choice(0, generation, format)}, generation.usage);
  add_chat_prompt_logprobs(answer, generation, format);
  return answer;
}

Json completion_response(const ResponseMeta& meta, const Generation& generation, const OutputFormat& format) {
  return response_envelope(meta, "text_completion", {completion_answer_choice(0, generation, format)},
                           generation.usage);
}

}  // namespace dsinfer::server
