// HTTP/1.1 behind a small interface of ours (the implementation, http_server.cc and the http_*.cc
// beside it, uses Boost.Beast; nothing else includes Beast). One event loop serves every
// connection, so thousands of concurrent streaming clients need no thousands of threads; the
// connection limit is explicit.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dsinfer::server {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query: "/v1/models?x=1"
  Headers headers;
  std::string body;
  std::string remote;  // peer address, for logs

  std::string_view path() const;                               // target without the query
  std::optional<std::string_view> header(std::string_view name) const;  // case-insensitive
};

// The handle a handler answers through. Every method may be called from any thread (the call is
// handed to the event loop) and at any later time; calls after the client went away are ignored.
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;
  // A complete response with Content-Length.
  virtual void respond(int status, std::string content_type, std::string body, Headers headers = {}) = 0;
  // A streamed response (Transfer-Encoding: chunked): start, any number of chunks, finish.
  virtual void start_stream(int status, std::string content_type, Headers headers = {}) = 0;
  virtual void send_chunk(std::string data) = 0;
  virtual void finish_stream() = 0;
  // Called once, on the event loop, if the client disconnects before the response is complete
  // (including while the handler is still working). Set it before starting a long response.
  virtual void on_disconnect(std::function<void()> callback) = 0;
};

// Called on the event loop thread, once per request: it must not block (hand the work on and answer
// later through the responder, from any thread). A handler that throws, or drops the responder
// before answering, gets a 500 sent for it; one dropped mid-stream closes the connection.
using HttpHandler = std::function<void(const HttpRequest&, std::shared_ptr<HttpResponder>)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;                    // 0: pick a free port (see HttpServer::port)
  size_t max_body_bytes = 32u << 20;       // larger bodies get 413 without reaching the handler
  size_t max_connections = 8192;           // further connections are accepted and closed with 503
  int idle_timeout_seconds = 300;          // a connection with no request in flight is closed after this
  // Body of the errors the transport answers itself (413, 503, 400 for unparseable HTTP), so the
  // protocol layer decides their format (OpenAI-style JSON).
  std::function<std::string(int status, const std::string& message)> error_body;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();  // stops and joins
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts the event loop on its own thread. Throws dsinfer::Error naming host:port.
  void start();
  void stop();
  uint16_t port() const;           // the bound port
  size_t open_connections() const;  // for metrics and tests

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A client for tests and the load generator: many concurrent requests, streamed or not, on one
// event loop thread. Callbacks run on that thread.
struct HttpClientResponse {
  int status = 0;
  Headers headers;
  std::string body;   // whole body when not streamed (callbacks below receive it in pieces otherwise)
  std::string error;  // transport error ("connection refused", "timeout"), empty on success
};

struct HttpCall {
  std::string method = "POST";
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string target = "/";
  Headers headers;
  std::string body;
  double timeout_seconds = 600;
  // Streamed delivery: each piece of the body as it arrives (after de-chunking). When unset, the
  // whole body is collected into HttpClientResponse::body.
  std::function<void(std::string_view)> on_data;
  std::function<void(const HttpClientResponse&)> on_done;  // status/headers/error (and body)
};

class HttpClient {
 public:
  HttpClient();   // starts the event loop thread
  ~HttpClient();  // cancels what is in flight and joins
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Starts a call; returns at once. Each call uses its own connection. Thread-safe.
  void start(HttpCall call);
  // Convenience for tests: runs one call and waits for it.
  HttpClientResponse fetch(HttpCall call);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Splits "http://host:port/path" into host, port and path (for --base-url). Throws dsinfer::Error.
struct Url {
  std::string host;
  uint16_t port = 80;
  std::string path;  // without a trailing '/'
};
Url parse_url(std::string_view url);

}  // namespace dsinfer::server
