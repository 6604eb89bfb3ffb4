// Drives an OpenAI-compatible server with a workload and records what each request saw.
//
// Requests go out at their arrival times (workload.h); with a concurrency limit, a request that
// arrives while the limit is reached waits for one to finish and is sent then (vLLM's semaphore:
// its TTFT starts when it is sent). Every request streams (stream: true, stream_options.
// include_usage) on its own connection of one HttpClient, so thousands in flight cost no threads.
// A request fails on a transport error, an HTTP status other than 200, an error event, a stream
// without token chunks, or one that ends without "data: [DONE]".
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "loadgen/request_metrics.h"
#include "loadgen/workload.h"

namespace dsinfer::loadgen {

// Where requests go.
struct Target {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string base_path;                      // from --base-url: "" or "/prefix"
  std::string endpoint = "/v1/completions";  // or "/v1/chat/completions"
  std::string model;
  std::string api_key;  // sent as "Authorization: Bearer ..." when set
};
bool is_chat(const Target& target);  // the endpoint takes messages rather than a prompt

// The first model of GET {base}/v1/models, as vLLM picks one when --model is not given. Throws
// dsinfer::Error saying what went wrong (no server, an error status, no models).
std::string first_served_model(const Target& target);

// The body of GET {base}/metrics (Prometheus text), or null when the server has none to give (a
// transport error or a status other than 200: not every OpenAI-compatible server exports metrics).
std::optional<std::string> fetch_metrics_text(const Target& target);

// The JSON body of one streamed request: the prompt (token ids, or text: a user message for chat),
// max_tokens = the prompt's output length, and with ignore_eos also min_tokens = max_tokens, so
// that every request produces exactly its output length on servers that honour either field.
std::string request_body(const Target& target, const Prompt& prompt, bool ignore_eos);

struct LoadOptions {
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s; inf: all at once
  double burstiness = 1;       // 1: Poisson arrivals; inf: equal gaps (workload.h)
  int64_t max_concurrency = 0;  // requests in flight at most; 0: no limit
  bool ignore_eos = true;
  bool progress = true;          // the progress bar on stderr
  uint64_t seed = 0;             // for the arrival times
  double request_timeout_s = 3 * 3600;
};

struct LoadResult {
  std::vector<RequestRecord> records;  // in the order of the prompts
  double duration_s = 0;               // from the first arrival time's origin to the last completion
};

LoadResult run_load(const Target& target, const std::vector<Prompt>& prompts, const LoadOptions& options);

}  // namespace dsinfer::loadgen
