#include "router/worker_registry.h"

#include <algorithm>
#include <set>
#include <utility>

#include "core/error.h"
#include "http/http.h"

namespace dsinfer::router {
namespace {

// The weight of the newest answer in a D's average output length: about the last ten answers count.
constexpr double kOutputAverageWeight = 0.1;

int64_t int_field(const Json& object, std::string_view key) {
  const Json* value = object.find(key);
  return value != nullptr && value->is_number() ? value->as_int() : 0;
}

}  // namespace

std::string_view role_name(WorkerRole role) { return role == WorkerRole::kPrefill ? "prefill" : "decode"; }

int64_t Worker::load() const {
  if (!reported) return in_flight;
  return std::max(in_flight, reported->requests + in_flight - reported->router_in_flight_then);
}

int64_t Worker::remaining_slots() const { return std::max<int64_t>(0, slots - load()); }

WorkerRegistry::WorkerRegistry(const std::vector<WorkerSpec>& specs, const RegistryOptions& options)
    : options_(options) {
  std::set<std::string> seen;
  workers_.reserve(specs.size());
  for (const WorkerSpec& spec : specs) {
    const server::Url url = server::parse_url(spec.url);
    DSINFER_CHECK(url.path.empty(), "worker URL ", spec.url, ": give the server's root (http://host:port), "
                  "without a path");
    const std::string canonical = str_cat("http://", url.host.find(':') != std::string::npos ? "[" + url.host + "]"
                                                                                                : url.host,
                                          ":", url.port);
    DSINFER_CHECK(seen.insert(canonical).second, "worker ", canonical, " is given twice");
    Worker& worker = workers_.emplace_back(spec.role, canonical, url.host, url.port,
                                           spec.role == WorkerRole::kPrefill ? options.prefix_record_blocks : 0);
    worker.bootstrap_port = spec.bootstrap_port;
    worker.slots = options.decode_slots.value_or(options.default_decode_slots);
    worker.problem = "not checked yet";
  }
}

size_t WorkerRegistry::healthy_count(WorkerRole role) const {
  return static_cast<size_t>(
      std::count_if(workers_.begin(), workers_.end(), [role](const Worker& w) { return w.role == role && w.healthy; }));
}

bool WorkerRegistry::mark_healthy(size_t id) {
  Worker& worker = workers_[id];
  worker.problem.clear();
  return !std::exchange(worker.healthy, true);
}

bool WorkerRegistry::mark_unhealthy(size_t id, std::string problem) {
  Worker& worker = workers_[id];
  worker.problem = std::move(problem);
  worker.prefixes.clear();  // a worker that failed may have restarted with an empty cache
  worker.reported.reset();
  return std::exchange(worker.healthy, false);
}

std::string WorkerRegistry::apply_server_info(size_t id, const Json& info) {
  Worker& worker = workers_[id];
  const std::string_view role = role_name(worker.role);
  if (const Json* mode = info.find("disaggregation_mode"); mode != nullptr && mode->is_string()) {
    const std::string& said = mode->as_string();
    if (said == "null")
      return str_cat(worker.url, " runs both phases (/server_info: disaggregation_mode \"null\") but was given as a ",
                     role, " instance: start it with --disaggregation-mode ", role);
    if (said != role)
      return str_cat(worker.url, " is a ", said, " instance (/server_info: disaggregation_mode \"", said,
                     "\") but was given as a ", role, " instance: list it under --", said,
                     ", or start it with --disaggregation-mode ", role);
  }
  if (worker.role == WorkerRole::kPrefill && !worker.bootstrap_port) {
    const int64_t port = int_field(info, "disaggregation_bootstrap_port");
    if (port <= 0 || port > 65535)
      return str_cat(worker.url, "'s bootstrap port is unknown (/server_info has no disaggregation_bootstrap_port): "
                     "give it after the URL, --prefill ", worker.url, " PORT");
    worker.bootstrap_port = static_cast<uint16_t>(port);
  }
  if (worker.role == WorkerRole::kDecode && !options_.decode_slots) {
    const int64_t batch = int_field(info, "max_running_requests");
    worker.slots = batch > 0 ? batch : options_.default_decode_slots;
  }
  return "";
}

void WorkerRegistry::apply_loads(size_t id, const Json& loads) {
  Worker& worker = workers_[id];
  const Json* ranks = loads.find("loads");
  if (ranks == nullptr || !ranks->is_array()) return;
  ReportedLoad load;
  for (const Json& rank : ranks->as_array()) {
    load.requests += int_field(rank, "num_running_reqs") + int_field(rank, "num_waiting_reqs");
    load.used_tokens += int_field(rank, "num_used_tokens");
    load.total_tokens += int_field(rank, "max_total_num_tokens");
    if (const Json* rate = rank.find("gen_throughput"); rate != nullptr && rate->is_number())
      load.generation_throughput += rate->as_double();
  }
  load.router_in_flight_then = worker.in_flight;
  worker.reported = load;
}

void WorkerRegistry::record_output(size_t id, int64_t tokens) {
  Worker& worker = workers_[id];
  const double value = static_cast<double>(tokens);
  double& average = worker.average_output_tokens;
  average = worker.answers == 0 ? value : average + kOutputAverageWeight * (value - average);
  ++worker.answers;
}

}  // namespace dsinfer::router
