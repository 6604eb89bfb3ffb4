// HTTP/1.1 behind a small interface of ours (the implementation, http_server.cc and the http_*.cc
// beside it, uses Boost.Beast; nothing else includes Beast). One event loop serves every
// connection, so thousands of concurrent streaming clients need no thousands of threads; the
// connection limit is explicit.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
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
  int version = 11;    // 11 for HTTP/1.1, 10 for HTTP/1.0

  std::string_view path() const;                               // target without the query
  std::optional<std::string_view> header(std::string_view name) const;  // case-insensitive
};

// The handle a handler answers through. Every method may be called from any thread (the call is
// handed to the event loop, where calls run in the order they were made) and at any later time;
// calls after the client went away are ignored.
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;
  // A complete response with Content-Length.
  virtual void respond(int status, std::string content_type, std::string body, Headers headers = {}) = 0;
  // A streamed response: start, any number of chunks, finish. Chunked on HTTP/1.1; to an HTTP/1.0
  // client the body runs until the connection closes.
  virtual void start_stream(int status, std::string content_type, Headers headers = {}) = 0;
  virtual void send_chunk(std::string data) = 0;
  virtual void finish_stream() = 0;
  // Called once, on the event loop, if the client disconnects before the response is complete
  // (including while the handler is still working), or is dropped for reading too slowly. Set it
  // before starting a long response. A client that only half-closes (shuts down its sending side
  // and waits) is not gone and gets its answer; see Connection::probe_after_end_of_stream.
  virtual void on_disconnect(std::function<void()> callback) = 0;
};

// Called on the event loop thread, once per request: it must not block (hand the work on and answer
// later through the responder, from any thread). A handler that throws, or drops the responder
// before answering, gets a 500 sent for it; one dropped mid-stream closes the connection.
using HttpHandler = std::function<void(const HttpRequest&, std::shared_ptr<HttpResponder>)>;

// An answer the transport sends by itself, without the handler.
struct HttpAnswer {
  int status = 200;
  std::string content_type;
  std::string body;
  Headers headers;
};

// Runs on the event loop once a request's head has arrived, before any of its body is read
// (head.body is empty): an answer goes out at once and the connection closes after it, so a body
// that would be refused anyway (no API key) is never received. nullopt lets the request go on to
// the handler. Must not block; one that throws gets a 500.
using HttpHeadCheck = std::function<std::optional<HttpAnswer>(const HttpRequest& head)>;

// The limits a client meets. Each timeout counts idle time (since the last byte that moved), not
// the total, so a large body on a slow link is fine; 0 turns a timeout off. The defaults are far
// from what a working client needs.
struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;                    // 0: pick a free port (see HttpServer::port)
  size_t max_body_bytes = 32u << 20;       // larger bodies get 413 without reaching the handler
  // Open connections at most. When a new one arrives at the limit, the connection that has gone
  // longest without progress while not yet having sent a whole request (a slow head or body, an
  // idle keep-alive) is closed to make room; only when every connection is being answered does the
  // new one get 503. So clients that trickle bytes cannot lock others out.
  size_t max_connections = 8192;
  std::chrono::milliseconds idle_timeout{300'000};  // keep-alive: waiting for the next request (closed silently)
  std::chrono::milliseconds header_timeout{60'000};  // between bytes of a request head (408 and close)
  std::chrono::milliseconds body_timeout{60'000};    // between bytes of a request body (408 and close)
  // A response that makes no progress this long (the client reads nothing) drops the client; a
  // request still running is aborted through on_disconnect.
  std::chrono::milliseconds send_timeout{60'000};
  // Response bytes queued but not yet taken by the client. A stream that has more than this unsent
  // when its next chunk comes drops the client (and aborts its request), as a slow reader would
  // otherwise hold an ever-growing queue. A whole response is queued regardless (its memory exists
  // already); the send timeout bounds how long it is held.
  size_t max_queued_bytes = 16u << 20;
  HttpHeadCheck check_head;  // unset: every request goes to the handler
  // Body of the errors the transport answers itself (400, 408, 413, 431, 501, 503), so the
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

// A client for tests, the load generator and the router: many concurrent requests, streamed or
// not, on one event loop thread. Callbacks run on that thread.
struct HttpClientResponse {
  int status = 0;
  Headers headers;
  std::string body;   // whole body when not streamed (callbacks below receive it in pieces otherwise)
  std::string error;  // transport error ("connection refused", "timeout"), empty on success
};

// Ends a call from any thread: its connection closes at once, so the server sees its client leave
// (a worker aborts the request), and on_done runs with the error "cancelled", unless the call had
// finished already. Give each call its own (HttpCall::cancel); cancelling before the call has
// started ends it as soon as it does. Safe to call at any time, also after the client is gone.
class HttpCancel {
 public:
  void cancel();
  bool cancelled() const;

  // The client's side: `hook` ends the call; it runs under this object's lock (so it must only
  // post onto the client's loop), at once when cancel() came first. disarm() drops it when the call
  // has finished, so that a late cancel() touches nothing.
  void arm(std::function<void()> hook);
  void disarm();

 private:
  mutable std::mutex mutex_;
  bool cancelled_ = false;
  std::function<void()> hook_;
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
  // The status and headers, once the response head has arrived and before any of the body (a
  // proxy answers its own client from them). Not called when no head arrived.
  std::function<void(const HttpClientResponse&)> on_head;
  std::function<void(const HttpClientResponse&)> on_done;  // status/headers/error (and body)
  std::shared_ptr<HttpCancel> cancel;  // unset: the call cannot be cancelled
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
