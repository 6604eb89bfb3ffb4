// CORS for the OpenAI server (--allowed-origins, vLLM's default "*"): the headers an answer carries,
// a responder that adds them to everything the handler sends (streams included), and the answer to
// a browser's preflight.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "http/http.h"

namespace dsinfer::server {

// "*" allows any page and is the same for every request; a list allows the pages it names, so the
// answer varies with the request's Origin (and says so to caches). Empty: CORS is off (no headers).
Headers cors_headers(const std::vector<std::string>& allowed_origins, const HttpRequest& request);

// Adds `cors` to whatever `inner` is asked to send.
class CorsResponder final : public HttpResponder {
 public:
  CorsResponder(std::shared_ptr<HttpResponder> inner, Headers cors)
      : inner_(std::move(inner)), cors_(std::move(cors)) {}
  void respond(int status, std::string content_type, std::string body, Headers headers) override;
  void start_stream(int status, std::string content_type, Headers headers) override;
  void send_chunk(std::string data) override { inner_->send_chunk(std::move(data)); }
  void finish_stream() override { inner_->finish_stream(); }
  void on_disconnect(std::function<void()> callback) override { inner_->on_disconnect(std::move(callback)); }

 private:
  Headers with_cors(Headers headers) const;
  std::shared_ptr<HttpResponder> inner_;
  Headers cors_;
};

// A browser asks before a cross-origin POST with JSON or an Authorization header: 204 with the
// methods and headers allowed, or a ProtocolError (400) for an origin that is not allowed.
void answer_preflight(const std::vector<std::string>& allowed_origins, const HttpRequest& request,
                      HttpResponder& responder);

}  // namespace dsinfer::server
