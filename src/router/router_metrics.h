// The router's GET /metrics, in Prometheus' text format (0.0.4), under dsinfer_router_ names. Per
// worker (labels worker="http://host:port", role="prefill"|"decode"): healthy, the router's
// requests in flight, and for a decode instance its slot budget, its slots left and its average
// output length. Then the admission queue's length and capacity, the scale-out advice
// (admission.h), and counters of requests, refusals, retries and failed connections.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "router/admission.h"
#include "router/worker_registry.h"

namespace dsinfer::router {

struct RouterCounters {
  uint64_t requests = 0;          // received (placed, queued or refused)
  uint64_t queue_full = 0;        // refused with 503: the queue was full, or no worker was healthy
  uint64_t queue_timeouts = 0;    // waited past --queue-timeout
  uint64_t retries = 0;           // sent to a second pair after a failed connection
  uint64_t connection_failures = 0;
};

struct WorkerSample {
  std::string url;
  WorkerRole role = WorkerRole::kDecode;
  bool healthy = false;
  int64_t in_flight = 0;
  int64_t slots = 0;
  int64_t remaining_slots = 0;
  double average_output_tokens = 0;
};

struct RouterSample {
  std::vector<WorkerSample> workers;
  size_t queued = 0;
  size_t queue_capacity = 0;
  ScaleOutAdvice scale_out;
  RouterCounters counters;
};

// The sample of `workers` as they are now (the caller holds the router's lock).
std::vector<WorkerSample> sample_workers(const WorkerRegistry& workers);
std::string format_router_metrics(const RouterSample& sample);

}  // namespace dsinfer::router
