// How many tokens a decode instance's answer held, for its average output length (admission.h),
// read from the bytes the router passes through without parsing every chunk: the last
// "completion_tokens" of the answer's usage when it has one (every non-streamed answer; a stream
// with stream_options.include_usage), else, for a stream, its SSE data events other than [DONE]
// (one a token for a plain stream; an approximation where an event carries several tokens).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dsinfer::router {

class OutputLengthCounter {
 public:
  void feed(std::string_view bytes);
  // The answer's output tokens; empty when it shows neither usage nor SSE events.
  std::optional<int64_t> tokens() const;

 private:
  std::string carry_;  // the last bytes fed, so a marker split between two pieces is still found
  std::string tail_;   // the answer's last bytes, where the usage is
  int64_t events_ = 0;
  int64_t done_events_ = 0;
};

}  // namespace dsinfer::router
