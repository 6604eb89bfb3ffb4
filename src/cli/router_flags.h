// The flags of `dsinfer router`, in the spellings of SGLang's router where it has one:
//
//   dsinfer router --prefill http://p1:30001 8998 --prefill http://p2:30001 --decode http://d1:30002 ...
//
// --prefill takes a URL and, optionally, the instance's bootstrap port (else its /server_info's
// disaggregation_bootstrap_port; "none" says so explicitly, as SGLang's router reads it); --decode
// takes a URL. Both repeat. A flag of one or two values is beyond Flags (CLI11 behind it), so these
// are taken out of the arguments first, then the rest is parsed as usual.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "router/router.h"

namespace dsinfer::cli {

Flags router_flags();

// Removes each --prefill URL [PORT] and --decode URL from `args` and returns them, in order. Throws
// dsinfer::Error for a flag without its URL, a URL that does not parse, or a port out of range.
std::vector<router::WorkerSpec> take_worker_args(std::vector<std::string>& args);

// The router's options from its command line; empty when --help was asked for (the help is
// printed). Throws dsinfer::Error for a bad flag, or a command line without a prefill or a decode
// instance; `api_key_from_environment` ($DSINFER_API_KEY) is used when --api-key is not given.
std::optional<router::RouterOptions> router_options(int argc, char** argv, const char* api_key_from_environment);

}  // namespace dsinfer::cli
