// HttpServer: binds, accepts, enforces the connection limit and runs the event loop thread. The
// connections themselves live in http_connection.cc and http_connection_write.cc.
//
// Threading: one thread runs the loop. Handlers and on_disconnect callbacks run on it, so they must
// not block (hand the work to the engine and answer later through the responder, from any thread).
#include <optional>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "http/http_connection.h"

namespace dsinfer::server {

using detail::tcp;
namespace net = detail::net;
using boost::beast::error_code;

namespace {

// Used when the options leave error_body unset: {"error": {"message": ..., "code": status}}.
std::string default_error_body(int status, const std::string& message) {
  Json error = Json::object();
  error["error"]["message"] = message;
  error["error"]["code"] = status;
  return error.dump();
}

}  // namespace

struct HttpServer::Impl {
  detail::ServerState state;  // outlives the loop, whose pending handlers own the connections
  net::io_context loop{1};
  tcp::acceptor acceptor{loop};
  net::steady_timer accept_retry{loop};
  std::thread thread;
  uint16_t port = 0;

  void listen();
  void accept();
  void on_accept(error_code ec, tcp::socket socket);
  void make_room();
  void shut_down();
};

void HttpServer::Impl::listen() {
  const HttpServerOptions& options = state.options;
  const auto check = [&](const error_code& ec) {
    DSINFER_CHECK(!ec, "cannot listen on ", options.host, ":", options.port, ": ", ec.message());
  };
  error_code ec;
  tcp::resolver resolver(loop);
  const auto endpoints = resolver.resolve(options.host, std::to_string(options.port),
                                          tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  check(ec);
  const tcp::endpoint endpoint = *endpoints.begin();
  acceptor.open(endpoint.protocol(), ec);
  check(ec);
  acceptor.set_option(net::socket_base::reuse_address(true), ec);  // restart over TIME_WAIT sockets
  acceptor.bind(endpoint, ec);
  check(ec);
  acceptor.listen(net::socket_base::max_listen_connections, ec);  // bursts of thousands of clients
  check(ec);
  port = acceptor.local_endpoint().port();
}

void HttpServer::Impl::accept() {
  acceptor.async_accept([this](error_code ec, tcp::socket socket) { on_accept(ec, std::move(socket)); });
}

void HttpServer::Impl::on_accept(error_code ec, tcp::socket socket) {
  if (!acceptor.is_open()) return;  // stopping
  if (ec) {
    // Usually out of file descriptors: wait for some to close instead of spinning on the error.
    log_warning("http: accept failed: ", ec.message());
    accept_retry.expires_after(std::chrono::milliseconds(100));
    accept_retry.async_wait([this](error_code wait_ec) {
      if (!wait_ec) accept();
    });
    return;
  }
  if (state.connections.size() >= state.options.max_connections) make_room();
  const bool full = state.connections.size() >= state.options.max_connections;
  detail::Connection& connection = detail::Connection::open(std::move(socket), state);
  if (full) {
    connection.refuse(
        503, str_cat("the server is at its limit of ", state.options.max_connections, " open connections"));
  } else {
    connection.serve();
  }
  accept();
}

// At the connection limit, a new client takes the slot of one that is closing anyway (its last
// answer sent), else of the one that has gone longest without progress while not yet having sent a
// whole request: a slow or stalled head or body, or an idle keep-alive. Requests being answered are
// never closed for this. This is what keeps connections that trickle bytes from locking everyone
// else out (issue 13: 128 of them at one byte a second held all of --max-connections 100).
void HttpServer::Impl::make_room() {
  detail::Connection* victim = nullptr;
  std::optional<detail::Clock::time_point> oldest;
  for (const auto& [connection, owner] : state.connections) {
    if (connection->draining()) {
      victim = connection;
      break;
    }
    const auto since = connection->waiting_for_request_since();
    if (since && (!oldest || *since < *oldest)) {
      oldest = since;
      victim = connection;
    }
  }
  if (victim == nullptr) return;
  log_debug("http: at the limit of ", state.options.max_connections,
            " connections; closing one that has not sent its request");
  victim->close();
}

void HttpServer::Impl::shut_down() {
  error_code ec;
  acceptor.close(ec);
  accept_retry.cancel();
  // close() removes the connection from the table, so walk a copy.
  std::vector<std::shared_ptr<detail::Connection>> open;
  for (const auto& [connection, owner] : state.connections) open.push_back(owner);
  for (const auto& connection : open) connection->close();
  // The cancelled operations complete before this, releasing the connections; work that handler
  // threads post from now on is dropped with the loop.
  net::post(loop, [this] { loop.stop(); });
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler) : impl_(std::make_unique<Impl>()) {
  if (!options.error_body) options.error_body = default_error_body;
  impl_->state.options = std::move(options);
  impl_->state.handler = std::move(handler);
  impl_->state.loop = std::make_shared<detail::LoopHandle>(impl_->loop);
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  DSINFER_CHECK(!impl_->thread.joinable() && !impl_->loop.stopped(), "HttpServer::start: already started");
  impl_->listen();
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] { impl->loop.run(); });
  log_info("http: listening on ", impl_->state.options.host, ":", impl_->port);
}

void HttpServer::stop() {
  if (!impl_->thread.joinable()) return;
  net::post(impl_->loop, [impl = impl_.get()] { impl->shut_down(); });
  impl_->thread.join();
  impl_->state.loop->detach();
}

uint16_t HttpServer::port() const { return impl_->port; }

size_t HttpServer::open_connections() const { return impl_->state.open_connections.load(); }

}  // namespace dsinfer::server
