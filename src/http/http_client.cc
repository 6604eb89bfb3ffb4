// HttpClient: HTTP/1.1 calls on one event loop thread, one connection per call.
//
// A call resolves (unless the host is an address), connects, writes the request, reads the head
// (on_head), then reads the body a piece at a time through Beast's buffer_body, so each SSE chunk
// reaches on_data as soon as it arrives. An HttpCancel ends it from any thread (http_cancel.cc).
// Thousands of calls in flight cost a socket, a timer and a few KiB each, and no threads.
#include <array>
#include <future>
#include <limits>
#include <thread>
#include <unordered_set>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "core/error.h"
#include "http/http.h"

namespace dsinfer::server {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::beast::error_code;

// Body bytes handed to on_data at most per piece; small because thousands of calls each hold one.
constexpr size_t kPieceBytes = 4096;

class Call : public std::enable_shared_from_this<Call> {
 public:
  Call(net::io_context& loop, HttpCall call, std::unordered_set<Call*>& live)
      : call_(std::move(call)), loop_(loop), resolver_(loop), socket_(loop), deadline_(loop), live_(live) {
    live_.insert(this);
  }
  ~Call() {
    if (call_.cancel) call_.cancel->disarm();
    live_.erase(this);
  }

  void start();
  void cancel() { finish("cancelled"); }

 private:
  void connect();
  void on_connect(error_code ec);
  void on_written(error_code ec);
  void on_header(error_code ec);
  void read_body();
  void on_body(error_code ec);
  void finish(std::string error);
  http::request<http::string_body> make_request();
  std::string describe_read_error(const error_code& ec) const;

  HttpCall call_;
  net::io_context& loop_;
  tcp::resolver resolver_;
  tcp::socket socket_;
  net::steady_timer deadline_;
  std::unordered_set<Call*>& live_;
  http::request<http::string_body> request_;
  boost::beast::flat_buffer buffer_;
  http::response_parser<http::buffer_body> parser_;
  std::array<char, kPieceBytes> piece_;
  HttpClientResponse response_;
  bool done_ = false;
};

void Call::start() {
  request_ = make_request();
  // No limit: the caller chose to receive whatever the server sends. (Not boost::none, which Beast
  // 1.74 compares as smaller than any Content-Length.)
  parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
  deadline_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(call_.timeout_seconds)));
  deadline_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec) self->finish(str_cat("timeout after ", self->call_.timeout_seconds, " s"));
  });
  if (call_.cancel) {
    // Posted, not run here: cancel() may come from any thread, and the call lives on the loop.
    call_.cancel->arm([weak = weak_from_this(), &loop = loop_] {
      net::post(loop, [weak] {
        if (auto self = weak.lock()) self->cancel();
      });
    });
  }
  connect();
}

http::request<http::string_body> Call::make_request() {
  http::request<http::string_body> request;
  const http::verb verb = http::string_to_verb(call_.method);
  if (verb == http::verb::unknown) {
    request.method_string(call_.method);
  } else {
    request.method(verb);
  }
  request.target(call_.target);
  request.version(11);
  request.set(http::field::host, str_cat(call_.host, ":", call_.port));
  request.keep_alive(false);  // one call, one connection (the caller's headers may say otherwise)
  for (const auto& [name, value] : call_.headers) request.set(name, value);
  request.body() = std::move(call_.body);
  request.prepare_payload();
  return request;
}

void Call::connect() {
  const auto on_connect = [self = shared_from_this()](error_code ec, auto&&...) { self->on_connect(ec); };
  error_code not_an_address;
  const auto address = net::ip::make_address(call_.host, not_an_address);
  if (!not_an_address) return socket_.async_connect(tcp::endpoint(address, call_.port), on_connect);
  resolver_.async_resolve(
      call_.host, std::to_string(call_.port),
      [self = shared_from_this(), on_connect](error_code ec, tcp::resolver::results_type found) {
        if (self->done_) return;
        if (ec) return self->finish(str_cat("cannot resolve ", self->call_.host, ": ", ec.message()));
        net::async_connect(self->socket_, found, on_connect);
      });
}

