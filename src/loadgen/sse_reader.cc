// SseReader: a byte at a time through a small line state machine (the pieces are a few KiB).
#include "loadgen/sse_reader.h"

#include <utility>

namespace dsinfer::loadgen {

std::vector<std::string> SseReader::feed(std::string_view bytes) {
  std::vector<std::string> events;
  for (char byte : bytes) {
    const bool continues_crlf = after_carriage_return_ && byte == '\n';
    after_carriage_return_ = byte == '\r';
    if (continues_crlf) continue;
    if (byte == '\n' || byte == '\r') {
      end_line(events);
    } else {
      line_ += byte;
    }
  }
  return events;
}

std::vector<std::string> SseReader::finish() {
  std::vector<std::string> events;
  if (!line_.empty()) end_line(events);
  dispatch(events);
  return events;
}

void SseReader::end_line(std::vector<std::string>& events) {
  const std::string_view line = line_;
  if (line.empty()) {
    dispatch(events);
  } else if (line.starts_with("data")) {
    const size_t colon = line.find(':');
    const std::string_view name = line.substr(0, colon);
    if (name == "data") {
      std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
      if (value.starts_with(' ')) value.remove_prefix(1);
      if (has_data_) data_ += '\n';
      data_ += value;
      has_data_ = true;
    }
  }
  line_.clear();
}

void SseReader::dispatch(std::vector<std::string>& events) {
  if (has_data_) events.push_back(std::move(data_));
  data_.clear();
  has_data_ = false;
}

}  // namespace dsinfer::loadgen
