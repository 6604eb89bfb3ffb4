#include "server/in_flight_requests.h"

#include <condition_variable>
#include <mutex>
#include <unordered_set>
#include <utility>
#include <vector>

namespace dsinfer::server {

struct InFlightRequests::Request::State {
  mutable std::mutex mutex;
  mutable std::condition_variable idle;
  std::unordered_set<Request*> requests;
  bool draining = false;
  bool cutting_short = false;
};

void InFlightRequests::Request::running_as(runtime::Engine& engine, runtime::RequestId id) {
  {
    std::lock_guard lock(state_->mutex);
    if (finished_) return;  // its last output came first
    engine_ = &engine;
    ids_.push_back(id);
    if (!state_->cutting_short) return;
    cut_short_ = true;
  }
  engine.abort(id);  // outside the lock: the engine takes its own
}

bool InFlightRequests::Request::cut_short() const {
  std::lock_guard lock(state_->mutex);
  return cut_short_;
}

void InFlightRequests::Request::finish() {
  std::lock_guard lock(state_->mutex);
  if (finished_) return;
  finished_ = true;
  state_->requests.erase(this);
  if (state_->requests.empty()) state_->idle.notify_all();
}

InFlightRequests::InFlightRequests() : state_(std::make_shared<Request::State>()) {}

std::shared_ptr<InFlightRequests::Request> InFlightRequests::admit() {
  std::shared_ptr<Request> request(new Request(state_));
  std::lock_guard lock(state_->mutex);
  request->cut_short_ = state_->cutting_short;
  state_->requests.insert(request.get());
  return request;
}

void InFlightRequests::begin_draining() {
  std::lock_guard lock(state_->mutex);
  state_->draining = true;
}

bool InFlightRequests::draining() const {
  std::lock_guard lock(state_->mutex);
  return state_->draining;
}

size_t InFlightRequests::count() const {
  std::lock_guard lock(state_->mutex);
  return state_->requests.size();
}

bool InFlightRequests::wait_until_idle(Clock::time_point deadline) const {
  std::unique_lock lock(state_->mutex);
  return state_->idle.wait_until(lock, deadline, [&] { return state_->requests.empty(); });
}

void InFlightRequests::cut_short_all() {
  std::vector<std::pair<runtime::Engine*, runtime::RequestId>> running;
  {
    std::lock_guard lock(state_->mutex);
    state_->cutting_short = true;
    for (Request* request : state_->requests) {
      request->cut_short_ = true;
      for (runtime::RequestId id : request->ids_) running.emplace_back(request->engine_, id);
    }
  }
  for (const auto& [engine, id] : running) engine->abort(id);
}

ProtocolError cut_short_by_shutdown() {
  return ProtocolError(503, "The server shut down before this request finished. Retry on another instance.");
}

}  // namespace dsinfer::server