void Call::on_connect(error_code ec) {
  if (done_) return;
  if (ec) return finish(str_cat("cannot connect to ", call_.host, ":", call_.port, ": ", ec.message()));
  http::async_write(socket_, request_,
                    [self = shared_from_this()](error_code ec, size_t) { self->on_written(ec); });
}

void Call::on_written(error_code ec) {
  if (done_) return;
  if (ec) return finish(str_cat("cannot send the request: ", ec.message()));
  http::async_read_header(socket_, buffer_, parser_,
                          [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
}

void Call::on_header(error_code ec) {
  if (done_) return;
  if (ec) return finish(describe_read_error(ec));
  const auto& head = parser_.get();
  response_.status = static_cast<int>(head.result_int());
  for (const auto& field : head) {
    response_.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  if (call_.on_head) call_.on_head(response_);
  if (parser_.is_done()) return finish("");
  read_body();
}

void Call::read_body() {
  auto& body = parser_.get().body();
  body.data = piece_.data();
  body.size = piece_.size();
  // read_some, not read: it completes as soon as some of the body arrived, however little.
  http::async_read_some(socket_, buffer_, parser_,
                        [self = shared_from_this()](error_code ec, size_t) { self->on_body(ec); });
}

void Call::on_body(error_code ec) {
  if (done_) return;
  if (ec && ec != http::error::need_buffer)
    return finish(describe_read_error(ec));  // need_buffer: piece full
  const std::string_view piece(piece_.data(), piece_.size() - parser_.get().body().size);
  if (!piece.empty()) {
    if (call_.on_data) {
      call_.on_data(piece);
    } else {
      response_.body.append(piece);
    }
  }
  if (parser_.is_done()) return finish("");
  read_body();
}

std::string Call::describe_read_error(const error_code& ec) const {
  if (ec == http::error::end_of_stream || ec == http::error::partial_message) {
    return "the server closed the connection before the response was complete";
  }
  return str_cat("cannot read the response: ", ec.message());
}

// Exactly once per call, whichever of success, error, timeout or cancellation comes first.
void Call::finish(std::string error) {
  if (done_) return;
  done_ = true;
  if (call_.cancel) call_.cancel->disarm();
  response_.error = std::move(error);
  error_code ignored;
  deadline_.cancel();
  resolver_.cancel();
  socket_.close(ignored);
  if (call_.on_done) call_.on_done(response_);
}

}  // namespace

struct HttpClient::Impl {
  net::io_context loop{1};
  net::executor_work_guard<net::io_context::executor_type> work = net::make_work_guard(loop);
  std::unordered_set<Call*> calls;  // in flight; loop thread only
  std::thread thread{[this] { loop.run(); }};
};

HttpClient::HttpClient() : impl_(std::make_unique<Impl>()) {}

HttpClient::~HttpClient() {
  net::post(impl_->loop, [impl = impl_.get()] {
    // cancel() only closes sockets: no call is destroyed during this walk.
    const std::vector<Call*> in_flight(impl->calls.begin(), impl->calls.end());
    for (Call* call : in_flight) call->cancel();
    impl->work.reset();
  });
  impl_->thread.join();
}

void HttpClient::start(HttpCall call) {
  net::post(impl_->loop, [impl = impl_.get(), call = std::move(call)]() mutable {
    std::make_shared<Call>(impl->loop, std::move(call), impl->calls)->start();
  });
}

// Must not be called from a callback of this client: the loop thread would wait for itself.
HttpClientResponse HttpClient::fetch(HttpCall call) {
  auto promise = std::make_shared<std::promise<HttpClientResponse>>();
  std::future<HttpClientResponse> result = promise->get_future();
  call.on_done = [promise, on_done = std::move(call.on_done)](const HttpClientResponse& response) {
    if (on_done) on_done(response);
    promise->set_value(response);
  };
  start(std::move(call));
  return result.get();
}

}  // namespace dsinfer::server
