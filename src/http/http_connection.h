// One client connection of the HTTP server, and the responder a handler answers through.
//
// Private to the server: only the http_*.cc files include this header, because it brings in Asio
// and Beast, which the rest of dsinfer never sees.
//
// A connection cycles through the phases of an exchange: read a request head, check it, read its
// body, hand the request to the handler, write what the responder queues, then read the next
// request (keep-alive) or close. One read loop feeds Beast's parser by hand, so every byte that
// arrives restarts the idle clock of the phase it belongs to; while the handler works and the
// response streams, the loop keeps reading ahead (a client that leaves is noticed at once, one that
// only half-closes is told apart by a probe, and a pipelined request is kept) until
// kMaxReadAheadBytes are buffered, then pauses. The server's connection table owns each
// connection until it is closed, so a paused connection with nothing pending on its socket stays
// alive (issue 13: it used to be destroyed, resetting the stream).
// Each phase has its own idle timeout (see HttpServerOptions), kept by one timer.
//
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
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "http/http.h"
#include "http/http_wire.h"

namespace dsinfer::server::detail {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

// Hands work to the event loop from any thread. Once the server has stopped, work is dropped, so a
// responder that outlives the server is harmless.
class LoopHandle {
 public:
  explicit LoopHandle(net::io_context& loop) : loop_(&loop) {}

  // Returns whether the work was taken.
  template <typename Work>
  bool post(Work&& work) {
    std::lock_guard lock(mutex_);
    if (loop_ == nullptr) return false;
    net::post(*loop_, std::forward<Work>(work));
    return true;
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
  // Every open connection, owned here until close() (and by the handlers of its pending operations).
  std::unordered_map<Connection*, std::shared_ptr<Connection>> connections;
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
  // Runs call on the loop after every call made on this responder before it. Posting alone does not
  // keep that order: Asio holds what the loop thread posts (io_context{1}) until its current handler
  // returns, so a chunk that another thread sends meanwhile would overtake the handler's start_stream.
  void in_order(std::function<void()> call);
  void run_pending();  // loop only

  std::weak_ptr<Connection> connection_;
  std::shared_ptr<LoopHandle> loop_;
  std::mutex pending_mutex_;
  std::deque<std::function<void()>> pending_;  // calls made and not yet run, oldest first
  State state_ = State::kOpen;           // loop only
  std::function<void()> on_disconnect_;  // loop only
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, ServerState& server);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Creates a connection owned by the server's table.
  static Connection& open(tcp::socket socket, ServerState& server);

  void serve();  // reads requests until the client leaves, a timeout passes or close()
  void refuse(int status, const std::string& message);  // answers an error at once, then closes
  // At once: the table lets go of the connection, and a response still in progress counts as a
  // disconnect.
  void close();

  // For the server's choice of whom to close when a new connection finds it full.
  // Closing, with its last answer sent: only draining what the client still sends.
  bool draining() const { return phase_ == Phase::kClosing && !writing_ && output_.empty(); }
  // While the client has not yet sent a whole request: when a byte of it last arrived (or the wait
  // for it began). Empty while a request is being answered.
  std::optional<Clock::time_point> waiting_for_request_since() const;

  // From the Responder, on the loop. Each returns false when the call does not fit the phase of the
  // exchange (a second respond(), a chunk before start_stream(), ...), which is then ignored.
  bool respond(int status, const std::string& content_type, std::string body, const Headers& headers);
  bool start_stream(int status, const std::string& content_type, const Headers& headers);
  bool send_chunk(const std::string& data);
  bool finish_stream();
  void abandon();  // the handler dropped its responder without completing the response

 private:
  // In time order within one exchange.
  enum class Phase { kReadingHead, kReadingBody, kAwaitingResponse, kStreaming, kSendingLast, kClosing };
  // What the one timer of a connection watches for: no progress for too long in the current phase.
  enum class Wait { kNothing, kKeepAlive, kHead, kBody, kSend, kLinger };

  // Reading (http_connection.cc).
  void start_request();
  void read_some();
  void on_read(boost::beast::error_code ec, size_t bytes);
  void on_input();
  void parse_request();
  bool on_head();
  void on_request();
  void on_parse_error(boost::beast::error_code ec);
  void read_ahead();
  void probe_after_end_of_stream();
  void dispatch(const HttpRequest& request, const std::shared_ptr<Responder>& responder);

  // Writing and closing (http_connection_write.cc).
  ResponseHead head_for(int status, std::string_view content_type, const Headers& headers,
                        BodyFraming framing, size_t content_length) const;
  void send_error(int status, const std::string& message);
  void answer_and_close(const HttpAnswer& answer);
  void queue_write(std::string bytes);
  void write_some();
  void on_written(boost::beast::error_code ec, size_t bytes);
  void on_response_sent();
  void begin_closing();
  void finish_closing_when_sent();

  // Timeouts (http_connection_write.cc).
  std::pair<Wait, Clock::time_point> current_wait() const;
  void schedule_timeout();
  void arm_timer(Clock::time_point deadline);
  void on_timer();
  void time_out(Wait wait);

  tcp::socket socket_;
  net::steady_timer timer_;
  ServerState& server_;
  std::string remote_;

  Phase phase_ = Phase::kReadingHead;
  bool closed_ = false;
  bool keep_alive_ = true;     // of the current exchange
  bool reading_ = false;       // a read is pending on the socket
  bool peer_ended_ = false;    // the client's stream ended (a half-close, or it left)
  bool served_before_ = false;  // a request completed on this connection: waiting for the next is keep-alive
  bool request_started_ = false;  // some byte of the current request has arrived
  bool head_checked_ = false;
  bool timer_armed_ = false;
  bool sent_fin_ = false;
  bool watching_for_reset_ = false;  // the client's stream ended while it was answered

  Clock::time_point read_progress_;   // reading phases: the last byte, or the start of the wait
  Clock::time_point write_progress_;  // while output is queued: the last byte the client took
  Clock::time_point closing_since_;

  std::unique_ptr<char[]> read_area_;  // what the pending read fills
  size_t read_area_size_ = 0;
  boost::beast::flat_buffer buffer_;  // bytes read but not yet parsed
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpRequest request_;                 // the head (then the body) of the request being read
  int response_version_ = 11;           // the client's HTTP version, for the response's framing
  std::weak_ptr<Responder> responder_;

  std::deque<std::string> output_;  // queued response bytes; the front may be partly sent
  size_t output_offset_ = 0;        // bytes of output_.front() already sent
  size_t output_bytes_ = 0;         // bytes queued and not yet sent
  bool writing_ = false;
  std::vector<net::const_buffer> write_buffers_;
};

}  // namespace dsinfer::server::detail
