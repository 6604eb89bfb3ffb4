#include "router/health_checker.h"

#include <algorithm>

#include "core/log.h"

namespace dsinfer::router {
namespace {

// A check may take at most this long, and no longer than its interval, so checks never pile up.
constexpr double kMaxCheckSeconds = 5.0;

std::string describe_failure(const server::HttpClientResponse& response) {
  if (!response.error.empty()) return response.error;
  return str_cat("answered ", response.status);
}

}  // namespace

HealthChecker::HealthChecker(server::HttpClient& client, std::mutex& mutex, WorkerRegistry& workers,
                             HealthCheckOptions options, std::function<void()> on_change)
    : client_(client),
      mutex_(mutex),
      workers_(workers),
      options_(std::move(options)),
      on_change_(std::move(on_change)),
      schedule_(workers.size()) {}

server::HttpCall HealthChecker::call(size_t id, std::string target) const {
  const Worker& worker = workers_[id];
  server::HttpCall call;
  call.method = "GET";
  call.host = worker.host;
  call.port = worker.port;
  call.target = std::move(target);
  call.timeout_seconds =
      std::clamp(std::chrono::duration<double>(options_.interval).count(), 0.05, kMaxCheckSeconds);
  if (!options_.api_key.empty()) call.headers.emplace_back("Authorization", "Bearer " + options_.api_key);
  return call;
}

void HealthChecker::tick(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (stopped_) return;
  for (size_t id = 0; id < workers_.size(); ++id) {
    Schedule& due = schedule_[id];
    if (!due.checking && now >= due.next_check) {
      due.next_check = now + options_.interval;
      check(id);
    }
    if (workers_[id].role == WorkerRole::kDecode && workers_[id].healthy && !due.polling && now >= due.next_loads) {
      due.next_loads = now + options_.load_interval;
      poll_loads(id);
    }
  }
}

void HealthChecker::report_failure(size_t id, const std::string& error) {
  std::lock_guard lock(mutex_);
  mark_unhealthy(id, str_cat("a request could not reach it: ", error));
  schedule_[id].next_check = Clock::time_point{};  // due at the next tick
}

void HealthChecker::stop() {
  std::lock_guard lock(mutex_);
  stopped_ = true;
}

void HealthChecker::check(size_t id) {
  schedule_[id].checking = true;
  server::HttpCall probe = call(id, "/health");
  probe.on_done = [this, id](const server::HttpClientResponse& response) { on_health(id, response); };
  client_.start(std::move(probe));
}

void HealthChecker::on_health(size_t id, const server::HttpClientResponse& response) {
  std::lock_guard lock(mutex_);
  if (stopped_) return;
  if (!response.error.empty() || response.status != 200) {
    schedule_[id].checking = false;
    mark_unhealthy(id, str_cat("GET /health ", describe_failure(response)));
    return;
  }
  if (workers_[id].healthy) {
    schedule_[id].checking = false;
    return;
  }
  // Back (or up for the first time): it may have restarted with another configuration.
  server::HttpCall info = call(id, "/server_info");
  info.on_done = [this, id](const server::HttpClientResponse& answer) { on_server_info(id, answer); };
  client_.start(std::move(info));
}

void HealthChecker::on_server_info(size_t id, const server::HttpClientResponse& response) {
  bool changed = false;
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    schedule_[id].checking = false;
    if (!response.error.empty()) return mark_unhealthy(id, str_cat("GET /server_info ", response.error));
    Json info;  // none when the worker has no /server_info: the command line and defaults then stand
    if (response.status == 200) {
      try {
        info = Json::parse(response.body);
      } catch (const Error& error) {
        return mark_unhealthy(id, str_cat("GET /server_info: ", error.what()));
      }
    }
    if (const std::string problem = workers_.apply_server_info(id, info); !problem.empty())
      return mark_unhealthy(id, problem);
    const Worker& worker = workers_[id];
    if (workers_.mark_healthy(id)) {
      changed = true;
      if (worker.role == WorkerRole::kPrefill) {
        log_info("router: prefill instance ", worker.url, " is healthy (bootstrap port ", *worker.bootstrap_port, ")");
      } else {
        log_info("router: decode instance ", worker.url, " is healthy (", worker.slots, " slots)");
      }
    }
    schedule_[id].next_loads = Clock::time_point{};  // a decode instance's load, at the next tick
  }
  if (changed && on_change_) on_change_();
}

void HealthChecker::poll_loads(size_t id) {
  schedule_[id].polling = true;
  server::HttpCall poll = call(id, "/v1/loads");
  poll.on_done = [this, id](const server::HttpClientResponse& response) { on_loads(id, response); };
  client_.start(std::move(poll));
}

void HealthChecker::on_loads(size_t id, const server::HttpClientResponse& response) {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    schedule_[id].polling = false;
    if (!response.error.empty() || response.status != 200) {
      log_debug("router: GET /v1/loads of ", workers_[id].url, " ", describe_failure(response));
      return;  // the health check decides about the worker; its last load is kept
    }
    try {
      workers_.apply_loads(id, Json::parse(response.body));
    } catch (const Error& error) {
      log_debug("router: GET /v1/loads of ", workers_[id].url, ": ", error.what());
      return;
    }
  }
  if (on_change_) on_change_();
}

void HealthChecker::mark_unhealthy(size_t id, std::string problem) {
  const std::string url = workers_[id].url;
  const std::string_view role = role_name(workers_[id].role);
  const bool was_healthy = workers_[id].healthy;
  const bool same_problem = workers_[id].problem == problem;
  workers_.mark_unhealthy(id, problem);
  // Logged when it stops getting traffic, and when the reason it gets none changes (a refused
  // configuration is said once, not every interval).
  if (was_healthy || !same_problem) log_warning("router: ", role, " instance ", url, " gets no traffic: ", problem);
}

}  // namespace dsinfer::router
