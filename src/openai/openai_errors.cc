#include "openai/openai_errors.h"

#include <utility>

#include "core/json.h"

namespace dsinfer::server {
namespace {

std::string type_for_status(int status) { return status >= 500 ? "server_error" : "invalid_request_error"; }

Json null_if_empty(std::string text) { return text.empty() ? Json() : Json(std::move(text)); }

}  // namespace

ProtocolError::ProtocolError(int status, const std::string& message, std::string param, std::string code,
                             std::string type)
    : Error(message),
      status_(status),
      param_(std::move(param)),
      code_(std::move(code)),
      type_(type.empty() ? type_for_status(status) : std::move(type)) {}

std::string error_body(int status, std::string message, std::string type, std::string param, std::string code) {
  Json error = Json::object();
  error["message"] = std::move(message);
  error["type"] = type.empty() ? type_for_status(status) : std::move(type);
  error["param"] = null_if_empty(std::move(param));
  error["code"] = null_if_empty(std::move(code));
  Json body = Json::object();
  body["error"] = std::move(error);
  return body.dump();
}

std::string error_body(const ProtocolError& error) {
  return error_body(error.status(), error.what(), error.type(), error.param(), error.code());
}

ProtocolError invalid_request(const std::string& message, std::string param) {
  return ProtocolError(400, message, std::move(param));
}

ProtocolError model_not_found(std::string_view model) {
  return ProtocolError(404, str_cat("The model `", model, "` does not exist."), "", "model_not_found");
}

ProtocolError missing_api_key() {
  return ProtocolError(401,
                       "You didn't provide an API key. You need to provide your API key in an Authorization "
                       "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).");
}

ProtocolError invalid_api_key() {
  // Unlike OpenAI, the message does not echo part of the key back: logs and proxies see it.
  return ProtocolError(401, "Incorrect API key provided.", "", "invalid_api_key");
}

ProtocolError route_not_found(std::string_view method, std::string_view path) {
  return ProtocolError(404, str_cat("Invalid URL (", method, " ", path, ")"));
}

ProtocolError method_not_allowed(std::string_view method, std::string_view path) {
  return ProtocolError(405, str_cat("Invalid method for URL (", method, " ", path, ")"));
}

ProtocolError server_not_ready() {
  return ProtocolError(503, "The server is still loading the model; try again shortly.");
}

ProtocolError internal_error(std::string_view what) {
  return ProtocolError(500, str_cat("The server had an error while processing your request: ", what));
}

}  // namespace dsinfer::server
