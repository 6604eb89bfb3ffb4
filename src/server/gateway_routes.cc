#include "server/gateway_routes.h"

#include <time.h>

#include <cstdio>
#include <optional>
#include <set>

#include "core/strings.h"
#include "model/kv_cache.h"
#include "openai/openai_errors.h"

namespace dsinfer::server {
namespace {


// "2026-11-24T20:31:44.123456+00:00", as Python's datetime.now(timezone.utc).isoformat() writes it.
std::string utc_timestamp_now() {
  const auto now = std::chrono::system_clock::now();
  const time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1'000'000;
  tm parts{};
  gmtime_r(&seconds, &parts);
  char text[64];
  const size_t length = strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &parts);
  std::snprintf(text + length, sizeof(text) - length, ".%06lld+00:00", static_cast<long long>(micros));
  return text;
}

Json null_if_empty(const std::string& text) { return text.empty() ? Json() : Json(text); }

int64_t pool_tokens(const runtime::EngineStats& stats) { return stats.total_pages * model::kPageSize; }
int64_t used_tokens(const runtime::EngineStats& stats) {
  return (stats.total_pages - stats.free_pages) * model::kPageSize;
}
double token_usage(const runtime::EngineStats& stats) {
  return stats.total_pages > 0 ? static_cast<double>(stats.total_pages - stats.free_pages) / stats.total_pages : 0.0;
}

// The value of `key` in a query string ("dp_rank=0&format=json"); nullopt when absent.
std::optional<std::string_view> query_value(std::string_view query, std::string_view key) {
  while (!query.empty()) {
    const size_t end = query.find('&');
    std::string_view pair = query.substr(0, end);
    query = end == std::string_view::npos ? std::string_view() : query.substr(end + 1);
    const size_t equals = pair.find('=');
    if (pair.substr(0, equals) == key) return equals == std::string_view::npos ? "" : pair.substr(equals + 1);
  }
  return std::nullopt;
}

// /v1/loads's query, as SGLang reads it: one data-parallel rank here (0), JSON only, and the
// sections it knows (this server has only the core one; the others are absent, as SGLang leaves
// out a section a worker lacks).
void check_loads_query(std::string_view query) {
  if (auto rank = query_value(query, "dp_rank"); rank && *rank != "0")
    throw invalid_request(str_cat("dp_rank ", *rank, " does not exist: this server has one data-parallel rank (0); "
                                  "several arrive with issue 11"),
                          "dp_rank");
  if (auto format = query_value(query, "format"); format && *format != "json")
    throw invalid_request(str_cat("format '", *format, "' is not supported here: /v1/loads answers JSON; the "
                                  "Prometheus figures are at GET /metrics"),
                          "format");
  if (auto include = query_value(query, "include")) {
    static const std::set<std::string, std::less<>> kSections = {"core", "memory", "spec", "lora",
                                                                 "disagg", "queues", "all"};
    for (const std::string& section : split(*include, ','))
      if (!kSections.contains(trim(section)))
        throw invalid_request(str_cat("include section '", trim(section), "' is not known (core, memory, spec, "
                                      "lora, disagg, queues, all)"),
                              "include");
  }
}

}  // namespace

bool is_gateway_path(std::string_view path) {
  return path == "/server_info" || path == "/get_server_info" || path == "/model_info" || path == "/get_model_info" ||
         path == "/v1/loads" || path == "/flush_cache" || path == "/health_generate";
}

bool gateway_path_needs_api_key(std::string_view path) { return is_gateway_path(path) && path != "/health_generate"; }

