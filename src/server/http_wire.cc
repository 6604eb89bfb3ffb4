// Formats response heads and chunks (see http_wire.h).
#include "server/http_wire.h"

#include <charconv>
#include <iterator>

#include <boost/beast/http/status.hpp>

#include "core/error.h"

namespace dsinfer::server {

std::string format_response_head(int status, std::string_view content_type, const Headers& headers,
                                 std::optional<size_t> content_length, bool keep_alive) {
  namespace http = boost::beast::http;
  std::string head =
      str_cat("HTTP/1.1 ", status, " ",
              http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status))), "\r\n");
  if (!content_type.empty()) head += str_cat("Content-Type: ", content_type, "\r\n");
  for (const auto& [name, value] : headers) head += str_cat(name, ": ", value, "\r\n");
  head += content_length ? str_cat("Content-Length: ", *content_length, "\r\n")
                         : std::string("Transfer-Encoding: chunked\r\n");
  if (!keep_alive) head += "Connection: close\r\n";
  head += "\r\n";
  return head;
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
