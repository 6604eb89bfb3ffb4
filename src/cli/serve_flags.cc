#include "cli/serve_flags.h"

#include <limits>

#include "cli/disaggregation_flags.h"
#include "cli/http_flags.h"
#include "cli/host_kv_flags.h"
#include "cli/model_files.h"
#include "cli/parallel_flags.h"
#include "cli/speculative_flags.h"
#include "core/error.h"
#include "core/json.h"
#include "core/strings.h"

namespace dsinfer::cli {

Flags serve_flags() {
  Flags flags("dsinfer serve MODEL_DIR [flags]  (or --model MODEL_DIR)",
              "Serves the model over an OpenAI-compatible HTTP API (/v1/chat/completions, /v1/completions, "
              "/v1/models, /v1/models/{id}, /version, /health, /metrics, /tokenize, /detokenize).");
  flags.add_string("model", "DIR", "checkpoint directory (config.json, *.safetensors, tokenizer files)", true);
  flags.add_alias("model-path", "model");  // SGLang
  flags.set_positional("model");           // vLLM: `vllm serve DIR`
  flags.add_string("device", "DEVICE", "where to run: cpu, cuda or cuda:N", false, "cpu");
  add_model_flags(flags);
  add_address_flags(flags, 8000);
  flags.add_string("served-model-name", "NAME", "the model's name in the API (default: the --model path)");
  flags.add_string("api-key", "KEY", "require 'Authorization: Bearer KEY' on /v1 routes (else $DSINFER_API_KEY, else "
                   "$VLLM_API_KEY: DSINFER_API_KEY wins when both are set)");
  flags.add_int("max-num-seqs", "sequences in a step at most", 256);
  flags.add_count("max-num-batched-tokens", "tokens in a step at most (size suffixes as --max-model-len)", 2048);
  flags.add_count("max-model-len", "context length per request, at most the model's (0 or unset: the model's); "
                  "vLLM's suffixes: 32k = 32000, 32K = 32768");
  flags.add_alias("context-length", "max-model-len");  // SGLang
  flags.add_int("num-kv-pages", "KV cache pages of 64 tokens (0 or unset: from --kv-cache-gb on the CPU, from "
                "--gpu-memory-utilization on a GPU)");
  flags.add_double("kv-cache-gb", "KV cache memory on the CPU when --num-kv-pages is not given", 2.0);
  flags.add_double("gpu-memory-utilization", "fraction of the GPU's memory dsinfer may use (weights, activations, "
                   "KV cache); the KV cache gets what the others leave", 0.9);
  flags.add_alias("mem-fraction-static", "gpu-memory-utilization");  // SGLang
  flags.add_bool("enable-prefix-caching", "reuse the KV pages of earlier prompts (the default)");
  flags.add_bool("no-enable-prefix-caching", "do not reuse the KV pages of earlier prompts");
  flags.add_alias("disable-radix-cache", "no-enable-prefix-caching");  // SGLang
  add_host_kv_flags(flags);  // issue 14: the host tier under the prefix cache
  flags.add_string("reasoning-parser", "NAME", "deepseek-r1 (or deepseek_r1): <think>...</think> goes to "
                   "reasoning_content");
  flags.add_bool("enable-auto-tool-choice", "parse tool calls out of the output of requests with tools "
                 "(tool_choice \"auto\"); needs --tool-call-parser");
  flags.add_string("tool-call-parser", "NAME", "the model's tool-call format: deepseek_v3, deepseek_v31 or kimi_k2");
  flags.add_string("chat-template", "FILE", "a Jinja chat template to use instead of the model directory's "
                   "(templates/deepseek_v3_tools.jinja renders tools for DeepSeek-V3)");
  flags.add_string("allowed-origins", "ORIGINS", "CORS: origins whose browser pages may call the API, as a JSON list "
                   "(vLLM's form, '[\"https://a.example\"]') or comma-separated; * for any, '' for no CORS headers",
                   false, "*");
  add_http_limit_flags(flags);
  flags.add_int("request-threads", "threads that parse, render and tokenize requests beside the event loop", 4);
  flags.add_bool("disable-log-requests", "do not log a line per finished request (its id, prompt and output tokens, "
                 "time to first token, total time and finish reason)");
  flags.add_int("shutdown-timeout", "seconds SIGTERM/SIGINT leaves running requests to finish before ending them "
                "with an error (0: at once; a second signal also ends them at once)", 30);
  flags.add_int("threads", "CPU threads for the model (0: all cores)", 0);
  flags.add_int("seed", "seed for requests that give none", 0);
  // Accepted so that vLLM and SGLang launch scripts run; they change nothing here.
  flags.add_bool("trust-remote-code", "no effect: dsinfer runs no code from the model directory");
  flags.add_string("dtype", "DTYPE", "auto or bfloat16, no effect: the GPU computes in bfloat16, the CPU in "
                   "float32 (other values are refused)", false, "auto");
  // Shared with generate and eval: the parallel layout and speculative decoding.
  add_parallel_flags(flags);
  add_speculative_flags(flags);
  add_disaggregation_flags(flags);

  // Ranges, refused while parsing (CLI11's message names the flag). serve.cc checks what needs more
  // than a range (a positive --kv-cache-gb, --max-model-len against the model).
  constexpr double kNoMax = std::numeric_limits<double>::infinity();
  flags.set_range("max-num-seqs", 1, kNoMax);
  flags.set_range("max-num-batched-tokens", 1, kNoMax);
  flags.set_range("max-model-len", 0, kNoMax);
  flags.set_range("num-kv-pages", 0, 2147483647);  // page ids are int32
  flags.set_range("gpu-memory-utilization", 0, 1);
  flags.set_range("shutdown-timeout", 0, 86400);
  flags.set_range("request-threads", 1, 256);
  flags.set_range("threads", 0, 4096);
  return flags;
}

void check_serve_flags(const Flags& flags) {
  reasoning_enabled(flags);
  allowed_origins(flags);
  prefix_caching_enabled(flags);
  host_kv_cache(flags);
  const std::string dtype = flags.get_string("dtype");
  DSINFER_CHECK(dtype == "auto" || dtype == "bfloat16", "--dtype ", dtype, " is not supported: dsinfer computes in "
                "bfloat16 on the GPU and float32 on the CPU; give auto or bfloat16 (or leave it out)");
  kv_cache_format(flags);  // refuses the unknown before anything loads
  expert_balance(flags, parallel_config(flags));
  speculative_request(flags);
  disaggregation_settings(flags);
}

bool reasoning_enabled(const Flags& flags) {
  const std::string parser = flags.get_string("reasoning-parser");
  DSINFER_CHECK(parser.empty() || parser == "deepseek-r1" || parser == "deepseek_r1", "--reasoning-parser '", parser,
                "' is not known (deepseek-r1 or deepseek_r1)");
  return !parser.empty();
}

bool prefix_caching_enabled(const Flags& flags) {
  DSINFER_CHECK(!(flags.get_bool("enable-prefix-caching") && flags.get_bool("no-enable-prefix-caching")),
                "--enable-prefix-caching and --no-enable-prefix-caching contradict each other; give one");
  return !flags.get_bool("no-enable-prefix-caching");
}

bool log_requests_enabled(const Flags& flags) { return !flags.get_bool("disable-log-requests"); }

std::vector<std::string> allowed_origins(const Flags& flags) {
  const std::string text(trim(flags.get_string("allowed-origins")));
  std::vector<std::string> origins;
  if (text.starts_with("[")) {
    Json list;
    try {
      list = Json::parse(text);
    } catch (const Error& error) {
      throw Error(str_cat("--allowed-origins: ", error.what()));
    }
    for (const Json& origin : list.as_array()) {
      DSINFER_CHECK(origin.is_string(), "--allowed-origins: the JSON list must hold strings, got ", origin.dump());
      origins.push_back(origin.as_string());
    }
    return origins;
  }
  for (const std::string& origin : split(text, ','))
    if (!trim(origin).empty()) origins.emplace_back(trim(origin));
  return origins;
}

std::string api_key(const Flags& flags, const char* dsinfer_api_key, const char* vllm_api_key) {
  if (std::string key = flags.get_string("api-key"); !key.empty()) return key;
  if (dsinfer_api_key && *dsinfer_api_key) return dsinfer_api_key;
  if (vllm_api_key) return vllm_api_key;
  return "";
}

}  // namespace dsinfer::cli
