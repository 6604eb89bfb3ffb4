// Keeps the worker registry (worker_registry.h) true: GET /health on every worker each interval
// and at once after a request failed to reach it; a worker that answers 200 after being unhealthy
// is asked GET /server_info (its role, a prefill instance's bootstrap port, a decode instance's
// batch size) before it gets traffic again; each healthy decode instance is asked GET /v1/loads
// every load interval. Each transition is logged once, with its reason.
//
// Calls go out on the router's HttpClient and their answers come back on its loop thread; the
// registry is read and written under the router's mutex, which the caller shares.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "http/http.h"
#include "router/admission.h"
#include "router/worker_registry.h"

namespace dsinfer::router {

struct HealthCheckOptions {
  std::chrono::milliseconds interval{5'000};       // between /health checks of a worker
  std::chrono::milliseconds load_interval{1'000};  // between /v1/loads polls of a decode instance
  std::string api_key;  // the workers' key, for /server_info and /v1/loads; empty: none
};

class HealthChecker {
 public:
  // `on_change` runs (without the mutex) when a worker turned healthy or reported its load, as a
  // waiting request may now have a place.
  HealthChecker(server::HttpClient& client, std::mutex& mutex, WorkerRegistry& workers, HealthCheckOptions options,
                std::function<void()> on_change);

  // Starts the checks and polls that are due; never blocks. Called often (every few milliseconds).
  void tick(Clock::time_point now);
  // A request could not reach worker `id`: no traffic until a check passes, and the check is due.
  // Takes the mutex.
  void report_failure(size_t id, const std::string& error);
  // From now on, answers change nothing and start no calls (the router is stopping).
  void stop();

 private:
  struct Schedule {
    Clock::time_point next_check{};
    Clock::time_point next_loads{};
    bool checking = false;
    bool polling = false;
  };
  server::HttpCall call(size_t id, std::string target) const;
  void check(size_t id);        // mutex held
  void poll_loads(size_t id);   // mutex held
  void on_health(size_t id, const server::HttpClientResponse& response);
  void on_server_info(size_t id, const server::HttpClientResponse& response);
  void on_loads(size_t id, const server::HttpClientResponse& response);
  void mark_unhealthy(size_t id, std::string problem);  // mutex held; logs a transition

  server::HttpClient& client_;
  std::mutex& mutex_;
  WorkerRegistry& workers_;
  HealthCheckOptions options_;
  std::function<void()> on_change_;
  std::vector<Schedule> schedule_;  // by worker id; under mutex_
  bool stopped_ = false;            // under mutex_
};

}  // namespace dsinfer::router
