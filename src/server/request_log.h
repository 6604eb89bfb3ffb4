// One log line per finished request, as vLLM logs its requests (--disable-log-requests turns it
// off): the response id the client saw, prompt and output tokens, time to first token, total time
// and finish reason, so that a slow or cut-short answer a user reports can be found in the log.
//
//   request chatcmpl-3f9a...: finish_reason=stop prompt_tokens=12 output_tokens=34 ttft_ms=5.1 total_ms=81.0
//
// Times are the server's, from the request's submission to the engine (after tokenizing) to the
// delivery of its first token and of its end, measured on the engine's output thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "runtime/request.h"

namespace dsinfer::server {

struct RequestRecord {
  std::string id;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  double ttft_ms = -1.0;  // negative: no token came
  double total_ms = 0.0;
  runtime::FinishReason finish_reason = runtime::FinishReason::kNone;
};

std::string request_log_line(const RequestRecord& record);

// Where the lines go: log_info unless a test captures them.
using LineSink = std::function<void(const std::string&)>;

// `sink`, wrapped so that once the request's last output arrives its line goes to `log` (before
// `sink` sees that output, so the line is written by the time the client has its answer). Call it
// just before Engine::submit: that is when the clock starts.
runtime::StreamSink with_request_log(runtime::StreamSink sink, std::string id, LineSink log = {});

}  // namespace dsinfer::server
