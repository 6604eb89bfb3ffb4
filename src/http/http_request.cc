// HttpRequest's accessors: the path without its query, and case-insensitive header lookup.
#include <algorithm>
#include <cctype>

#include "http/http.h"

namespace dsinfer::server {
namespace {

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return std::ranges::equal(
      a, b, [](unsigned char x, unsigned char y) { return std::tolower(x) == std::tolower(y); });
}

}  // namespace

std::string_view HttpRequest::path() const {
  std::string_view whole = target;
  return whole.substr(0, whole.find('?'));
}

std::optional<std::string_view> HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (equals_ignoring_case(key, name)) return value;
  }
  return std::nullopt;
}

}  // namespace dsinfer::server
