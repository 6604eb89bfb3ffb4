// parse_url: "http://host[:port][/path]" into its parts, for --base-url.
#include <cstdint>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/strings.h"
#include "http/http.h"

namespace dsinfer::server {
namespace {

constexpr std::string_view kScheme = "http://";

// "host", "host:port", "[v6 address]" or "[v6 address]:port" into host and port text.
std::pair<std::string_view, std::string_view> split_authority(std::string_view authority,
                                                              std::string_view url) {
  if (authority.starts_with('[')) {
    const size_t end = authority.find(']');
    DSINFER_CHECK(end != std::string_view::npos, "URL ", url, ": unclosed '[' in the host");
    std::string_view after = authority.substr(end + 1);
    DSINFER_CHECK(after.empty() || after.starts_with(':'), "URL ", url, ": unexpected text after ']'");
    return {authority.substr(1, end - 1), after.empty() ? after : after.substr(1)};
  }
  const size_t colon = authority.find(':');
  if (colon == std::string_view::npos) return {authority, {}};
  return {authority.substr(0, colon), authority.substr(colon + 1)};
}

}  // namespace

Url parse_url(std::string_view url) {
  DSINFER_CHECK(!url.starts_with("https://"), "URL ", url, ": https is not supported (use http://)");
  DSINFER_CHECK(url.starts_with(kScheme), "URL ", url, ": expected http://host[:port][/path]");
  const std::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  const auto [host, port_text] = split_authority(rest.substr(0, slash), url);
  DSINFER_CHECK(!host.empty(), "URL ", url, ": the host is missing");

  Url parsed;
  parsed.host = std::string(host);
  if (!port_text.empty()) {
    int64_t port = 0;
    DSINFER_CHECK(parse_int64(port_text, &port) && port > 0 && port <= UINT16_MAX, "URL ", url,
                  ": the port must be a number from 1 to 65535");
    parsed.port = static_cast<uint16_t>(port);
  }
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  while (path.ends_with('/')) path.remove_suffix(1);
  parsed.path = std::string(path);
  return parsed;
}

}  // namespace dsinfer::server
