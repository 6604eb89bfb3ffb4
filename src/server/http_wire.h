// The bytes of outgoing HTTP/1.1 responses: the status line with headers, and chunk framing.
//
// Beast parses what comes in (the part that must withstand hostile input). What goes out is simple
// enough to write directly, and as plain strings it can be queued per connection and sent in one
// gathered write however many SSE chunks piled up meanwhile.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "server/http.h"

namespace dsinfer::server {

// Status line, Content-Type (when not empty), the handler's headers, the framing header
// (Content-Length, or Transfer-Encoding: chunked when content_length is empty), "Connection: close"
// when the connection ends after this response, and the blank line.
std::string format_response_head(int status, std::string_view content_type, const Headers& headers,
                                 std::optional<size_t> content_length, bool keep_alive);

// One chunk of a chunked body: "<size in hex>\r\n<data>\r\n". data must not be empty (an empty
// chunk ends the body).
std::string format_chunk(std::string_view data);

inline constexpr std::string_view kLastChunk = "0\r\n\r\n";
inline constexpr std::string_view kContinueResponse = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace dsinfer::server
