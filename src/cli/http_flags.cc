#include "cli/http_flags.h"

#include <limits>

namespace dsinfer::cli {

void add_address_flags(Flags& flags, int64_t default_port) {
  flags.add_string("host", "ADDR", "address to listen on", false, "127.0.0.1");
  flags.add_int("port", "port to listen on (0: any free port)", default_port);
  flags.set_range("port", 0, 65535);
}

void add_http_limit_flags(Flags& flags) {
  flags.add_int("max-body-mb", "request body limit in MiB (413 above)", 32);
  flags.add_int("max-connections", "open connections at most (503 above)", 8192);
  flags.add_int("header-timeout", "seconds a client may pause while sending a request head (408 after; 0: none)", 60);
  flags.add_int("body-timeout", "seconds a client may pause while sending a request body (408 after; 0: none)", 60);
  flags.add_int("send-timeout", "seconds an answer may make no progress before the client is dropped (0: none)", 60);
  flags.add_int("keep-alive-timeout", "seconds an idle keep-alive connection is kept (0: forever)", 300);
  flags.add_int("max-queued-mb", "MiB of unsent stream a client may leave queued before it is dropped", 16);
  flags.set_range("max-body-mb", 1, 4096);
  flags.set_range("max-connections", 1, std::numeric_limits<double>::infinity());
  for (const char* seconds : {"header-timeout", "body-timeout", "send-timeout", "keep-alive-timeout"})
    flags.set_range(seconds, 0, 86400);
  flags.set_range("max-queued-mb", 1, 4096);
}

server::HttpServerOptions http_options(const Flags& flags) {
  server::HttpServerOptions http;
  http.host = flags.get_string("host");
  http.port = static_cast<uint16_t>(flags.get_int("port"));
  http.max_body_bytes = static_cast<size_t>(flags.get_int("max-body-mb")) << 20;
  http.max_connections = static_cast<size_t>(flags.get_int("max-connections"));
  http.max_queued_bytes = static_cast<size_t>(flags.get_int("max-queued-mb")) << 20;
  auto timeout = [&](const char* name) { return std::chrono::milliseconds(flags.get_int(name) * 1000); };
  http.header_timeout = timeout("header-timeout");
  http.body_timeout = timeout("body-timeout");
  http.send_timeout = timeout("send-timeout");
  http.idle_timeout = timeout("keep-alive-timeout");
  return http;
}

}  // namespace dsinfer::cli
