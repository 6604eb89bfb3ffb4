// GET /health_generate (SGLang's): the server is healthy when the engine can still generate, which
// /health alone does not show (a wedged engine thread keeps /health at 200). Each probe submits a
// one-token greedy request (prompt: token 0, as SGLang's probe) and answers 200 when it finishes,
// 503 when it fails, is aborted, or does not finish within the timeout (SGLang's default: 20 s).
//
// Nothing blocks the event loop: the engine's output thread answers a finished probe, and one
// watchdog thread answers (and aborts) the probes whose time ran out.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/engine.h"
#include "http/http.h"

namespace dsinfer::server {

class HealthProbes {
 public:
  explicit HealthProbes(std::chrono::milliseconds timeout);
  ~HealthProbes();  // joins the watchdog; probes still pending get no answer (the server is stopping)
  HealthProbes(const HealthProbes&) = delete;
  HealthProbes& operator=(const HealthProbes&) = delete;

  // Starts a probe and returns at once. Throws what Engine::submit throws (EngineUnavailable: the
  // server answers 503).
  void probe(runtime::Engine& engine, std::shared_ptr<HttpResponder> responder);

 private:
  struct Probe;
  void watch();

  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::shared_ptr<Probe>> pending_;  // guarded by mutex_, in deadline order
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace dsinfer::server
