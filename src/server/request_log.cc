#include "server/request_log.h"

#include <cstdio>
#include <memory>

#include "core/log.h"
#include "core/strings.h"

namespace dsinfer::server {
namespace {

std::string milliseconds_text(double ms) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", ms);
  return text;
}

}  // namespace

std::string request_log_line(const RequestRecord& record) {
  return str_cat("request ", record.id, ": finish_reason=", runtime::finish_reason_name(record.finish_reason),
                 " prompt_tokens=", record.prompt_tokens, " output_tokens=", record.output_tokens,
                 " ttft_ms=", record.ttft_ms < 0 ? std::string("none") : milliseconds_text(record.ttft_ms),
                 " total_ms=", milliseconds_text(record.total_ms));
}

runtime::StreamSink with_request_log(runtime::StreamSink sink, std::string id, LineSink log) {
  using Clock = std::chrono::steady_clock;
  if (!log) log = [](const std::string& line) { log_info(line); };
  // The sink runs on the engine's output thread only, one output at a time: no lock needed.
  struct Timing {
    Clock::time_point submitted = Clock::now();
    double ttft_ms = -1.0;
  };
  auto timing = std::make_shared<Timing>();
  return [sink = std::move(sink), id = std::move(id), log = std::move(log),
          timing](const runtime::StreamOutput& output) {
    auto since_submit = [&] {
      return std::chrono::duration<double, std::milli>(Clock::now() - timing->submitted).count();
    };
    if (timing->ttft_ms < 0 && !output.token_ids.empty()) timing->ttft_ms = since_submit();
    if (output.finished)
      log(request_log_line(
          {id, output.prompt_tokens, output.completion_tokens, timing->ttft_ms, since_submit(), output.finish_reason}));
    sink(output);
  };
}

}  // namespace dsinfer::server
