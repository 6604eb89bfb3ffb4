// The streamed answers of the generation endpoints (stream: true): server-sent events exactly as
// the OpenAI API sends them.
//
// Chat, object "chat.completion.chunk":
//   data: {"id",...,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}
//   data: {...,"choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}]}
//         one per engine delivery that has text (or logprobs); with a reasoning parser the text
//         before </think> comes as "reasoning_content" instead (not at all with the request's
//         include_reasoning: false; as content, tags included, with separate_reasoning: false)
//   data: {...,"delta":{"tool_calls":[{"index":0,"id":"call_...","type":"function","function":{"name":"f","arguments":""}}]},...}
//   data: {...,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]},...}
//         with a tool-call parser: a call is announced once its name is complete, then its
//         arguments follow in pieces, one chunk each, as OpenAI streams them
//   data: {...,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}
//         ("tool_calls" when calls were made)
//   data: {...,"choices":[],"usage":{...}}   only with stream_options.include_usage, which also
//                                            puts "usage":null into every other chunk; with
//         continuous_usage_stats too, every other chunk carries its choice's usage so far instead
//         ({"prompt_tokens","completion_tokens","total_tokens"}, as vLLM sends it)
//   data: [DONE]
// Completions, object "text_completion": choices [{"index", "text", "logprobs", "finish_reason"}],
// no role chunk, and a finish chunk with "text":"".
// A request the engine fails ends with data: {"error": {...}} and data: [DONE], as in vLLM.
//
// With several choices (n > 1, batched prompts: choice_fanout.h) each choice's chunks carry its
// index and interleave; each choice ends with its own finish chunk, and the usage chunk (counting
// every choice) and [DONE] come once, after the last choice has ended.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/json.h"
#include "runtime/request.h"
#include "openai/openai_response.h"
#include "openai/reasoning_parser.h"
#include "openai/tool_call_parser.h"

namespace dsinfer::server {

inline constexpr std::string_view kSseContentType = "text/event-stream";
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// "data: <compact JSON>\n\n"
std::string sse_event(const Json& data);

// Where one choice's chunks sit in its stream: the choice's index, and whether the choice's end
// also ends the stream (usage chunk and [DONE]), as for a stream of that one choice alone. The
// server's streams are closed by choice_fanout.h instead, once their last choice has ended
// (ChunkEnvelope::close), whether they hold one choice or several.
struct StreamChoice {
  int64_t index = 0;
  bool ends_stream = true;
};

// stream_options.continuous_usage_stats: every chunk of a choice carries the choice's usage so far,
// counted from its prompt of `prompt_tokens`.
struct ContinuousUsage {
  bool enabled = false;
  int64_t prompt_tokens = 0;
};

// {"prompt_tokens", "completion_tokens", "total_tokens"}: a chunk's usage so far.
Json usage_so_far_json(int64_t prompt_tokens, int64_t completion_tokens);

// What the chunks of one stream share: the envelope, and the end of the stream.
class ChunkEnvelope {
 public:
  ChunkEnvelope(ResponseMeta meta, std::string_view object, bool include_usage);
  // A chunk holding one choice; `usage` (usage_so_far_json) replaces the null usage of
  // include_usage.
  std::string chunk(Json choice, Json usage = Json()) const;
  // After a choice's last delivery: finish_choice (with `usage`, as chunk()); or, for a failed
  // request, the error event.
  std::string finish(const runtime::StreamOutput& last, Json finish_choice, Json usage = Json()) const;
  // The stream's end: the usage chunk when asked for (and `usage` is given: not after an error),
  // then [DONE].
  std::string close(const std::optional<Usage>& usage) const;
  // finish() then close() with the usage of `last`: the end of a stream of one choice.
  std::string end(const runtime::StreamOutput& last, Json finish_choice, Json usage = Json()) const;

 private:
  Json chunk_json(Json choices) const;

  ResponseMeta meta_;
  std::string object_;
  bool include_usage_;
};

class ChatCompletionStream {
 public:
  ChatCompletionStream(ResponseMeta meta, OutputFormat format, bool include_usage, StreamChoice choice = {},
                       ContinuousUsage continuous_usage = {});
  // The role chunk, sent once the request is accepted; next() sends it first if begin() was not called.
  std::string begin();
  // The events for one delivery of the engine, ending with the choice's end (see StreamChoice) at
  // the last one (finished); nothing more after it.
  std::string next(const runtime::StreamOutput& output);

 private:
  Json usage() const;  // the chunks' usage so far with continuous usage, else null

  ChunkEnvelope envelope_;
  StreamChoice choice_;
  OutputFormat format_;
  ContinuousUsage continuous_usage_;
  std::optional<ReasoningParser> reasoning_;
  std::optional<ToolCallParser> tool_calls_;
  int64_t completion_tokens_ = 0;  // delivered so far
  bool begun_ = false;
  bool ended_ = false;
};

class CompletionStream {
 public:
  CompletionStream(ResponseMeta meta, OutputFormat format, bool include_usage, StreamChoice choice = {},
                   ContinuousUsage continuous_usage = {});
  std::string next(const runtime::StreamOutput& output);  // as ChatCompletionStream::next

 private:
  ChunkEnvelope envelope_;
  StreamChoice choice_;
  OutputFormat format_;
  ContinuousUsage continuous_usage_;
  int64_t completion_tokens_ = 0;  // delivered so far
  int64_t text_offset_ = 0;  // of the next token, for the legacy logprobs' text_offset
  bool ended_ = false;
};

}  // namespace dsinfer::server
