// The control plane of prefill/decode disaggregation between dsinfer instances: plain HTTP, which
// carries only small descriptions (addresses, cache layouts, page ids); the pages themselves move
// through the KV transport (transfer/).
//
// A prefill instance listens on its bootstrap port (SGLang's --disaggregation-bootstrap-port, which
// routers pass to decode instances as a request's bootstrap_port):
//
//   POST /kv_destination   a decode instance's destination for one request's pages (its agent's
//                          address, its cache's layout, the page ids it allocated, the room that
//                          names the request): 200, or 400 with an OpenAI-style body
//   GET  /health           200 while the instance listens
//
// A decode instance posts its destinations there through a KvBootstrapClient, which never blocks
// the caller (the engine thread): the answer comes back through a callback.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "http/http.h"

namespace dsinfer::server {

class KvBootstrapServer {
 public:
  // `accept` takes a destination's body; it must not block, and throws dsinfer::Error (a 400 with
  // its message) for a body it cannot take.
  using Accept = std::function<void(std::string_view body)>;
  KvBootstrapServer(std::string host, uint16_t port, Accept accept);
  ~KvBootstrapServer();
  KvBootstrapServer(const KvBootstrapServer&) = delete;
  KvBootstrapServer& operator=(const KvBootstrapServer&) = delete;

  // Binds and listens. Throws dsinfer::Error naming host:port.
  void start();
  uint16_t port() const;

 private:
  Accept accept_;
  std::unique_ptr<HttpServer> http_;
};

class KvBootstrapClient {
 public:
  // `done` gets "" once the prefill instance has taken the destination, else why it did not (its
  // 4xx message, or the transport's error: refused, timed out). Called on the client's own thread.
  using Done = std::function<void(std::string error)>;
  explicit KvBootstrapClient(double timeout_seconds = 10);
  ~KvBootstrapClient();  // cancels what is in flight ("done" gets the cancellation) and joins
  KvBootstrapClient(const KvBootstrapClient&) = delete;
  KvBootstrapClient& operator=(const KvBootstrapClient&) = delete;

  // Posts `body` to http://host:port/kv_destination; returns at once. Thread-safe.
  void post_destination(const std::string& host, uint16_t port, std::string body, Done done);

 private:
  double timeout_seconds_;
  std::unique_ptr<HttpClient> http_;
};

}  // namespace dsinfer::server
