// The bytes of outgoing HTTP/1.1 responses: the status line with headers, and chunk framing.
//
// Beast parses what comes in (the part that must withstand hostile input). What goes out is simple
// enough to write directly, and as plain strings it can be queued per connection and sent in one
// gathered write however many SSE chunks piled up meanwhile.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "http/http.h"

namespace dsinfer::server {

// How the client finds the end of the body.
enum class BodyFraming {
  kContentLength,  // a whole response
  kChunked,        // a stream to an HTTP/1.1 client
  kUntilClose,     // a stream to an HTTP/1.0 client, which knows no chunks: the close ends it
};

struct ResponseHead {
  int status = 200;
  std::string_view content_type;  // no Content-Type header when empty
  const Headers* headers = nullptr;
  BodyFraming framing = BodyFraming::kContentLength;
  size_t content_length = 0;  // with kContentLength
  bool keep_alive = true;     // false: "Connection: close"
  // "Connection: keep-alive", which an HTTP/1.0 client needs to see to keep the connection.
  bool announce_keep_alive = false;
};

// Status line, Content-Type, the handler's headers, the framing header, the Connection header and
// the blank line.
std::string format_response_head(const ResponseHead& head);

// One chunk of a chunked body: "<size in hex>\r\n<data>\r\n". data must not be empty (an empty
// chunk ends the body).
std::string format_chunk(std::string_view data);

inline constexpr std::string_view kLastChunk = "0\r\n\r\n";
inline constexpr std::string_view kContinueResponse = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace dsinfer::server
