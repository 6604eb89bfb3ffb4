#include "server/cors.h"

#include <algorithm>

#include "core/strings.h"
#include "openai/openai_errors.h"

namespace dsinfer::server {

Headers cors_headers(const std::vector<std::string>& allowed, const HttpRequest& request) {
  if (allowed.empty()) return {};
  if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) return {{"Access-Control-Allow-Origin", "*"}};
  Headers headers = {{"Vary", "Origin"}};
  std::optional<std::string_view> origin = request.header("origin");
  if (origin && std::find(allowed.begin(), allowed.end(), *origin) != allowed.end())
    headers.emplace_back("Access-Control-Allow-Origin", std::string(*origin));
  return headers;
}

void CorsResponder::respond(int status, std::string content_type, std::string body, Headers headers) {
  inner_->respond(status, std::move(content_type), std::move(body), with_cors(std::move(headers)));
}

void CorsResponder::start_stream(int status, std::string content_type, Headers headers) {
  inner_->start_stream(status, std::move(content_type), with_cors(std::move(headers)));
}

Headers CorsResponder::with_cors(Headers headers) const {
  headers.insert(headers.end(), cors_.begin(), cors_.end());
  return headers;
}

void answer_preflight(const std::vector<std::string>& allowed_origins, const HttpRequest& request,
                      HttpResponder& responder) {
  std::optional<std::string_view> origin = request.header("origin");
  Headers cors = cors_headers(allowed_origins, request);
  const bool allowed = std::any_of(cors.begin(), cors.end(),
                                   [](const auto& header) { return header.first == "Access-Control-Allow-Origin"; });
  if (!allowed)
    throw ProtocolError(400, str_cat("The origin '", origin.value_or(""), "' is not allowed (--allowed-origins)."));
  std::string requested_headers(
      request.header("access-control-request-headers").value_or("Authorization, Content-Type"));
  responder.respond(204, "", "",
                    {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                     {"Access-Control-Allow-Headers", requested_headers},
                     {"Access-Control-Max-Age", "600"}});
}

}  // namespace dsinfer::server
