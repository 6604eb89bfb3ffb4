// The flags of the HTTP transport that `serve` and `router` share: --host and --port, then the
// limits and per-phase timeouts a client meets (http/http.h's HttpServerOptions), so both
// front ends behave alike to their clients.
#pragma once

#include <cstdint>

#include "cli/flags.h"
#include "http/http.h"

namespace dsinfer::cli {

void add_address_flags(Flags& flags, int64_t default_port);  // --host, --port
void add_http_limit_flags(Flags& flags);                     // body, connection and queue limits; timeouts
// The transport's options from both groups (their ranges were checked while parsing).
server::HttpServerOptions http_options(const Flags& flags);

}  // namespace dsinfer::cli
