// Request-head checks of RFC 9112 sections 3.2 (Host) and 6.1 to 6.3 (Transfer-Encoding and the
// message body length). See http_framing.h.
#include "http/http_framing.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace dsinfer::server {
namespace {

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return std::ranges::equal(
      a, b, [](unsigned char x, unsigned char y) { return std::tolower(x) == std::tolower(y); });
}

std::string_view trim(std::string_view text) {
  const auto space = [](char c) { return c == ' ' || c == '\t'; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return text;
}

// The coding names of every Transfer-Encoding line, in order ("gzip;q=1, chunked" -> gzip, chunked).
// Empty list elements are allowed by the list syntax and skipped.
std::vector<std::string_view> transfer_codings(const HttpRequest& head) {
  std::vector<std::string_view> codings;
  for (const auto& [name, value] : head.headers) {
    if (!equals_ignoring_case(name, "transfer-encoding")) continue;
    std::string_view rest = value;
    for (;;) {
      const size_t comma = rest.find(',');
      std::string_view element = trim(rest.substr(0, comma));
      element = trim(element.substr(0, element.find(';')));  // a coding's parameters
      if (!element.empty()) codings.push_back(element);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return codings;
}

size_t count_headers(const HttpRequest& head, std::string_view wanted) {
  return static_cast<size_t>(std::ranges::count_if(
      head.headers, [&](const auto& field) { return equals_ignoring_case(field.first, wanted); }));
}

}  // namespace

std::optional<HeadProblem> check_request_head(const HttpRequest& head) {
  const size_t hosts = count_headers(head, "host");
  if (head.version >= 11 && hosts == 0) return HeadProblem{400, "HTTP/1.1 requests must carry a Host header"};
  if (hosts > 1) return HeadProblem{400, "the request has more than one Host header"};

  if (count_headers(head, "transfer-encoding") == 0) return std::nullopt;
  if (head.version < 11) {
    return HeadProblem{400, "Transfer-Encoding is not allowed on HTTP/1.0 requests: send Content-Length"};
  }
  if (count_headers(head, "content-length") > 0) {
    return HeadProblem{400, "the request has both Transfer-Encoding and Content-Length: send one"};
  }
  const std::vector<std::string_view> codings = transfer_codings(head);
  if (codings.empty() || !equals_ignoring_case(codings.back(), "chunked")) {
    return HeadProblem{400, str_cat("the request body's length is unknown: Transfer-Encoding must end with "
                                    "chunked (got '", codings.empty() ? "" : codings.back(), "')")};
  }
  for (size_t i = 0; i + 1 < codings.size(); ++i) {
    if (equals_ignoring_case(codings[i], "chunked")) {
      return HeadProblem{400, "Transfer-Encoding names chunked more than once"};
    }
    return HeadProblem{501, str_cat("transfer coding '", codings[i], "' is not supported: send the body "
                                    "chunked or with Content-Length")};
  }
  return std::nullopt;
}

}  // namespace dsinfer::server
