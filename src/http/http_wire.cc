// Formats response heads and chunks (see http_wire.h).
#include "http/http_wire.h"

#include <charconv>
#include <iterator>

#include <boost/beast/http/status.hpp>

#include "core/error.h"

namespace dsinfer::server {

std::string format_response_head(const ResponseHead& head) {
  namespace http = boost::beast::http;
  std::string text = str_cat("HTTP/1.1 ", head.status, " ",
                             http::obsolete_reason(http::int_to_status(static_cast<unsigned>(head.status))), "\r\n");
  if (!head.content_type.empty()) text += str_cat("Content-Type: ", head.content_type, "\r\n");
  if (head.headers != nullptr) {
    for (const auto& [name, value] : *head.headers) text += str_cat(name, ": ", value, "\r\n");
  }
  switch (head.framing) {
    case BodyFraming::kContentLength:
      // A 204 (a CORS preflight's answer) has no body and must not announce one (RFC 9110 8.6).
      if (head.status != 204) text += str_cat("Content-Length: ", head.content_length, "\r\n");
      break;
    case BodyFraming::kChunked:
      text += "Transfer-Encoding: chunked\r\n";
      break;
    case BodyFraming::kUntilClose:
      break;
  }
  if (!head.keep_alive) {
    text += "Connection: close\r\n";
  } else if (head.announce_keep_alive) {
    text += "Connection: keep-alive\r\n";
  }
  text += "\r\n";
  return text;
}

std::string format_chunk(std::string_view data) {
  char size_hex[2 * sizeof(size_t)];
  char* size_end = std::to_chars(std::begin(size_hex), std::end(size_hex), data.size(), 16).ptr;
  std::string chunk;
  chunk.reserve(static_cast<size_t>(size_end - size_hex) + data.size() + 4);
  chunk.append(size_hex, size_end).append("\r\n").append(data).append("\r\n");
  return chunk;
}

}  // namespace dsinfer::server
