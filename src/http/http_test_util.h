// Helpers of the HTTP transport tests: servers on port 0, raw POSIX connections that send exactly
// the bytes a test needs and leave at a chosen moment, and a handler that holds its requests open.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/error.h"
#include "http/http.h"

namespace dsinfer::server::http_test {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Polls until condition() holds or the time is up; returns condition().
inline bool wait_for(const std::function<bool()>& condition, double seconds = 5) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (!condition() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return condition();
}

inline std::string test_error_body(int status, const std::string& message) {
  return str_cat("{\"status\":", status, ",\"message\":\"", message, "\"}");
}

inline HttpServerOptions test_options() {
  HttpServerOptions options;
  options.port = 0;
  options.error_body = test_error_body;
  return options;
}

inline HttpCall call_to(const HttpServer& server, std::string method, std::string target,
                        std::string body = "") {
  HttpCall call;
  call.method = std::move(method);
  call.port = server.port();
  call.target = std::move(target);
  call.body = std::move(body);
  call.timeout_seconds = 10;
  return call;
}

inline std::optional<std::string> find_header(const HttpClientResponse& response, std::string_view name) {
  HttpRequest as_request;  // reuses its case-insensitive lookup
  as_request.headers = response.headers;
  auto value = as_request.header(name);
  return value ? std::optional<std::string>(*value) : std::nullopt;
}

// A plain POSIX connection, to send exactly the bytes a test needs and to leave at a chosen moment.
class RawConnection {
 public:
  // receive_buffer_bytes: a small kernel receive buffer, so that a client that reads nothing backs
  // the server up after little data.
  explicit RawConnection(uint16_t port, int receive_buffer_bytes = 0) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    if (receive_buffer_bytes > 0) {
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes, sizeof receive_buffer_bytes);
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      throw Error(str_cat("test: cannot connect to port ", port));
    }
  }
  ~RawConnection() { close(); }

  void send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (sent <= 0) return;
      bytes.remove_prefix(static_cast<size_t>(sent));
    }
  }

  // Reads until done(all bytes so far) holds, the peer closes, or the time is up; returns the bytes.
  const std::string& read_until(const std::function<bool(const std::string&)>& done, double seconds = 5) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    while (!done(received_) && !peer_closed_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      pollfd readable{fd_, POLLIN, 0};
      if (::poll(&readable, 1, static_cast<int>(left.count())) <= 0) continue;
      char bytes[4096];
      const ssize_t got = ::recv(fd_, bytes, sizeof bytes, 0);
      if (got <= 0) {
        peer_closed_ = true;
      } else {
        received_.append(bytes, static_cast<size_t>(got));
      }
    }
    return received_;
  }
  const std::string& read_until(std::string_view text, double seconds = 5) {
    return read_until([text](const std::string& bytes) { return bytes.find(text) != std::string::npos; },
                      seconds);
  }
  bool wait_closed_by_peer(double seconds) {
    read_until([](const std::string&) { return false; }, seconds);
    return peer_closed_;
  }
  // Half-close: the server sees the end of the request stream, and the socket can still read.
  void shutdown_sending() { ::shutdown(fd_, SHUT_WR); }
  bool peer_closed() const { return peer_closed_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
  std::string received_;
  bool peer_closed_ = false;
};

inline int count_of(const std::string& text, std::string_view what) {
  int count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

// Requests the handler keeps unanswered, with their responders, and the disconnects they saw.
struct HeldRequests {
  std::mutex mutex;
  std::vector<std::shared_ptr<HttpResponder>> responders;
  std::atomic<int> disconnects{0};

  // Holds each request; with `stream`, starts a stream and sends "first" before holding it.
  HttpHandler handler(bool stream) {
    return [this, stream](const HttpRequest&, std::shared_ptr<HttpResponder> responder) {
      responder->on_disconnect([this] { ++disconnects; });
      if (stream) {
        responder->start_stream(200, "text/event-stream");
        responder->send_chunk("first");
      }
      std::lock_guard lock(mutex);
      responders.push_back(std::move(responder));
    };
  }
  size_t count() {
    std::lock_guard lock(mutex);
    return responders.size();
  }
  std::vector<std::shared_ptr<HttpResponder>> all() {
    std::lock_guard lock(mutex);
    return responders;
  }
};

// Raises the soft limit on open files to `needed` if the hard limit allows; false when it cannot.
inline bool ensure_fd_limit(rlim_t needed) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  if (limit.rlim_cur >= needed) return true;
  if (limit.rlim_max < needed) return false;
  limit.rlim_cur = needed;
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

}  // namespace dsinfer::server::http_test
