#include "server/health_generate.h"

#include <algorithm>
#include <atomic>

#include "core/strings.h"
#include "openai/openai_errors.h"

namespace dsinfer::server {

struct HealthProbes::Probe {
  std::shared_ptr<HttpResponder> responder;
  std::chrono::steady_clock::time_point deadline;
  runtime::Engine* engine = nullptr;
  runtime::RequestId id = 0;
  std::atomic<bool> answered{false};

  // The first of the engine's end and the watchdog answers; the other finds it done.
  bool claim() { return !answered.exchange(true); }
};

namespace {

void respond_unhealthy(HttpResponder& responder, const std::string& why) {
  responder.respond(503, "application/json", error_body(503, str_cat("The health check failed: ", why)));
}

}  // namespace

HealthProbes::HealthProbes(std::chrono::milliseconds timeout) : timeout_(timeout), watchdog_([this] { watch(); }) {}

HealthProbes::~HealthProbes() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  watchdog_.join();
}

void HealthProbes::probe(runtime::Engine& engine, std::shared_ptr<HttpResponder> responder) {
  auto probe = std::make_shared<Probe>();
  probe->responder = std::move(responder);
  probe->engine = &engine;
  probe->deadline = std::chrono::steady_clock::now() + timeout_;
  runtime::RequestOptions options;
  options.sampling.temperature = 0.0f;
  options.max_tokens = 1;
  options.ignore_eos = true;  // always exactly one token, whatever the model writes
  // The sink holds the probe, not `this`: the engine may deliver after the server is gone.
  auto sink = [probe](const runtime::StreamOutput& output) {
    if (!output.finished || !probe->claim()) return;
    if (output.finish_reason == runtime::FinishReason::kStop || output.finish_reason == runtime::FinishReason::kLength)
      return probe->responder->respond(200, "text/plain", "");
    respond_unhealthy(*probe->responder,
                      output.error.empty() ? str_cat("the one-token generation ended with finish reason '",
                                                     runtime::finish_reason_name(output.finish_reason), "'")
                                           : output.error);
  };
  probe->id = engine.submit({0}, std::move(options), std::move(sink));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(std::move(probe));  // the same timeout for all: deadline order is arrival order
  }
  changed_.notify_all();
}

void HealthProbes::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    // Probes the engine answered leave the list here, so it holds at most one timeout's worth.
    std::erase_if(pending_, [](const std::shared_ptr<Probe>& probe) { return probe->answered.load(); });
    if (pending_.empty()) {
      changed_.wait(lock);
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    std::shared_ptr<Probe> first = pending_.front();
    if (first->deadline > now) {
      changed_.wait_until(lock, first->deadline);
      continue;
    }
    pending_.erase(pending_.begin());
    if (!first->claim()) continue;
    lock.unlock();
    first->engine->abort(first->id);
    respond_unhealthy(*first->responder,
                      str_cat("the one-token generation did not finish within ", timeout_.count(), " ms"));
    lock.lock();
  }
}

}  // namespace dsinfer::server