Json server_info_json(const WorkerIdentity& identity, const runtime::EngineConfig& config,
                      const runtime::EngineStats& stats, int64_t max_model_len, double generation_throughput) {
  const std::string& model_path =
      identity.gateway.model_path.empty() ? identity.served_model_name : identity.gateway.model_path;
  Json out = Json::object();
  // SGLang's server arguments, where dsinfer has the same setting.
  out["model_path"] = model_path;
  out["tokenizer_path"] = identity.gateway.tokenizer_path.empty() ? model_path : identity.gateway.tokenizer_path;
  out["served_model_name"] = identity.served_model_name;
  out["context_length"] = max_model_len;
  out["max_running_requests"] = config.max_num_seqs;
  out["chunked_prefill_size"] = config.max_num_batched_tokens;
  out["max_prefill_tokens"] = config.max_num_batched_tokens;
  out["page_size"] = model::kPageSize;
  out["disable_radix_cache"] = !config.enable_prefix_caching;
  out["enable_hierarchical_cache"] = config.host_kv_cache.enabled();  // issue 14: the host KV tier
  out["random_seed"] = static_cast<int64_t>(config.seed);
  out["tp_size"] = identity.gateway.tp_size;
  out["dp_size"] = identity.gateway.dp_size;
  out["ep_size"] = identity.gateway.ep_size;
  out["pp_size"] = 1;
  // SGLang's words: null for a server that runs both phases.
  const InstanceRole role = identity.gateway.role;
  out["disaggregation_mode"] = role == InstanceRole::kPrefill ? "prefill" : role == InstanceRole::kDecode ? "decode" : "null";
  if (role == InstanceRole::kPrefill) out["disaggregation_bootstrap_port"] = static_cast<int64_t>(identity.gateway.bootstrap_port);
  out["reasoning_parser"] = null_if_empty(identity.reasoning_parser);
  out["tool_call_parser"] = null_if_empty(identity.tool_call_parser);
  // Speculative decoding: SGLang's fields (MTP drafting is its EAGLE, one chain: top-k 1, the last
  // token and N drafts verified a step), and vLLM's speculative_config as dsinfer reads it.
  const runtime::SpeculativeConfig& speculative = config.speculative;
  const bool drafting = speculative.enabled();
  out["speculative_algorithm"] = drafting ? Json("EAGLE") : Json();
  out["speculative_num_steps"] = drafting ? Json(speculative.num_tokens) : Json();
  out["speculative_eagle_topk"] = drafting ? Json(1) : Json();
  out["speculative_num_draft_tokens"] = drafting ? Json(speculative.num_tokens + 1) : Json();
  out["speculative_config"] = drafting ? Json::parse(speculative.describe()) : Json();
  // SGLang's scheduler information.
  out["max_total_num_tokens"] = pool_tokens(stats);
  out["max_req_input_len"] = max_model_len - 1;
  Json state = Json::object();
  state["num_running_reqs"] = stats.running;
  state["num_waiting_reqs"] = stats.waiting;
  state["num_used_tokens"] = used_tokens(stats);
  state["token_usage"] = token_usage(stats);
  state["last_gen_throughput"] = generation_throughput;
  state["num_preemptions"] = stats.preemptions;
  out["internal_states"] = Json::array();
  out["internal_states"].push_back(std::move(state));
  out["version"] = identity.version;
  out["commit"] = identity.commit;
  return out;
}

Json model_info_json(const WorkerIdentity& identity) {
  const std::string& model_path =
      identity.gateway.model_path.empty() ? identity.served_model_name : identity.gateway.model_path;
  Json out = Json::object();
  out["model_path"] = model_path;
  out["tokenizer_path"] = identity.gateway.tokenizer_path.empty() ? model_path : identity.gateway.tokenizer_path;
  out["is_generation"] = true;
  out["preferred_sampling_params"] = nullptr;
  out["weight_version"] = "default";  // SGLang's until weights are updated in place (dsinfer never does)
  out["has_image_understanding"] = false;
  out["has_audio_understanding"] = false;
  out["model_type"] = null_if_empty(identity.gateway.model_type);
  if (identity.gateway.architectures.empty()) {
    out["architectures"] = nullptr;
  } else {
    out["architectures"] = Json::array();
    for (const std::string& name : identity.gateway.architectures) out["architectures"].push_back(name);
  }
  return out;
}

