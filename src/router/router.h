// `dsinfer router`: the prefill/decode coordinator in front of prefill (P) and decode (D)
// instances, speaking SGLang's PD worker protocol (SGLang Model Gateway speaks the same to its
// workers), so dsinfer workers and this router each work with SGLang's.
//
//   POST /v1/chat/completions, /v1/completions   one P and one D per request (placement.h), the
//                                                request admitted on a D slot or queued
//                                                (admission.h), proxied (exchange.h)
//   GET  /v1/models, /v1/models/{id}             a healthy D's answer
//   GET  /health                                 200 while a P and a D are healthy, else 503
//   GET  /metrics                                the router's own (router_metrics.h)
//
// The HTTP server's loop only parses and places; calls to the workers run on one HttpClient loop;
// a housekeeping thread starts the health checks (health_checker.h) and expires queued requests.
// The registry, the queue and the counters share one mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "http/http.h"
#include "router/admission.h"
#include "router/exchange.h"
#include "router/health_checker.h"
#include "router/placement.h"
#include "router/router_metrics.h"
#include "router/worker_registry.h"

namespace dsinfer::router {

struct RouterOptions {
  server::HttpServerOptions http;  // the router's own address, limits and timeouts
  std::vector<WorkerSpec> workers;
  RegistryOptions registry;
  HealthCheckOptions health;
  BalanceThresholds balance;
  size_t prefix_block_chars = 256;    // about one 64-token KV page of text
  size_t decode_absorbs_below = 0;    // prompts shorter than this (characters) go to a D alone; 0: off
  size_t max_queued_requests = 256;
  std::chrono::milliseconds queue_timeout{60'000};
  std::chrono::milliseconds scale_out_window{30'000};
  int max_retries = 1;
  double request_timeout_seconds = 1800;  // a call to a worker, whole
  std::optional<uint64_t> seed;           // of the bootstrap rooms; empty: from the OS
};

class Router : private ExchangeHost {
 public:
  explicit Router(RouterOptions options);  // throws dsinfer::Error for a bad worker list
  ~Router() override;
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  void start();  // listens (throws dsinfer::Error naming the address), starts the checks
  void stop();   // stops listening, cancels the calls in flight
  uint16_t port() const;
  bool ready() const;  // a P and a D are healthy (GET /health)
  std::string metrics_text() const;

 private:
  void handle(const server::HttpRequest& request, std::shared_ptr<server::HttpResponder> responder);
  void handle_generation(const server::HttpRequest& request, const std::shared_ptr<server::HttpResponder>& responder);
  void forward_models(const server::HttpRequest& request, const std::shared_ptr<server::HttpResponder>& responder);
  // Places or queues the exchange (`id`: its place in the queue); answers it at once when it can be
  // neither.
  void admit(const std::shared_ptr<Exchange>& exchange, uint64_t id);
  // Starts queued exchanges while places free up.
  void dispatch();
  // The pair's calls' addresses, a new room, and the reservation (mutex held).
  Route reserve(const Placement& placement, const ExchangeRequest& request);
  void housekeeping();

  // ExchangeHost
  server::HttpClient& client() override { return *client_; }
  double request_timeout_seconds() const override { return options_.request_timeout_seconds; }
  int max_retries() const override { return options_.max_retries; }
  std::optional<Route> reroute(const ExchangeRequest& request, std::span<const size_t> failed) override;
  void prefill_done(size_t worker) override;
  void decode_done(size_t worker, std::optional<int64_t> output_tokens) override;
  void connection_failed(size_t worker, const std::string& error) override;

  const RouterOptions options_;
  mutable std::mutex mutex_;
  WorkerRegistry workers_;
  AdmissionQueue queue_;
  std::map<uint64_t, std::shared_ptr<Exchange>> queued_;  // by request id
  std::atomic<uint64_t> next_request_id_{1};
  std::mt19937_64 rooms_;
  RouterCounters counters_;
  bool stopping_ = false;

  std::unique_ptr<server::HttpClient> client_;
  std::unique_ptr<HealthChecker> health_;
  std::unique_ptr<server::HttpServer> server_;
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool housekeeping_done_ = false;
  std::thread housekeeper_;
};

}  // namespace dsinfer::router
