// One client connection of the HTTP server: request parsing, the write queue, keep-alive, the
// disconnect watch and the timeouts (see http_connection.h for the phases of an exchange).
#include "server/http_connection.h"

#include <exception>

#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/read.hpp>

#include "core/log.h"
#include "server/http_wire.h"

namespace dsinfer::server::detail {
namespace {

using boost::beast::error_code;

// Bytes asked of the socket per read while a request is being answered. Whatever arrives is kept
// (a pipelined next request) up to kMaxReadAheadBytes, after which the watch pauses until the
// response is done.
constexpr size_t kReadAheadBytes = 4096;
constexpr size_t kMaxReadAheadBytes = 64 << 10;
// How long a closing connection drains what the client still sends (see close_gracefully).
constexpr auto kLingerTime = std::chrono::seconds(2);

bool is_http_parse_error(const error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_target).category();
}

bool expects_continue(const http::request_parser<http::string_body>& parser) {
  return !parser.is_done() && boost::beast::iequals(parser.get()[http::field::expect], "100-continue");
}

HttpRequest to_request(http::request<http::string_body>&& message, const std::string& remote) {
  HttpRequest request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  for (const auto& field : message) {
    request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  request.body = std::move(message.body());
  request.remote = remote;
  return request;
}

}  // namespace

Connection::Connection(tcp::socket socket, ServerState& server)
    : socket_(std::move(socket)), timer_(socket_.get_executor()), server_(server) {
  error_code ec;
  socket_.set_option(tcp::no_delay(true), ec);  // each SSE chunk leaves at once, not after an ACK
  const tcp::endpoint peer = socket_.remote_endpoint(ec);
  remote_ = ec ? std::string("unknown") : str_cat(peer.address().to_string(), ":", peer.port());
  server_.connections.insert(this);
  ++server_.open_connections;
}

Connection::~Connection() { close(); }

void Connection::serve() { read_request(); }

void Connection::refuse(int status, const std::string& message) {
  keep_alive_ = false;
  arm_timer(kLingerTime);  // a client that never reads cannot hold the connection
  send_error(status, message);
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  server_.connections.erase(this);
  --server_.open_connections;
  error_code ec;
  timer_.cancel();
  socket_.close(ec);
  if (auto responder = responder_.lock()) responder->connection_lost();
}

// Reading requests.

void Connection::read_request() {
  phase_ = Phase::kReadingRequest;
  const int idle_seconds = server_.options.idle_timeout_seconds;
  if (idle_seconds > 0) arm_timer(std::chrono::seconds(idle_seconds));
  parser_.emplace();
  parser_->body_limit(server_.options.max_body_bytes);
  http::async_read_header(socket_, buffer_, *parser_,
                          [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
}

void Connection::on_header(error_code ec) {
  if (closed_) return;
  if (ec) return on_read_error(ec);
  // curl and others wait (a second, for curl) for this before sending a large body.
  if (expects_continue(*parser_)) queue_write(std::string(kContinueResponse));
  http::async_read(socket_, buffer_, *parser_,
                   [self = shared_from_this()](error_code ec, size_t) { self->on_request(ec); });
}

void Connection::on_request(error_code ec) {
  if (closed_) return;
  if (ec) return on_read_error(ec);
  disarm_timer();  // from here the handler, not the idle timeout, decides how long this takes
  keep_alive_ = parser_->keep_alive();
  phase_ = Phase::kAwaitingResponse;
  auto responder = std::make_shared<Responder>(weak_from_this(), server_.loop);
  responder_ = responder;
  const HttpRequest request = to_request(parser_->release(), remote_);
  parser_.reset();
  read_ahead();
  dispatch(request, responder);
}

void Connection::on_read_error(error_code ec) {
  const size_t max_body = server_.options.max_body_bytes;
  if (ec == http::error::body_limit) {
    return refuse(413, str_cat("the request body is larger than the limit of ", max_body, " bytes"));
  }
  if (ec == http::error::header_limit) return refuse(431, "the request headers are too large");
  const bool client_left = ec == http::error::end_of_stream || ec == http::error::partial_message;
  if (is_http_parse_error(ec) && !client_left) {
    return refuse(400, str_cat("malformed HTTP request: ", ec.message()));
  }
  close();  // the client left or the socket failed: there is nobody to answer
}

void Connection::dispatch(const HttpRequest& request, const std::shared_ptr<Responder>& responder) {
  try {
    server_.handler(request, responder);
  } catch (const std::exception& e) {
    log_warning("http: handler failed on ", request.method, " ", request.target, ": ", e.what());
    // Ignored when the handler answered before it threw.
    responder->respond(500, "application/json", server_.options.error_body(500, "internal server error"), {});
  }
}

// The read that stays pending while a request is answered. It notices a client that leaves, keeps
// the bytes of a pipelined request, and while closing drains what the client still sends.

void Connection::read_ahead() {
  reading_ahead_ = true;
  socket_.async_read_some(
      buffer_.prepare(kReadAheadBytes),
      [self = shared_from_this()](error_code ec, size_t bytes) { self->on_read_ahead(ec, bytes); });
}

void Connection::on_read_ahead(error_code ec, size_t bytes) {
  reading_ahead_ = false;
  if (closed_) return;
  if (ec && ec != net::error::operation_aborted) return close();  // EOF or reset: the client left
  buffer_.commit(bytes);
  switch (phase_) {
    case Phase::kReadingRequest:  // the response ended meanwhile (on_response_sent cancelled us)
      return read_request();
    case Phase::kClosing:
      buffer_.consume(buffer_.size());
      return read_ahead();
    default:
      if (buffer_.size() < kMaxReadAheadBytes) read_ahead();
  }
}

// Writing responses.

bool Connection::respond(int status, const std::string& content_type, std::string body,
                         const Headers& headers) {
  if (phase_ != Phase::kAwaitingResponse) return false;
  phase_ = Phase::kSendingLast;
  queue_write(format_response_head(status, content_type, headers, body.size(), keep_alive_));
  queue_write(std::move(body));
  return true;
}

bool Connection::start_stream(int status, const std::string& content_type, const Headers& headers) {
  if (phase_ != Phase::kAwaitingResponse) return false;
  phase_ = Phase::kStreaming;
  queue_write(format_response_head(status, content_type, headers, std::nullopt, keep_alive_));
  return true;
}

bool Connection::send_chunk(const std::string& data) {
  if (phase_ != Phase::kStreaming) return false;
  if (!data.empty()) queue_write(format_chunk(data));  // an empty chunk would end the body
  return true;
}

bool Connection::finish_stream() {
  if (phase_ != Phase::kStreaming) return false;
  phase_ = Phase::kSendingLast;
  queue_write(std::string(kLastChunk));
  return true;
}

void Connection::abandon() {
  if (closed_ || !responder_.expired()) return;
  if (phase_ == Phase::kAwaitingResponse) {
    log_warning("http: a handler dropped a request from ", remote_, " without answering");
    send_error(500, "the server dropped the request without answering");
  } else if (phase_ == Phase::kStreaming) {
    close();  // a truncated chunked body tells the client the stream broke
  }
}

void Connection::send_error(int status, const std::string& message) {
  std::string body = server_.options.error_body(status, message);
  phase_ = Phase::kSendingLast;
  queue_write(format_response_head(status, "application/json", {}, body.size(), keep_alive_));
  queue_write(std::move(body));
}

void Connection::queue_write(std::string bytes) {
  pending_.push_back(std::move(bytes));
  if (writing_.empty()) write_pending();
}

// Sends everything queued so far in one gathered write.
void Connection::write_pending() {
  writing_.swap(pending_);
  write_buffers_.clear();
  for (const std::string& piece : writing_) write_buffers_.push_back(net::buffer(piece));
  net::async_write(socket_, write_buffers_,
                   [self = shared_from_this()](error_code ec, size_t) { self->on_written(ec); });
}

void Connection::on_written(error_code ec) {
  writing_.clear();
  if (closed_) return;
  if (ec) return close();
  if (!pending_.empty()) return write_pending();
  if (phase_ == Phase::kSendingLast) on_response_sent();
}

void Connection::on_response_sent() {
  responder_.reset();
  if (!keep_alive_) return close_gracefully();
  phase_ = Phase::kReadingRequest;
  if (!reading_ahead_) return read_request();
  error_code ec;
  socket_.cancel(ec);  // on_read_ahead then goes on with read_request
}

// Half-closes and drains what the client still sends before closing: closing a socket with unread
// bytes makes the kernel send a reset, which can destroy the response still on its way (a 413
// answered while the client is still sending its body).
void Connection::close_gracefully() {
  phase_ = Phase::kClosing;
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  arm_timer(kLingerTime);
  if (!reading_ahead_) read_ahead();
}

// Timeouts.

void Connection::arm_timer(std::chrono::steady_clock::duration after) {
  timer_.expires_after(after);
  timer_.async_wait([self = shared_from_this()](error_code) { self->on_timer(); });
}

void Connection::disarm_timer() { timer_.expires_at(net::steady_timer::time_point::max()); }

void Connection::on_timer() {
  // A wait cancelled by a re-arm may still complete; only a deadline that really passed counts.
  if (closed_ || timer_.expiry() > net::steady_timer::clock_type::now()) return;
  close();
}

}  // namespace dsinfer::server::detail
