// OpenAI-style errors: the exception the protocol layer throws for a request it refuses, and the
// body every error answer carries, {"error": {"message", "type", "param", "code"}}, shaped as
// api.openai.com sends it so that client libraries raise their usual exceptions.
//
// OpenAI's shapes, mirrored here: 4xx answers have type "invalid_request_error" (401 included: a
// bad key is code "invalid_api_key"; an unknown model is 404 with code "model_not_found"), 5xx
// answers "server_error"; param and code are null unless a field or a machine-readable reason
// applies.
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace dsinfer::server {

class ProtocolError : public Error {
 public:
  // An empty type is derived from the status (see the file comment); empty param or code: null.
  ProtocolError(int status, const std::string& message, std::string param = "", std::string code = "",
                std::string type = "");

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string param_;
  std::string code_;
  std::string type_;
};

// The JSON text of an error answer. Also serves the HTTP transport's own errors (413, 503, ...),
// which only know a status and a message.
std::string error_body(int status, std::string message, std::string type = "", std::string param = "",
                       std::string code = "");
std::string error_body(const ProtocolError& error);

// The refusals every endpoint shares.
ProtocolError invalid_request(const std::string& message, std::string param = "");   // 400
ProtocolError model_not_found(std::string_view model);                                 // 404
ProtocolError missing_api_key();                                                       // 401
ProtocolError invalid_api_key();                                                       // 401
ProtocolError route_not_found(std::string_view method, std::string_view path);         // 404
ProtocolError method_not_allowed(std::string_view method, std::string_view path);      // 405
ProtocolError server_not_ready();                                                      // 503
ProtocolError internal_error(std::string_view what);                                   // 500

}  // namespace dsinfer::server
