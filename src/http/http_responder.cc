// The responder: the handler's side of one exchange (see http_connection.h). Its public methods may
// be called from any thread; each posts onto the event loop, where the exchange state lives.
#include <exception>

#include "core/log.h"
#include "http/http_connection.h"

namespace dsinfer::server::detail {
namespace {

void run_disconnect_callback(const std::function<void()>& callback) {
  try {
    callback();
  } catch (const std::exception& e) {
    log_warning("http: on_disconnect callback failed: ", e.what());
  }
}

}  // namespace

Responder::~Responder() {
  if (state_ != State::kOpen) return;
  // The handler let go without finishing: answer for it rather than leave the client waiting.
  loop_->post([connection = connection_] {
    if (auto alive = connection.lock()) alive->abandon();
  });
}

template <typename Write>
void Responder::on_loop(bool completes, Write write) {
  in_order([this, completes, write = std::move(write)]() mutable {
    if (state_ != State::kOpen) return;
    auto connection = connection_.lock();
    if (connection && write(*connection) && completes) state_ = State::kComplete;
  });
}

void Responder::in_order(std::function<void()> call) {
  {
    std::lock_guard lock(pending_mutex_);
    pending_.push_back(std::move(call));
  }
  // Whichever of these posts runs first runs every call queued by then.
  if (loop_->post([self = shared_from_this()] { self->run_pending(); })) return;
  // The server has stopped: none of them will run. (Freed after the lock is released.)
  std::deque<std::function<void()>> dropped;
  std::lock_guard lock(pending_mutex_);
  dropped.swap(pending_);
}

void Responder::run_pending() {
  std::deque<std::function<void()>> calls;
  {
    std::lock_guard lock(pending_mutex_);
    calls.swap(pending_);
  }
  for (auto& call : calls) call();
}

void Responder::respond(int status, std::string content_type, std::string body, Headers headers) {
  on_loop(/*completes=*/true, [status, content_type = std::move(content_type), body = std::move(body),
                               headers = std::move(headers)](Connection& connection) mutable {
    return connection.respond(status, content_type, std::move(body), headers);
  });
}

void Responder::start_stream(int status, std::string content_type, Headers headers) {
  on_loop(/*completes=*/false,
          [status, content_type = std::move(content_type), headers = std::move(headers)](
              Connection& connection) { return connection.start_stream(status, content_type, headers); });
}

void Responder::send_chunk(std::string data) {
  on_loop(/*completes=*/false,
          [data = std::move(data)](Connection& connection) { return connection.send_chunk(data); });
}

void Responder::finish_stream() {
  on_loop(/*completes=*/true, [](Connection& connection) { return connection.finish_stream(); });
}

void Responder::on_disconnect(std::function<void()> callback) {
  in_order([this, callback = std::move(callback)]() mutable {
    // The client may have left before this registration reached the loop.
    if (state_ == State::kLost) run_disconnect_callback(callback);
    if (state_ == State::kOpen) on_disconnect_ = std::move(callback);
  });
}

void Responder::connection_lost() {
  if (state_ != State::kOpen) return;
  state_ = State::kLost;
  if (on_disconnect_) run_disconnect_callback(std::exchange(on_disconnect_, nullptr));
}

}  // namespace dsinfer::server::detail
