// What the end-to-end server tests (server_test.cc, server_tool_calls_test.cc) share.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/source_path.h"
#include "http/http.h"

namespace dsinfer::server {

// The model `make serve` serves.
inline std::string bundled_model_dir() { return source_path("models/dsv3-tiny"); }

// The SSE events of a streamed body, without the "data: " prefix; "[DONE]" last when present.
inline std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> events;
  size_t start = 0;
  while (true) {
    size_t end = body.find("\n\n", start);
    if (end == std::string::npos) break;
    std::string event = body.substr(start, end - start);
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    events.push_back(event.substr(6));
    start = end + 2;
  }
  EXPECT_EQ(start, body.size()) << "trailing bytes after the last event";
  return events;
}

// A JSON call to the server on `port` (the tests' client side of every route).
inline HttpCall json_call(uint16_t port, std::string method, std::string target, std::string body,
                          double timeout_seconds) {
  HttpCall call;
  call.method = std::move(method);
  call.port = port;
  call.target = std::move(target);
  call.body = std::move(body);
  call.headers = {{"Content-Type", "application/json"}};
  call.timeout_seconds = timeout_seconds;
  return call;
}

}  // namespace dsinfer::server
