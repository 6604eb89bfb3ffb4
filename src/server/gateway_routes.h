// What a router in front of several dsinfer servers reads from each one: SGLang Model Gateway
// (`smg`) and the routers written for SGLang workers register a worker, balance load and probe it
// through these routes, so they carry SGLang's paths and field names.
//
//   GET  /server_info  (/get_server_info)  the serving configuration and the engine's state now
//   GET  /model_info   (/get_model_info)   the model's path, tokenizer and kind
//   GET  /v1/loads                         running and waiting requests, KV tokens used, throughput
//   POST /flush_cache                      empties the prefix cache when nothing runs (else 400)
//   GET  /health_generate                  one token through the engine (health_generate.h)
//
// All but /health_generate need the API key when one is set (SGLang exempts only its health
// routes). /version (engine identity) is answered by the server itself.
//
// /server_info says the instance's prefill/decode role in SGLang's words (disaggregation_mode null,
// prefill or decode) and a prefill instance's bootstrap port (disaggregation_bootstrap_port), which
// routers pass to decode instances (bootstrap_fields.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "runtime/engine.h"
#include "server/bootstrap_fields.h"
#include "server/health_generate.h"
#include "http/http.h"

namespace dsinfer::server {

// What the server reports about its model, beyond the served name (ServerOptions::gateway).
struct GatewayOptions {
  std::string model_path;      // the checkpoint directory; empty: the served model name
  std::string tokenizer_path;  // empty: the model path
  std::string model_type;      // config.json's model_type ("deepseek_v3"); empty: null
  std::vector<std::string> architectures;  // config.json's architectures
  // The parallel layout in SGLang's words: tp_size the ranks in all, dp_size the attention groups,
  // ep_size the ranks the routed experts are split over by expert.
  int tp_size = 1, dp_size = 1, ep_size = 1;
  // Prefill/decode disaggregation: the instance's role, and a prefill instance's bootstrap port
  // (kv_bootstrap.h; 0 for the others).
  InstanceRole role = InstanceRole::kBoth;
  uint16_t bootstrap_port = 0;
  std::chrono::milliseconds health_generate_timeout{20'000};  // SGLang's default
};

// The server's identity as the gateway routes report it.
struct WorkerIdentity {
  std::string served_model_name;
  std::string version;
  std::string commit;
  std::string reasoning_parser;  // "deepseek-r1" or empty
  std::string tool_call_parser;  // empty: none
  GatewayOptions gateway;
};

bool is_gateway_path(std::string_view path);
bool gateway_path_needs_api_key(std::string_view path);

// The answers' bodies, from the engine's figures (exposed for tests).
Json server_info_json(const WorkerIdentity& identity, const runtime::EngineConfig& config,
                      const runtime::EngineStats& stats, int64_t max_model_len, double generation_throughput);
Json model_info_json(const WorkerIdentity& identity);
// /v1/loads; `query` is the target's query string (dp_rank, include and format, as SGLang's).
// Throws a 400 ProtocolError for a query this server cannot answer.
Json loads_json(const runtime::EngineStats& stats, const runtime::EngineConfig& config,
                double generation_throughput, std::string_view version, std::string_view query);

class GatewayRoutes {
 public:
  explicit GatewayRoutes(WorkerIdentity identity);

  // Every gateway route but /flush_cache, on the event loop (none blocks). Throws ProtocolError.
  void answer(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder, runtime::Engine& engine);
  // POST /flush_cache: waits for the engine thread, so never on the event loop.
  void flush_cache(runtime::Engine& engine, HttpResponder& responder);

 private:
  // Output tokens per second between the last two samples at least a second apart (SGLang's
  // gen_throughput is its last logged decode rate); 0 before two samples.
  double generation_throughput(runtime::Engine& engine);

  WorkerIdentity identity_;
  std::mutex throughput_mutex_;
  std::chrono::steady_clock::time_point sampled_at_{};
  uint64_t sampled_tokens_ = 0;
  double throughput_ = 0.0;
  HealthProbes health_;
};

}  // namespace dsinfer::server
