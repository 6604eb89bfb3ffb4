// One client connection of the HTTP server, its reading side: the read loop, request parsing, the
// head checks and the watch kept while a request is answered (see http_connection.h). Writing,
// closing and the timeouts are in http_connection_write.cc.
#include "http/http_connection.h"

#include <cstring>
#include <exception>

#include <boost/beast/core/string.hpp>

#include "core/error.h"
#include "core/log.h"
#include "http/http_framing.h"

namespace dsinfer::server::detail {
namespace {

using boost::beast::error_code;

// Bytes asked of the socket per read: while a request arrives, and while one is answered (when
// whatever arrives is a pipelined next request, kept up to kMaxReadAheadBytes before the watch
// pauses until the response is done).
constexpr size_t kReadBytes = 16 << 10;
constexpr size_t kReadAheadBytes = 4096;
constexpr size_t kMaxReadAheadBytes = 64 << 10;

}  // namespace

Connection::Connection(tcp::socket socket, ServerState& server)
    : socket_(std::move(socket)), timer_(socket_.get_executor()), server_(server) {
  error_code ec;
  socket_.set_option(tcp::no_delay(true), ec);  // each SSE chunk leaves at once, not after an ACK
  const tcp::endpoint peer = socket_.remote_endpoint(ec);
  remote_ = ec ? std::string("unknown") : str_cat(peer.address().to_string(), ":", peer.port());
  read_progress_ = write_progress_ = closing_since_ = Clock::now();
}

Connection& Connection::open(tcp::socket socket, ServerState& server) {
  auto connection = std::make_shared<Connection>(std::move(socket), server);
  Connection& opened = *connection;
  server.connections.emplace(&opened, std::move(connection));
  ++server.open_connections;
  return opened;
}

void Connection::serve() { start_request(); }

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  --server_.open_connections;
  error_code ec;
  socket_.close(ec);
  timer_.cancel();
  if (auto responder = responder_.lock()) responder->connection_lost();
  // Released on a later turn of the loop, never under a member function still running.
  auto owner = server_.connections.extract(this);
  if (!owner.empty()) net::post(socket_.get_executor(), [owned = std::move(owner.mapped())] {});
}

std::optional<Clock::time_point> Connection::waiting_for_request_since() const {
  if (closed_ || (phase_ != Phase::kReadingHead && phase_ != Phase::kReadingBody)) return std::nullopt;
  return read_progress_;
}

// The read loop.

void Connection::start_request() {
  phase_ = Phase::kReadingHead;
  parser_.emplace();
  parser_->body_limit(server_.options.max_body_bytes);
  request_ = HttpRequest{};
  head_checked_ = false;
  request_started_ = buffer_.size() > 0;  // a pipelined request
  read_progress_ = Clock::now();
  if (buffer_.size() == 0) buffer_.shrink_to_fit();  // an idle keep-alive connection holds no buffer
  schedule_timeout();
  on_input();
}

// Reads go to their own area, not into buffer_: the parser consumes buffer_ (which moves its
// pointers) while a read-ahead is pending.
void Connection::read_some() {
  if (reading_ || closed_ || peer_ended_) return;
  reading_ = true;
  // Small while nothing of a request has come, so that idle connections hold little.
  const bool in_request = (phase_ == Phase::kReadingHead && request_started_) || phase_ == Phase::kReadingBody;
  const size_t size = in_request ? kReadBytes : kReadAheadBytes;
  if (read_area_size_ != size) {
    read_area_ = std::make_unique<char[]>(size);
    read_area_size_ = size;
  }
  socket_.async_read_some(net::buffer(read_area_.get(), read_area_size_),
                          [self = shared_from_this()](error_code ec, size_t bytes) { self->on_read(ec, bytes); });
}

void Connection::on_read(error_code ec, size_t bytes) {
  reading_ = false;
  if (closed_) return;
  if (bytes > 0) {
    std::memcpy(buffer_.prepare(bytes).data(), read_area_.get(), bytes);
    buffer_.commit(bytes);
  }
  if (ec == net::error::eof) {
    peer_ended_ = true;
  } else if (ec) {
    return close();  // reset or failure: the client is gone
  }
  if (bytes > 0 && (phase_ == Phase::kReadingHead || phase_ == Phase::kReadingBody)) {
    read_progress_ = Clock::now();
    request_started_ = true;
  }
  on_input();
}

