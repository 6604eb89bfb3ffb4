// The requests the server has taken on and not yet answered in full, for a graceful drain.
//
// A request counts from the moment the server accepts it for preparation (request_workers.h)
// until its last output has been handed to its responder. On SIGTERM the server drains: it takes
// no new requests, waits for these to finish, and past --shutdown-timeout cuts the rest short:
// each running one is aborted in the engine (its stream then ends with an error event and
// [DONE], a whole answer becomes a 503), and one still being prepared is refused when it gets
// to the engine.
//
// The state is shared with every request, since the engine may deliver a request's last output
// after the server is gone.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "runtime/engine.h"
#include "openai/openai_errors.h"

namespace dsinfer::server {

class InFlightRequests {
 public:
  using Clock = std::chrono::steady_clock;

  // One request's place in the count. It leaves the count at finish() or when destroyed.
  class Request {
   public:
    ~Request() { finish(); }
    Request(const Request&) = delete;
    Request& operator=(const Request&) = delete;

    // One of the request's engine requests (a request with n > 1 or batched prompts has one per
    // choice) now runs in `engine` as `id`. Aborts it there at once when the drain has already cut
    // requests short.
    void running_as(runtime::Engine& engine, runtime::RequestId id);
    // The drain's deadline passed while this request was in flight: its end is an error.
    bool cut_short() const;
    void finish();

   private:
    friend class InFlightRequests;
    struct State;
    explicit Request(std::shared_ptr<State> state) : state_(std::move(state)) {}

    std::shared_ptr<State> state_;
    runtime::Engine* engine_ = nullptr;  // guarded by the state's mutex, as are the three below
    std::vector<runtime::RequestId> ids_;
    bool cut_short_ = false;
    bool finished_ = false;
  };

  InFlightRequests();

  // A new request in the count, whether or not the server is draining (the server refuses new
  // work itself; this only counts what it took).
  std::shared_ptr<Request> admit();

  void begin_draining();  // draining() is true from now on
  bool draining() const;
  size_t count() const;
  // Blocks until no request is in flight or `deadline` passes; returns whether none is left.
  bool wait_until_idle(Clock::time_point deadline) const;
  // Cuts every request in flight short (see Request::cut_short), and every one admitted later.
  void cut_short_all();

 private:
  std::shared_ptr<Request::State> state_;
};

// The answer of a request the drain cut short (a 503: another instance can take it).
ProtocolError cut_short_by_shutdown();

}  // namespace dsinfer::server
