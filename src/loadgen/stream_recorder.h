// What one streamed OpenAI answer delivered (completions or chat completions, stream: true), with
// the time each token chunk arrived: the raw material of TTFT, ITL and E2E (request_metrics.h).
//
// A token chunk is a data event whose first choice carries generated text: "text" (completions),
// "delta.content" or "delta.reasoning_content" (chat). That is SGLang's rule (bench_serving.py:
// chunks with non-empty text). vLLM's serve.py now counts every chunk that has choices, which on
// vLLM's own server is the same thing; it is not on servers that, like OpenAI's and ours, send the
// chat role chunk as soon as the request is accepted and end with an empty-text finish chunk:
// counting those would make TTFT the acceptance time and add a zero gap to every request.
//
// An event's time is the arrival time of the piece of bytes that completed it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loadgen/sse_reader.h"

namespace dsinfer::loadgen {

class StreamRecorder {
 public:
  // A piece of the response body, received at `arrival_s` (seconds, any fixed origin).
  void on_piece(std::string_view bytes, double arrival_s);
  // The body ended (the connection may have dropped; done() says whether the stream was complete).
  void on_end(double arrival_s);

  const std::vector<double>& token_chunk_times() const { return token_chunk_times_; }
  // From the usage chunk (stream_options.include_usage), when the server sent one.
  std::optional<int64_t> prompt_tokens() const { return prompt_tokens_; }
  std::optional<int64_t> completion_tokens() const { return completion_tokens_; }
  bool done() const { return done_; }  // "data: [DONE]" arrived
  // An error event's message (a request the server failed mid-stream) or a chunk that is not
  // JSON; empty when all was well.
  const std::string& error() const { return error_; }

 private:
  void on_event(const std::string& data, double arrival_s);

  SseReader reader_;
  std::vector<double> token_chunk_times_;
  std::optional<int64_t> prompt_tokens_;
  std::optional<int64_t> completion_tokens_;
  bool done_ = false;
  std::string error_;
};

}  // namespace dsinfer::loadgen