Json loads_json(const runtime::EngineStats& stats, const runtime::EngineConfig& config, double generation_throughput,
                std::string_view version, std::string_view query) {
  check_loads_query(query);
  const double usage = token_usage(stats);
  // Batch slots in use: the share of max_num_seqs that runs now.
  const double utilization =
      config.max_num_seqs > 0 ? static_cast<double>(stats.running) / static_cast<double>(config.max_num_seqs) : 0.0;
  Json load = Json::object();
  load["dp_rank"] = 0;
  load["num_running_reqs"] = stats.running;
  load["num_waiting_reqs"] = stats.waiting;
  load["num_used_tokens"] = used_tokens(stats);
  load["max_total_num_tokens"] = pool_tokens(stats);
  load["token_usage"] = usage;
  load["gen_throughput"] = generation_throughput;
  load["cache_hit_rate"] =
      stats.prefix_queries > 0 ? static_cast<double>(stats.prefix_hits) / static_cast<double>(stats.prefix_queries)
                               : 0.0;
  load["utilization"] = utilization;
  load["max_running_requests"] = config.max_num_seqs;
  load["num_total_reqs"] = stats.running + stats.waiting;

  Json aggregate = Json::object();  // over one rank: the rank's own figures
  aggregate["total_running_reqs"] = stats.running;
  aggregate["total_waiting_reqs"] = stats.waiting;
  aggregate["total_reqs"] = stats.running + stats.waiting;
  aggregate["total_used_tokens"] = used_tokens(stats);
  aggregate["avg_token_usage"] = usage;
  aggregate["avg_throughput"] = generation_throughput;
  aggregate["avg_utilization"] = utilization;

  Json out = Json::object();
  out["timestamp"] = utc_timestamp_now();
  out["version"] = std::string(version);
  out["dp_rank_count"] = 1;
  out["loads"] = Json::array();
  out["loads"].push_back(std::move(load));
  out["aggregate"] = std::move(aggregate);
  return out;
}

GatewayRoutes::GatewayRoutes(WorkerIdentity identity)
    : identity_(std::move(identity)), health_(identity_.gateway.health_generate_timeout) {}

double GatewayRoutes::generation_throughput(runtime::Engine& engine) {
  const auto now = std::chrono::steady_clock::now();
  const uint64_t tokens = engine.metrics().generation_tokens.load();
  std::lock_guard<std::mutex> lock(throughput_mutex_);
  const double elapsed = std::chrono::duration<double>(now - sampled_at_).count();
  if (sampled_at_ == std::chrono::steady_clock::time_point{}) {
    sampled_at_ = now;
    sampled_tokens_ = tokens;
  } else if (elapsed >= 1.0) {
    throughput_ = static_cast<double>(tokens - sampled_tokens_) / elapsed;
    sampled_at_ = now;
    sampled_tokens_ = tokens;
  }
  return throughput_;
}

void GatewayRoutes::answer(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder,
                           runtime::Engine& engine) {
  const std::string_view path = request.path();
  if (request.method != "GET") throw method_not_allowed(request.method, path);
  auto respond_json = [&](const Json& body) { responder->respond(200, "application/json", body.dump()); };
  if (path == "/server_info" || path == "/get_server_info")
    return respond_json(server_info_json(identity_, engine.config(), engine.stats(), engine.max_model_len(),
                                         generation_throughput(engine)));
  if (path == "/model_info" || path == "/get_model_info") return respond_json(model_info_json(identity_));
  if (path == "/v1/loads") {
    const std::string_view target = request.target;
    const size_t question = target.find('?');
    const std::string_view query = question == std::string_view::npos ? "" : target.substr(question + 1);
    return respond_json(
        loads_json(engine.stats(), engine.config(), generation_throughput(engine), identity_.version, query));
  }
  if (path == "/health_generate") {
    if (!engine.healthy()) throw ProtocolError(503, str_cat("The health check failed: ", engine.fatal_error()));
    return health_.probe(engine, responder);
  }
  throw route_not_found(request.method, path);
}

void GatewayRoutes::flush_cache(runtime::Engine& engine, HttpResponder& responder) {
  if (!engine.flush_prefix_cache()) {
    const runtime::EngineStats stats = engine.stats();
    throw invalid_request(str_cat("The cache was not flushed: ", stats.running, " requests are running and ",
                                  stats.waiting, " waiting (the prefix cache is flushed only when none are). "
                                  "Try again once the server is idle."));
  }
  responder.respond(200, "text/plain", "Cache flushed.\n");
}

}  // namespace dsinfer::server
