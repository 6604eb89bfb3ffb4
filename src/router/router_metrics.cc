#include "router/router_metrics.h"

#include "core/error.h"

namespace dsinfer::router {
namespace {

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += str_cat("# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

std::string labels(const WorkerSample& worker) {
  return str_cat("{worker=\"", worker.url, "\",role=\"", role_name(worker.role), "\"}");
}

template <typename Value>
void per_worker(std::string& out, const RouterSample& sample, const char* name, const char* help, bool decode_only,
                Value value) {
  header(out, name, "gauge", help);
  for (const WorkerSample& worker : sample.workers)
    if (!decode_only || worker.role == WorkerRole::kDecode)
      out += str_cat(name, labels(worker), " ", value(worker), "\n");
}

void single(std::string& out, const char* name, const char* type, const char* help, double value) {
  header(out, name, type, help);
  out += str_cat(name, " ", value, "\n");
}

}  // namespace

std::vector<WorkerSample> sample_workers(const WorkerRegistry& workers) {
  std::vector<WorkerSample> samples;
  for (size_t id = 0; id < workers.size(); ++id) {
    const Worker& worker = workers[id];
    samples.push_back({worker.url, worker.role, worker.healthy, worker.in_flight, worker.slots,
                       worker.role == WorkerRole::kDecode ? worker.remaining_slots() : 0,
                       worker.average_output_tokens});
  }
  return samples;
}

std::string format_router_metrics(const RouterSample& sample) {
  std::string out;
  per_worker(out, sample, "dsinfer_router_worker_healthy", "1 when the worker passes its health check and gets traffic",
             false, [](const WorkerSample& w) { return w.healthy ? 1 : 0; });
  per_worker(out, sample, "dsinfer_router_worker_in_flight", "requests the router has on the worker now", false,
             [](const WorkerSample& w) { return w.in_flight; });
  per_worker(out, sample, "dsinfer_router_decode_slots", "requests the decode instance may hold at once", true,
             [](const WorkerSample& w) { return w.slots; });
  per_worker(out, sample, "dsinfer_router_decode_slots_remaining",
             "slots left: the budget less the larger of the router's requests and the instance's own count", true,
             [](const WorkerSample& w) { return w.remaining_slots; });
  per_worker(out, sample, "dsinfer_router_decode_average_output_tokens",
             "moving average of the output tokens of the decode instance's answers", true,
             [](const WorkerSample& w) { return w.average_output_tokens; });
  single(out, "dsinfer_router_queue_length", "gauge", "requests waiting for a decode slot",
         static_cast<double>(sample.queued));
  single(out, "dsinfer_router_queue_capacity", "gauge", "requests that may wait (--max-queued-requests)",
         static_cast<double>(sample.queue_capacity));
  if (sample.scale_out.drain_seconds)
    single(out, "dsinfer_router_queue_drain_seconds", "gauge",
           "expected time to admit the queue: queued x average output tokens / output tokens per second",
           *sample.scale_out.drain_seconds);
  single(out, "dsinfer_router_scale_out_recommended", "gauge",
         "1 when requests queued for a whole --scale-out-window, or the queue drains slower than that window",
         sample.scale_out.recommended ? 1 : 0);
  const RouterCounters& c = sample.counters;
  single(out, "dsinfer_router_requests_total", "counter", "requests received", static_cast<double>(c.requests));
  single(out, "dsinfer_router_rejected_total", "counter", "requests refused with 503 (queue full or no healthy worker)",
         static_cast<double>(c.queue_full));
  single(out, "dsinfer_router_queue_timeouts_total", "counter", "requests refused after waiting --queue-timeout",
         static_cast<double>(c.queue_timeouts));
  single(out, "dsinfer_router_retries_total", "counter", "requests sent to a second pair after a failed connection",
         static_cast<double>(c.retries));
  single(out, "dsinfer_router_connection_failures_total", "counter", "calls that could not reach their worker",
         static_cast<double>(c.connection_failures));
  return out;
}

}  // namespace dsinfer::router
