// The prefill (P) and decode (D) instances behind the router and what it knows of each: its address,
// whether it gets traffic, the router's requests on it, and, for a D, its slot budget, its last
// reported load and the average length of its answers. health_checker.h keeps this up to date;
// placement.h reads it.
//
// A worker gets traffic only while healthy: it answered GET /health with 200 and its /server_info
// agrees with its role. It starts unhealthy, and turns unhealthy again on a failed check or a
// failed connection.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "router/prefix_record.h"

namespace dsinfer::router {

enum class WorkerRole { kPrefill, kDecode };
std::string_view role_name(WorkerRole role);  // "prefill", "decode": SGLang's disaggregation_mode

// A worker as the command line gives it.
struct WorkerSpec {
  WorkerRole role = WorkerRole::kDecode;
  std::string url;                          // "http://host:port"
  std::optional<uint16_t> bootstrap_port;   // a P's, when given after its URL
};

// What a D said in its last GET /v1/loads (summed over its data-parallel ranks).
struct ReportedLoad {
  int64_t requests = 0;               // running and waiting
  int64_t used_tokens = 0;            // KV cache tokens in use
  int64_t total_tokens = 0;           // KV cache tokens in all; 0: not reported
  double generation_throughput = 0;   // output tokens per second
  int64_t router_in_flight_then = 0;  // the router's own requests on it when the answer came
};

struct Worker {
  Worker(WorkerRole role, std::string url, std::string host, uint16_t port, size_t prefix_blocks)
      : role(role), url(std::move(url)), host(std::move(host)), port(port), prefixes(prefix_blocks) {}

  WorkerRole role;
  std::string url;
  std::string host;
  uint16_t port;
  std::optional<uint16_t> bootstrap_port;  // P: from the command line, else /server_info
  bool healthy = false;
  std::string problem;  // why it gets no traffic, while it gets none
  int64_t in_flight = 0;  // the router's requests on it now
  // D only.
  int64_t slots = 0;                    // requests it may hold at once
  double average_output_tokens = 0;     // moving average over its finished answers
  int64_t answers = 0;                  // finished answers with a known length
  std::optional<ReportedLoad> reported;
  // P only.
  PrefixRecord prefixes;

  // A D's requests now: the router's own, or, when more, what the D last reported plus what the
  // router has started on it since (other routers' requests count too).
  int64_t load() const;
  int64_t remaining_slots() const;
};

struct RegistryOptions {
  std::optional<int64_t> decode_slots;  // every D's slot budget (--decode-slots)
  int64_t default_decode_slots = 256;   // when neither the flag nor /server_info gives one
  size_t prefix_record_blocks = 1 << 16;
};

class WorkerRegistry {
 public:
  // Throws dsinfer::Error for a URL that does not parse, or the same URL twice.
  WorkerRegistry(const std::vector<WorkerSpec>& specs, const RegistryOptions& options);

  size_t size() const { return workers_.size(); }
  Worker& operator[](size_t id) { return workers_[id]; }
  const Worker& operator[](size_t id) const { return workers_[id]; }
  size_t healthy_count(WorkerRole role) const;

  // Each returns whether the state changed, so that the caller logs a transition once.
  bool mark_healthy(size_t id);
  bool mark_unhealthy(size_t id, std::string problem);  // also forgets its prefixes
  // GET /server_info's answer (null when it gave none): checks disaggregation_mode against the
  // role, takes a P's disaggregation_bootstrap_port and a D's max_running_requests. Returns why the
  // worker cannot serve in its role ("" when it can).
  std::string apply_server_info(size_t id, const Json& info);
  void apply_loads(size_t id, const Json& loads);  // GET /v1/loads's answer
  // A D's finished answer of `tokens` output tokens, into its moving average.
  void record_output(size_t id, int64_t tokens);

 private:
  RegistryOptions options_;
  std::vector<Worker> workers_;
};

}  // namespace dsinfer::router
