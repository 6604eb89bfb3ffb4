// The flags of `dsinfer serve`, with vLLM's and SGLang's spellings, and what they mean beyond plain
// values: a launch script written for either runs as it is, and a flag whose feature is not here yet
// stops the start with the issue that brings it (never a silent no-op).
#pragma once

#include <string>
#include <vector>

#include "cli/flags.h"

namespace dsinfer::cli {

Flags serve_flags();

// Throws dsinfer::Error, before anything loads, for a --kv-cache-dtype that is not known, a parallel
// layout that does not parse (parallel_flags.h), speculative decoding flags that do not
// (speculative_flags.h), a --dtype or --reasoning-parser that is not known, prefix caching both
// turned on and off, or a host KV cache it cannot serve (host_kv_flags.h).
void check_serve_flags(const Flags& flags);

bool reasoning_enabled(const Flags& flags);       // --reasoning-parser deepseek-r1 | deepseek_r1
bool prefix_caching_enabled(const Flags& flags);  // on unless --no-enable-prefix-caching
bool log_requests_enabled(const Flags& flags);    // a log line per finished request unless --disable-log-requests

// --allowed-origins as a list: a JSON list or comma-separated; empty: CORS off.
std::vector<std::string> allowed_origins(const Flags& flags);

// --api-key, else $DSINFER_API_KEY, else $VLLM_API_KEY (the environment's values are passed in; null:
// unset). Empty: no key.
std::string api_key(const Flags& flags, const char* dsinfer_api_key, const char* vllm_api_key);

}  // namespace dsinfer::cli
