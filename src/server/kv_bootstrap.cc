#include "server/kv_bootstrap.h"

#include <utility>

#include "core/error.h"
#include "core/json.h"
#include "core/strings.h"
#include "openai/openai_errors.h"

namespace dsinfer::server {
namespace {

constexpr std::string_view kDestinationPath = "/kv_destination";
constexpr const char* kJson = "application/json";

void answer_error(HttpResponder& responder, int status, const std::string& message) {
  responder.respond(status, kJson, error_body(status, message));
}

// The message of an error body ({"error": {"message": ...}}), else the body itself.
std::string error_message(const std::string& body) {
  try {
    const Json parsed = Json::parse(body);
    if (const Json* error = parsed.find("error"); error != nullptr && error->is_object())
      if (const Json* message = error->find("message"); message != nullptr && message->is_string())
        return message->as_string();
  } catch (const Error&) {
  }
  return body;
}

}  // namespace

KvBootstrapServer::KvBootstrapServer(std::string host, uint16_t port, Accept accept) : accept_(std::move(accept)) {
  HttpServerOptions options;
  options.host = std::move(host);
  options.port = port;
  options.max_body_bytes = 16 << 20;  // a destination lists page ids: a 1M-token prompt is ~16K pages
  options.error_body = [](int status, const std::string& message) { return error_body(status, message); };
  http_ = std::make_unique<HttpServer>(options, [this](const HttpRequest& request,
                                                       std::shared_ptr<HttpResponder> responder) {
    const std::string_view path = request.path();
    if (path == "/health") {
      if (request.method != "GET") return answer_error(*responder, 405, str_cat(request.method, " ", path, " is not allowed"));
      return responder->respond(200, kJson, "{}");
    }
    if (path != kDestinationPath) return answer_error(*responder, 404, str_cat("no route ", request.method, " ", path));
    if (request.method != "POST") return answer_error(*responder, 405, str_cat(request.method, " ", path, " is not allowed"));
    try {
      accept_(request.body);
    } catch (const Error& error) {
      return answer_error(*responder, 400, error.what());
    }
    responder->respond(200, kJson, "{}");
  });
}

KvBootstrapServer::~KvBootstrapServer() = default;

void KvBootstrapServer::start() { http_->start(); }

uint16_t KvBootstrapServer::port() const { return http_->port(); }

KvBootstrapClient::KvBootstrapClient(double timeout_seconds)
    : timeout_seconds_(timeout_seconds), http_(std::make_unique<HttpClient>()) {}

KvBootstrapClient::~KvBootstrapClient() = default;

void KvBootstrapClient::post_destination(const std::string& host, uint16_t port, std::string body, Done done) {
  HttpCall call;
  call.method = "POST";
  call.host = host;
  call.port = port;
  call.target = std::string(kDestinationPath);
  call.headers = {{"Content-Type", kJson}};
  call.body = std::move(body);
  call.timeout_seconds = timeout_seconds_;
  const std::string where = str_cat(host, ":", port);
  call.on_done = [done = std::move(done), where](const HttpClientResponse& response) {
    if (!response.error.empty()) return done(str_cat("the prefill instance's bootstrap at ", where, ": ", response.error));
    if (response.status != 200)
      return done(str_cat("the prefill instance's bootstrap at ", where, " answered ", response.status, ": ",
                          error_message(response.body)));
    done("");
  };
  http_->start(std::move(call));
}

}  // namespace dsinfer::server
