// One client connection of the HTTP server, and the responder a handler answers through.
//
// Private to the server: only http_server.cc and http_connection.cc include this header, because it
// brings in Asio and Beast, which the rest of dsinfer never sees.
//
// A connection cycles through the phases of an exchange: read a request with Beast's parser, hand
// it to the handler, write what the responder queues, then read the next request (keep-alive) or
// close. While the handler works and the response streams, a read stays pending on the socket, so a
// client that leaves is noticed at once (EOF or reset) and the responder's on_disconnect runs.
// Everything here runs on the event loop thread except the Responder's public methods, which post.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/http.h"

namespace dsinfer::server::detail {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

// Hands work to the event loop from any thread. Once the server has stopped, work is dropped, so a
// responder that outlives the server is harmless.
class LoopHandle {
 public:
  explicit LoopHandle(net::io_context& loop) : loop_(&loop) {}

  template <typename Work>
  void post(Work&& work) {
    std::lock_guard lock(mutex_);
    if (loop_ != nullptr) net::post(*loop_, std::forward<Work>(work));
  }
  void detach() {
    std::lock_guard lock(mutex_);
    loop_ = nullptr;
  }

 private:
  std::mutex mutex_;
  net::io_context* loop_;
};

class Connection;

// What the connections share with their server. Loop thread only, except open_connections, which
// metrics read from anywhere.
struct ServerState {
  HttpServerOptions options;
  HttpHandler handler;
  std::shared_ptr<LoopHandle> loop;
  std::unordered_set<Connection*> connections;  // every open one, so that stop() can close them
  std::atomic<size_t> open_connections{0};
};

// One request's exchange, seen from the handler. The connection holds it weakly: when the handler
// lets go without answering, the destructor tells the connection, which answers 500.
class Responder final : public HttpResponder, public std::enable_shared_from_this<Responder> {
 public:
  Responder(std::weak_ptr<Connection> connection, std::shared_ptr<LoopHandle> loop)
      : connection_(std::move(connection)), loop_(std::move(loop)) {}
  ~Responder() override;

  void respond(int status, std::string content_type, std::string body, Headers headers) override;
  void start_stream(int status, std::string content_type, Headers headers) override;
  void send_chunk(std::string data) override;
  void finish_stream() override;
  void on_disconnect(std::function<void()> callback) override;

  // Loop only: the client is gone. Runs the callback unless the response was already complete.
  void connection_lost();

 private:
  enum class State { kOpen, kComplete, kLost };

  // Runs write(connection) on the loop while the exchange is open; write returns whether the
  // connection accepted the call, and `completes` says whether an accepted call ends the response.
  template <typename Write>
  void on_loop(bool completes, Write write);

  std::weak_ptr<Connection> connection_;
  std::shared_ptr<LoopHandle> loop_;
  State state_ = State::kOpen;           // loop only
  std::function<void()> on_disconnect_;  // loop only
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, ServerState& server);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void serve();  // reads requests until the client leaves, the idle timeout passes or close()
  void refuse(int status, const std::string& message);  // answers an error at once, then closes
  void close();  // at once; a response still in progress counts as a disconnect

  // From the Responder, on the loop. Each returns false when the call does not fit the phase of the
  // exchange (a second respond(), a chunk before start_stream(), ...), which is then ignored.
  bool respond(int status, const std::string& content_type, std::string body, const Headers& headers);
  bool start_stream(int status, const std::string& content_type, const Headers& headers);
  bool send_chunk(const std::string& data);
  bool finish_stream();
  void abandon();  // the handler dropped its responder without completing the response

 private:
  // In time order within one exchange.
  enum class Phase { kReadingRequest, kAwaitingResponse, kStreaming, kSendingLast, kClosing };

  void read_request();
  void on_header(boost::beast::error_code ec);
  void on_request(boost::beast::error_code ec);
  void on_read_error(boost::beast::error_code ec);
  void dispatch(const HttpRequest& request, const std::shared_ptr<Responder>& responder);
  void read_ahead();
  void on_read_ahead(boost::beast::error_code ec, size_t bytes);
  void send_error(int status, const std::string& message);
  void queue_write(std::string bytes);
  void write_pending();
  void on_written(boost::beast::error_code ec);
  void on_response_sent();
  void close_gracefully();
  void arm_timer(std::chrono::steady_clock::duration after);
  void disarm_timer();
  void on_timer();

  tcp::socket socket_;
  net::steady_timer timer_;  // idle timeout while reading a request; linger time while closing
  ServerState& server_;
  std::string remote_;

  Phase phase_ = Phase::kReadingRequest;
  bool keep_alive_ = true;  // of the current exchange
  bool closed_ = false;
  bool reading_ahead_ = false;
  boost::beast::flat_buffer buffer_;  // bytes read but not yet parsed
  std::optional<http::request_parser<http::string_body>> parser_;
  std::weak_ptr<Responder> responder_;

  std::deque<std::string> pending_;  // queued while a write is in flight
  std::deque<std::string> writing_;  // what the write in flight sends
  std::vector<net::const_buffer> write_buffers_;
};

}  // namespace dsinfer::server::detail
