// Server-sent events from a byte stream that arrives in pieces split anywhere (inside a line, a
// "\r\n", a UTF-8 character), as the HTTP client hands them over.
//
// Follows the WHATWG event-stream rules: lines end with "\n", "\r\n" or "\r"; "data:" lines (one
// space after the colon dropped) make up an event, joined with "\n"; a blank line dispatches it;
// lines starting with ':' are comments (keep-alive pings) and other fields (event:, id:, retry:)
// are ignored, as an OpenAI stream carries nothing in them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsinfer::loadgen {

class SseReader {
 public:
  // The data of each event completed by `bytes`, in order.
  std::vector<std::string> feed(std::string_view bytes);
  // At the end of the stream: the last event if its blank line never came. The standard drops such
  // an event; a benchmark client keeps it (vLLM's does too), as some servers end on "data: [DONE]\n".
  std::vector<std::string> finish();

 private:
  void end_line(std::vector<std::string>& events);
  void dispatch(std::vector<std::string>& events);

  std::string line_;              // the line being read, without its end
  std::string data_;              // the data lines of the event being read, joined with "\n"
  bool has_data_ = false;         // a "data" field was seen (its value may be empty)
  bool after_carriage_return_ = false;  // the last byte was '\r': a '\n' next ends no new line
};

}  // namespace dsinfer::loadgen
