// One client connection of the HTTP server, its writing side: responses and their framing, the
// write queue with its cap, closing, and the timeouts of every phase (see http_connection.h).
#include "core/error.h"
#include "core/log.h"
#include "http/http_connection.h"

namespace dsinfer::server::detail {
namespace {

using boost::beast::error_code;

// How long a closing connection drains what the client still sends (see begin_closing).
constexpr auto kLingerTime = std::chrono::seconds(2);
// Pieces of the queue sent per gathered write (Asio passes at most 64 buffers to one sendmsg).
constexpr size_t kMaxGatheredPieces = 64;

}  // namespace

// Responses.

ResponseHead Connection::head_for(int status, std::string_view content_type, const Headers& headers,
                                  BodyFraming framing, size_t content_length) const {
  ResponseHead head;
  head.status = status;
  head.content_type = content_type;
  head.headers = &headers;
  head.framing = framing;
  head.content_length = content_length;
  head.keep_alive = keep_alive_;
  head.announce_keep_alive = response_version_ < 11;
  return head;
}

bool Connection::respond(int status, const std::string& content_type, std::string body, const Headers& headers) {
  if (phase_ != Phase::kAwaitingResponse) return false;
  phase_ = Phase::kSendingLast;
  queue_write(format_response_head(head_for(status, content_type, headers, BodyFraming::kContentLength, body.size())));
  queue_write(std::move(body));
  return true;
}

bool Connection::start_stream(int status, const std::string& content_type, const Headers& headers) {
  if (phase_ != Phase::kAwaitingResponse) return false;
  phase_ = Phase::kStreaming;
  BodyFraming framing = BodyFraming::kChunked;
  if (response_version_ < 11) {  // HTTP/1.0 knows no chunks: the body runs until the close
    framing = BodyFraming::kUntilClose;
    keep_alive_ = false;
  }
  queue_write(format_response_head(head_for(status, content_type, headers, framing, 0)));
  return true;
}

bool Connection::send_chunk(const std::string& data) {
  if (phase_ != Phase::kStreaming) return false;
  if (data.empty()) return true;  // an empty chunk would end the body
  const size_t cap = server_.options.max_queued_bytes;
  if (cap > 0 && output_bytes_ > cap) {
    log_warning("http: dropping ", remote_, ": it has not taken ", output_bytes_, " bytes of its stream (limit ",
                cap, ")");
    close();  // its request is aborted through on_disconnect
    return true;
  }
  queue_write(response_version_ < 11 ? data : format_chunk(data));
  return true;
}

bool Connection::finish_stream() {
  if (phase_ != Phase::kStreaming) return false;
  phase_ = Phase::kSendingLast;
  if (response_version_ >= 11) queue_write(std::string(kLastChunk));
  if (!writing_ && output_.empty()) on_response_sent();  // a close-delimited body with all sent
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
  queue_write(format_response_head(head_for(status, "application/json", {}, BodyFraming::kContentLength, body.size())));
  queue_write(std::move(body));
}

void Connection::refuse(int status, const std::string& message) {
  answer_and_close(HttpAnswer{status, "application/json", server_.options.error_body(status, message), {}});
}

void Connection::answer_and_close(const HttpAnswer& answer) {
  keep_alive_ = false;
  queue_write(format_response_head(
      head_for(answer.status, answer.content_type, answer.headers, BodyFraming::kContentLength, answer.body.size())));
  queue_write(answer.body);
  begin_closing();
}

// The write queue.

void Connection::queue_write(std::string bytes) {
  if (bytes.empty() || closed_) return;
  if (output_.empty() && !writing_) write_progress_ = Clock::now();  // the send clock starts
  output_bytes_ += bytes.size();
  output_.push_back(std::move(bytes));
  if (!writing_) write_some();
}

// Sends what is queued in one gathered write; the completion says how much the client took.
void Connection::write_some() {
  writing_ = true;
  write_buffers_.clear();
  size_t offset = output_offset_;
  for (const std::string& piece : output_) {
    write_buffers_.push_back(net::buffer(piece) + offset);
    offset = 0;
    if (write_buffers_.size() == kMaxGatheredPieces) break;
  }
  socket_.async_write_some(write_buffers_,
                           [self = shared_from_this()](error_code ec, size_t bytes) { self->on_written(ec, bytes); });
  schedule_timeout();
}

void Connection::on_written(error_code ec, size_t bytes) {
  writing_ = false;
  if (closed_) return;
  if (ec) return close();  // the client is gone
  if (bytes > 0) write_progress_ = Clock::now();
  output_bytes_ -= bytes;
  while (bytes > 0) {
    const size_t left = output_.front().size() - output_offset_;
    if (bytes < left) {
      output_offset_ += bytes;
      break;
    }
    bytes -= left;
    output_.pop_front();
    output_offset_ = 0;
  }
  if (!output_.empty()) return write_some();
  if (phase_ == Phase::kSendingLast) return on_response_sent();
  finish_closing_when_sent();
}

void Connection::on_response_sent() {
  responder_.reset();
  served_before_ = true;
  if (!keep_alive_) return begin_closing();
  start_request();
}

// Closing: the last answer goes out, then a half-close, and what the client still sends is drained
// for a while before the socket closes. Closing a socket with unread bytes makes the kernel send a
// reset, which can destroy the answer still on its way (a 413 answered while the client is still
// sending its body).
void Connection::begin_closing() {
  phase_ = Phase::kClosing;
  keep_alive_ = false;
  closing_since_ = Clock::now();
  schedule_timeout();
  finish_closing_when_sent();
  if (!closed_) on_input();
}

void Connection::finish_closing_when_sent() {
  if (phase_ != Phase::kClosing || closed_ || writing_ || !output_.empty()) return;
  if (!sent_fin_) {
    sent_fin_ = true;
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
  }
  if (peer_ended_) close();  // nothing left to drain
}

// Timeouts. One timer per connection; progress only moves a deadline later, so it is re-armed
// lazily when it fires early, and moved only when a phase brings a sooner deadline.

std::pair<Connection::Wait, Clock::time_point> Connection::current_wait() const {
  const HttpServerOptions& options = server_.options;
  const auto unless_off = [](Wait wait, Clock::time_point since, std::chrono::milliseconds limit) {
    return limit.count() > 0 ? std::pair{wait, since + limit} : std::pair{Wait::kNothing, Clock::time_point{}};
  };
  if (closed_) return {Wait::kNothing, {}};
  switch (phase_) {
    case Phase::kClosing:
      return {Wait::kLinger, closing_since_ + kLingerTime};
    case Phase::kReadingHead:
      if (!request_started_ && served_before_) return unless_off(Wait::kKeepAlive, read_progress_, options.idle_timeout);
      return unless_off(Wait::kHead, read_progress_, options.header_timeout);
    case Phase::kReadingBody:
      return unless_off(Wait::kBody, read_progress_, options.body_timeout);
    default:  // answering: only a response the client does not take can time out
      if (!writing_ && output_.empty()) return {Wait::kNothing, {}};
      return unless_off(Wait::kSend, write_progress_, options.send_timeout);
  }
}

void Connection::schedule_timeout() {
  const auto [wait, deadline] = current_wait();
  if (wait == Wait::kNothing) return;  // a wait still pending finds nothing to do
  if (!timer_armed_) return arm_timer(deadline);
  if (timer_.expiry() > deadline) timer_.cancel();  // on_timer re-arms for the sooner deadline
}

void Connection::arm_timer(Clock::time_point deadline) {
  timer_armed_ = true;
  timer_.expires_at(deadline);
  timer_.async_wait([self = shared_from_this()](error_code) { self->on_timer(); });
}

void Connection::on_timer() {
  timer_armed_ = false;
  if (closed_) return;
  const auto [wait, deadline] = current_wait();
  if (wait == Wait::kNothing) return;
  if (Clock::now() < deadline) return arm_timer(deadline);
  time_out(wait);
}

void Connection::time_out(Wait wait) {
  const HttpServerOptions& options = server_.options;
  switch (wait) {
    case Wait::kNothing:
      return;
    case Wait::kKeepAlive:
    case Wait::kLinger:
      return close();
    case Wait::kHead:
      if (!request_started_) return close();  // nothing of a request came: there is nobody to answer
      log_debug("http: ", remote_, " stopped sending its request head");
      return refuse(408, str_cat("the request head stopped arriving: nothing came for ",
                                 options.header_timeout.count(), " ms"));
    case Wait::kBody:
      log_debug("http: ", remote_, " stopped sending its request body");
      return refuse(408, str_cat("the request body stopped arriving: nothing came for ", options.body_timeout.count(),
                                 " ms"));
    case Wait::kSend:
      log_warning("http: dropping ", remote_, ": it took none of its response for ", options.send_timeout.count(),
                  " ms");
      return close();  // a request still running is aborted through on_disconnect
  }
}

}  // namespace dsinfer::server::detail
