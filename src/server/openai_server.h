// The OpenAI-compatible server: routes, auth, and the bridge between HTTP responders and the
// engine's request streams.
//
//   POST /v1/chat/completions, POST /v1/completions (streamed as SSE or not), GET /v1/models,
//   GET /v1/models/{id}, GET /health (503 until a model is attached, and once the engine has failed
//   for good), POST /tokenize, POST /detokenize, GET /metrics, GET /version; and what routers read
//   from a worker (gateway_routes.h): /server_info, /model_info, /v1/loads, /flush_cache,
//   /health_generate.
//
// Each finished request logs one line (request_log.h) unless ServerOptions::log_requests is off.
//
// Routing runs on the HTTP event loop, which never blocks: /health, /metrics and /v1/models are
// answered there, and the requests that need real work (parsing a body of up to --max-body-mb,
// rendering the chat template, tokenizing) go to a few request threads (request_workers.h; a
// full queue is a 503), which validate, render, tokenize and submit. The engine's output thread
// then pushes the output (SSE chunks are built there) to the responder, which hands it back to the
// event loop. A client that goes away aborts its request. A request the engine fails gets a 500
// (or an error event in its stream); new requests to an engine that failed for good get a 503.
//
// CORS (--allowed-origins, default "*" as vLLM's): answers carry Access-Control-Allow-Origin, and an
// OPTIONS preflight to any path is answered 204 with the allowed methods and headers, without the
// API key (browsers send none on a preflight). The transport's own errors (408, 413, 431) carry none.
//
// drain() is the graceful stop (SIGTERM): no new requests (503, /health included), the running
// ones get a time to finish, then the rest end with an error (in_flight_requests.h).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "server/gateway_routes.h"
#include "http/http.h"
#include "server/request_workers.h"
#include "tokenizer/chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::server {

struct ServerOptions {
  std::string served_model_name = "dsinfer";
  std::string api_key;     // empty: no authentication
  bool reasoning = false;  // --reasoning-parser deepseek-r1
  // Tool calling (openai_tools.h): --tool-call-parser deepseek_v3 | deepseek_v31 | kimi_k2 (empty:
  // none) and --enable-auto-tool-choice, which requests with tools need. The constructor checks them.
  std::string tool_call_parser;
  bool enable_auto_tool_choice = false;
  // The threads that prepare requests off the event loop, and how much may wait for them.
  RequestWorkerLimits request_workers;
  HttpServerOptions http;
  // Origins whose browser pages may read the answers: {"*"} for any; empty: no CORS headers, and
  // OPTIONS is a 405 like any unknown method.
  std::vector<std::string> allowed_origins = {"*"};
  // What GET /version reports: the build's version and the commit it was built from.
  std::string version = "unknown";
  std::string commit = "unknown";
  // One log line per finished request (request_log.h); --disable-log-requests turns it off.
  bool log_requests = true;
  // What /server_info and /model_info say about the model, and /health_generate's timeout.
  GatewayOptions gateway;
  // The KV cache's format (model::cache_format_name: auto, fp8, fp8_ds_mla), for /metrics.
  std::string kv_cache_dtype = "auto";
};

// What a loaded model brings to the server. The server borrows these; they outlive it.
struct ServedModel {
  runtime::Engine* engine = nullptr;
  const tokenizer::Tokenizer* tokenizer = nullptr;
  const chat::ChatTemplate* chat_template = nullptr;  // null: chat completions answer 400
};

class OpenAIServer {
 public:
  // Throws dsinfer::Error when the options do not go together (an unknown tool-call parser, ...).
  explicit OpenAIServer(ServerOptions options);
  ~OpenAIServer();

  void start();  // listens at once; /health answers 503 until attach()
  void attach(ServedModel model);
  // The graceful stop. From now on every request but /metrics gets a 503 (/health says the server
  // is shutting down); the requests already taken get up to `timeout` to finish (0: none), then
  // the rest are cut short: a stream ends with an error event and [DONE], a whole answer is a 503.
  // Returns once every request has been answered (or a few seconds after cutting them short, if
  // the engine does not deliver their ends); true when none had to be cut short. Call stop() next.
  bool drain(std::chrono::milliseconds timeout);
  void stop();
  uint16_t port() const;
  size_t open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsinfer::server
