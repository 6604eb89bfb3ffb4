#include "openai/openai_stream.h"

#include <utility>
#include <vector>

#include "core/error.h"
#include "openai/openai_errors.h"

namespace dsinfer::server {

std::string sse_event(const Json& data) { return "data: " + data.dump() + "\n\n"; }

ChunkEnvelope::ChunkEnvelope(ResponseMeta meta, std::string_view object, bool include_usage)
    : meta_(std::move(meta)), object_(object), include_usage_(include_usage) {}

Json ChunkEnvelope::chunk_json(Json choices) const {
  Json chunk = Json::object();
  chunk["id"] = meta_.id;
  chunk["object"] = object_;
  chunk["created"] = meta_.created;
  chunk["model"] = meta_.model;
  chunk["choices"] = std::move(choices);
  if (include_usage_) chunk["usage"] = nullptr;
  return chunk;
}

std::string ChunkEnvelope::chunk(Json choice, Json usage) const {
  Json chunk = chunk_json(Json(Json::Array{std::move(choice)}));
  if (!usage.is_null()) chunk["usage"] = std::move(usage);
  return sse_event(chunk);
}

std::string ChunkEnvelope::finish(const runtime::StreamOutput& last, Json finish_choice, Json usage) const {
  if (last.finish_reason == runtime::FinishReason::kError)
    return str_cat("data: ", error_body(500, last.error), "\n\n");
  return chunk(std::move(finish_choice), std::move(usage));
}

std::string ChunkEnvelope::close(const std::optional<Usage>& usage) const {
  std::string events;
  if (include_usage_ && usage) {
    Json usage_chunk = chunk_json(Json::array());
    usage_chunk["usage"] = usage_json(*usage);
    events = sse_event(usage_chunk);
  }
  return events.append(kSseDone);
}

std::string ChunkEnvelope::end(const runtime::StreamOutput& last, Json finish_choice, Json usage) const {
  const bool failed = last.finish_reason == runtime::FinishReason::kError;
  return finish(last, std::move(finish_choice), std::move(usage)) +
         close(failed ? std::nullopt : std::optional(usage_of(last)));
}

Json usage_so_far_json(int64_t prompt_tokens, int64_t completion_tokens) {
  Json usage = Json::object();
  usage["prompt_tokens"] = prompt_tokens;
  usage["completion_tokens"] = completion_tokens;
  usage["total_tokens"] = prompt_tokens + completion_tokens;
  return usage;
}

namespace {

Json chat_choice(int64_t index, Json delta, Json logprobs, Json finish_reason) {
  Json choice = Json::object();
  choice["index"] = index;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = std::move(finish_reason);
  return choice;
}

Json completion_choice(int64_t index, std::string text, Json logprobs, Json finish_reason) {
  Json choice = Json::object();
  choice["index"] = index;
  choice["text"] = std::move(text);
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = std::move(finish_reason);
  return choice;
}

// A delta carrying one piece of one call: its announcement (id, type, name, empty arguments) or
// the next piece of its arguments.
Json tool_call_delta(const ToolCallDelta& call, bool announce) {
  Json function = Json::object();
  if (announce) function["name"] = call.name;
  function["arguments"] = announce ? std::string() : call.arguments;
  Json item = Json::object();
  item["index"] = static_cast<int64_t>(call.index);
  if (announce) {
    item["id"] = call.id;
    item["type"] = "function";
  }
  item["function"] = std::move(function);
  Json delta = Json::object();
  delta["tool_calls"] = Json(Json::Array{std::move(item)});
  return delta;
}

// The end of a choice: its finish (or error) and, when it ends the stream, the stream's end.
std::string choice_end(const ChunkEnvelope& envelope, StreamChoice choice, const runtime::StreamOutput& last,
                       Json finish_choice, Json usage) {
  if (choice.ends_stream) return envelope.end(last, std::move(finish_choice), std::move(usage));
  return envelope.finish(last, std::move(finish_choice), std::move(usage));
}

Json usage_so_far(const ContinuousUsage& continuous, int64_t completion_tokens) {
  return continuous.enabled ? usage_so_far_json(continuous.prompt_tokens, completion_tokens) : Json();
}

}  // namespace

ChatCompletionStream::ChatCompletionStream(ResponseMeta meta, OutputFormat format, bool include_usage,
                                           StreamChoice choice, ContinuousUsage continuous_usage)
    : envelope_(std::move(meta), "chat.completion.chunk", include_usage),
      choice_(choice),
      format_(std::move(format)),
      continuous_usage_(continuous_usage) {
  // separate_reasoning: false leaves the thinking in the text, where nothing looks for it.
  if (format_.reasoning && format_.reasoning_output != ReasoningOutput::kInline) reasoning_.emplace();
  if (format_.tools.enabled()) tool_calls_.emplace(format_.tools.parser, format_.tools.offered);
}

Json ChatCompletionStream::usage() const { return usage_so_far(continuous_usage_, completion_tokens_); }

std::string ChatCompletionStream::begin() {
  if (begun_) return "";
  begun_ = true;
  Json delta = Json::object();
  delta["role"] = "assistant";
  delta["content"] = "";
  return envelope_.chunk(chat_choice(choice_.index, std::move(delta), Json(), Json()), usage());
}

std::string ChatCompletionStream::next(const runtime::StreamOutput& output) {
  if (ended_) return "";
  std::string events = begin();
  completion_tokens_ += static_cast<int64_t>(output.token_ids.size());
  ReasoningDelta text{.reasoning = "", .content = output.text};
  if (reasoning_) {
    text = reasoning_->push(output.text);
    if (output.finished) text.reasoning += reasoning_->finish().reasoning;
    if (format_.reasoning_output == ReasoningOutput::kOmit) text.reasoning.clear();
  }
  ToolStreamDelta calls;
  if (tool_calls_) {  // the tool-call parser reads what the reasoning parser left as content
    calls = tool_calls_->push(text.content);
    if (output.finished) calls.content += tool_calls_->finish().content;  // finish() sends no call pieces
    text.content = std::move(calls.content);
  }
  bool has_logprobs = format_.logprobs && !output.logprobs.empty();
  std::vector<Json> deltas;
  if (!text.reasoning.empty() || !text.content.empty()) {
    Json delta = Json::object();
    if (!text.reasoning.empty()) delta["reasoning_content"] = std::move(text.reasoning);
    if (!text.content.empty()) delta["content"] = std::move(text.content);
    deltas.push_back(std::move(delta));
  }
  for (const ToolCallDelta& call : calls.tool_calls) {
    if (format_.tools.max_calls > 0 && call.index >= format_.tools.max_calls) continue;  // parallel_tool_calls
    if (!call.id.empty()) deltas.push_back(tool_call_delta(call, /*announce=*/true));
    if (!call.arguments.empty()) deltas.push_back(tool_call_delta(call, /*announce=*/false));
  }
  if (deltas.empty() && has_logprobs) deltas.push_back(Json(Json::Object{{"content", ""}}));
  for (size_t i = 0; i < deltas.size(); ++i) {
    // The delivery's logprobs ride on its first chunk.
    Json logprobs = format_.logprobs && i == 0 ? chat_logprobs(output.logprobs, format_.token_text) : Json();
    events +=
        envelope_.chunk(chat_choice(choice_.index, std::move(deltas[i]), std::move(logprobs), Json()), usage());
  }
  if (output.finished) {
    ended_ = true;
    bool made_calls = tool_calls_ && !tool_calls_->streamed().calls.empty();
    events += choice_end(envelope_, choice_, output,
                         chat_choice(choice_.index, Json::object(), Json(),
                                     chat_finish_reason_json(output.finish_reason, made_calls)),
                         usage());
  }
  return events;
}

CompletionStream::CompletionStream(ResponseMeta meta, OutputFormat format, bool include_usage, StreamChoice choice,
                                   ContinuousUsage continuous_usage)
    : envelope_(std::move(meta), "text_completion", include_usage),
      choice_(choice),
      format_(std::move(format)),
      continuous_usage_(continuous_usage) {}

std::string CompletionStream::next(const runtime::StreamOutput& output) {
  if (ended_) return "";
  completion_tokens_ += static_cast<int64_t>(output.token_ids.size());
  const Json usage = usage_so_far(continuous_usage_, completion_tokens_);
  std::string events;
  bool has_logprobs = format_.logprobs && !output.logprobs.empty();
  if (!output.text.empty() || has_logprobs) {
    Json logprobs =
        format_.logprobs ? completion_logprobs(output.logprobs, format_.token_text, text_offset_) : Json();
    events += envelope_.chunk(completion_choice(choice_.index, output.text, std::move(logprobs), Json()), usage);
  }
  if (output.finished) {
    ended_ = true;
    events += choice_end(envelope_, choice_, output,
                         completion_choice(choice_.index, "", Json(), finish_reason_json(output.finish_reason)),
                         usage);
  }
  return events;
}

}  // namespace dsinfer::server