void Connection::on_input() {
  switch (phase_) {
    case Phase::kReadingHead:
    case Phase::kReadingBody:
      return parse_request();
    case Phase::kClosing:
      buffer_.consume(buffer_.size());
      if (peer_ended_) return finish_closing_when_sent();
      return read_some();
    default:
      return read_ahead();
  }
}

// Feeds the parser what is buffered. Beast's parser stops after the head, so the head is checked
// before a byte of the body is taken.
void Connection::parse_request() {
  while (buffer_.size() > 0) {
    error_code ec;
    const size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec == http::error::need_more) break;
    if (ec) return on_parse_error(ec);
    if (!head_checked_ && parser_->is_header_done() && !on_head()) return;
    if (parser_->is_done()) return on_request();
    if (used == 0) break;
  }
  if (peer_ended_) return close();  // the stream ended before a whole request: nobody to answer
  schedule_timeout();
  read_some();
}

void Connection::on_parse_error(error_code ec) {
  if (ec == http::error::body_limit) {
    return refuse(413, str_cat("the request body is larger than the limit of ", server_.options.max_body_bytes,
                               " bytes"));
  }
  if (ec == http::error::header_limit) return refuse(431, "the request headers are too large");
  refuse(400, str_cat("malformed HTTP request: ", ec.message()));
}

// Returns whether the request goes on to its body; otherwise it has been answered.
bool Connection::on_head() {
  head_checked_ = true;
  phase_ = Phase::kReadingBody;
  const auto& message = parser_->get();
  request_.method = std::string(message.method_string());
  request_.target = std::string(message.target());
  request_.version = static_cast<int>(message.version());
  for (const auto& field : message) {
    request_.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  request_.remote = remote_;
  response_version_ = request_.version;

  if (auto problem = check_request_head(request_)) {
    refuse(problem->status, problem->message);
    return false;
  }
  if (server_.options.check_head) {
    std::optional<HttpAnswer> answer;
    try {
      answer = server_.options.check_head(request_);
    } catch (const std::exception& e) {
      log_warning("http: the head check failed on ", request_.method, " ", request_.target, ": ", e.what());
      refuse(500, "internal server error");
      return false;
    }
    if (answer) {
      answer_and_close(*answer);
      return false;
    }
  }
  // curl and others wait (a second, for curl) for this before sending a large body. HTTP/1.0
  // clients know no 1xx answers.
  if (!parser_->is_done() && request_.version >= 11 &&
      boost::beast::iequals(message[http::field::expect], "100-continue")) {
    queue_write(std::string(kContinueResponse));
  }
  schedule_timeout();  // the body's clock
  return true;
}

void Connection::on_request() {
  request_.body = std::move(parser_->get().body());
  keep_alive_ = parser_->keep_alive();
  parser_.reset();
  phase_ = Phase::kAwaitingResponse;
  auto responder = std::make_shared<Responder>(weak_from_this(), server_.loop);
  responder_ = responder;
  dispatch(std::exchange(request_, HttpRequest{}), responder);
  schedule_timeout();
  read_ahead();
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

// The watch kept while a request is answered: it notices a client that leaves and keeps the bytes
// of a pipelined request.
void Connection::read_ahead() {
  if (peer_ended_) return probe_after_end_of_stream();
  // Past the limit the watch pauses until the response is sent (on_response_sent parses what is
  // buffered); the server's table keeps the connection alive meanwhile.
  if (buffer_.size() < kMaxReadAheadBytes) read_some();
}

// The client's stream ended while its request is answered: it has half-closed (it sends nothing
// more and waits for its answer, which it gets) or it has left (a client-side timeout, whose
// request should stop). Reading cannot tell the two apart; writing can, since a closed socket
// answers data with a reset. So a wait for the socket's error turns a reset into a disconnect, and
// when nothing else is being written a 100 Continue goes out to provoke one (an HTTP/1.1 client
// skips interim answers; an HTTP/1.0 client gets none and is answered in any case). Mid-stream
// there is no byte that could serve as a probe, and a client that half-closes does so right behind
// its request, before a stream starts: there the end of the stream means the client left.
void Connection::probe_after_end_of_stream() {
  if (phase_ == Phase::kStreaming) return close();
  if (watching_for_reset_) return;
  watching_for_reset_ = true;
  socket_.async_wait(tcp::socket::wait_error, [self = shared_from_this()](error_code ec) {
    if (!ec) self->close();
  });
  if (phase_ == Phase::kAwaitingResponse && response_version_ >= 11) queue_write(std::string(kContinueResponse));
}

}  // namespace dsinfer::server::detail
