// Helpers of the router tests: fake prefill and decode workers (in-process HTTP servers that answer
// SGLang's worker routes and record the generation requests they get), and a router over them on
// loopback with fast health checks.
#pragma once

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "core/strings.h"
#include "http/http.h"
#include "router/router.h"

namespace dsinfer::router::testing {

using namespace std::chrono_literals;

// Polls until condition() holds or the time is up; returns condition().
inline bool wait_for(const std::function<bool()>& condition, double seconds = 5) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (!condition() && Clock::now() < deadline) std::this_thread::sleep_for(2ms);
  return condition();
}

inline std::optional<std::string> find_header(const server::Headers& headers, std::string_view name) {
  server::HttpRequest lookup;
  lookup.headers = headers;
  auto value = lookup.header(name);
  return value ? std::optional<std::string>(*value) : std::nullopt;
}

// A worker as SGLang's PD protocol sees one. Its behaviour is set before requests come.
class FakeWorker {
 public:
  explicit FakeWorker(WorkerRole role, uint16_t port = 0) : role_(role) {
    server_info_mode = std::string(role_name(role));
    listen(port);
  }
  ~FakeWorker() { stop(); }

  // /server_info's fields; an empty mode leaves disaggregation_mode out.
  std::string server_info_mode;
  std::optional<int> server_info_bootstrap_port;
  std::optional<int> server_info_max_running_requests;
  std::atomic<int> health_status{200};
  // /v1/loads.
  std::atomic<int64_t> reported_running{0};
  std::atomic<int64_t> reported_used_tokens{0};
  std::atomic<int64_t> reported_total_tokens{100000};
  std::atomic<double> reported_throughput{0};
  // Generation requests: answered with this error (status, body) when the status is set; held
  // open until release() when hold is set; else answered as a worker does: a D streams
  // stream_pieces (with a pause between them) or answers whole_answer, a P answers {}.
  std::atomic<int> error_status{0};
  std::string error_body = R"({"error":{"message":"the prompt is too long","type":"invalid_request_error"}})";
  std::atomic<bool> hold{false};
  std::vector<std::string> stream_pieces = {"data: {\"n\":1}\n\n", "data: {\"n\":2}\n\n", "data: [DONE]\n\n"};
  std::chrono::milliseconds stream_pause{0};
  std::string whole_answer = R"({"id":"cmpl-1","choices":[{"text":"hi"}],"usage":{"completion_tokens":7}})";

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<Json> bodies() {
    std::lock_guard lock(mutex_);
    return bodies_;
  }
  size_t received() {
    std::lock_guard lock(mutex_);
    return bodies_.size();
  }
  int disconnects() const { return disconnects_.load(); }
  // Answers the held requests as if they had not been held.
  void release() {
    std::vector<std::pair<Json, std::shared_ptr<server::HttpResponder>>> held;
    {
      std::lock_guard lock(mutex_);
      held.swap(held_);
    }
    for (auto& [body, responder] : held) answer(body, responder);
  }
  void stop() {
    if (server_) server_->stop();
    server_.reset();
    for (auto& writer : writers_) writer.join();
    writers_.clear();
  }
  // Back on the same port (a restarted worker).
  void restart() {
    stop();
    listen(port_);
  }

 private:
  void listen(uint16_t port) {
    server::HttpServerOptions options;
    options.port = port;
    server_ = std::make_unique<server::HttpServer>(
        options, [this](const server::HttpRequest& request, std::shared_ptr<server::HttpResponder> responder) {
          handle(request, std::move(responder));
        });
    server_->start();
    port_ = server_->port();
  }

  void handle(const server::HttpRequest& request, std::shared_ptr<server::HttpResponder> responder) {
    const std::string_view path = request.path();
    if (path == "/health") return responder->respond(health_status.load(), "text/plain", "");
    if (path == "/server_info") {
      Json info = Json::object();
      if (!server_info_mode.empty()) info["disaggregation_mode"] = server_info_mode;
      if (server_info_bootstrap_port) info["disaggregation_bootstrap_port"] = *server_info_bootstrap_port;
      if (server_info_max_running_requests) info["max_running_requests"] = *server_info_max_running_requests;
      return responder->respond(200, "application/json", info.dump());
    }
    if (path == "/v1/loads") {
      Json load = Json::object();
      load["num_running_reqs"] = reported_running.load();
      load["num_waiting_reqs"] = 0;
      load["num_used_tokens"] = reported_used_tokens.load();
      load["max_total_num_tokens"] = reported_total_tokens.load();
      load["gen_throughput"] = reported_throughput.load();
      Json loads = Json::object();
      loads["loads"].push_back(load);
      return responder->respond(200, "application/json", loads.dump());
    }
    if (path == "/v1/models") return responder->respond(200, "application/json", R"({"object":"list","data":[]})");
    Json body = Json::parse(request.body);
    responder->on_disconnect([this] { ++disconnects_; });
    {
      std::lock_guard lock(mutex_);
      bodies_.push_back(body);
      if (hold.load()) {
        held_.emplace_back(std::move(body), std::move(responder));
        return;
      }
    }
    answer(body, responder);
  }

  void answer(const Json& body, const std::shared_ptr<server::HttpResponder>& responder) {
    if (error_status.load() != 0) return responder->respond(error_status.load(), "application/json", error_body);
    if (role_ == WorkerRole::kPrefill) return responder->respond(200, "application/json", "{}");
    const Json* stream = body.find("stream");
    if (stream == nullptr || !stream->as_bool()) return responder->respond(200, "application/json", whole_answer);
    responder->start_stream(200, "text/event-stream");
    std::lock_guard lock(mutex_);
    writers_.emplace_back([responder, pieces = stream_pieces, pause = stream_pause] {
      for (const std::string& piece : pieces) {
        std::this_thread::sleep_for(pause);
        responder->send_chunk(piece);
      }
      responder->finish_stream();
    });
  }

  WorkerRole role_;
  std::unique_ptr<server::HttpServer> server_;
  uint16_t port_ = 0;
  std::mutex mutex_;
  std::vector<Json> bodies_;
  std::vector<std::pair<Json, std::shared_ptr<server::HttpResponder>>> held_;
  std::vector<std::thread> writers_;
  std::atomic<int> disconnects_{0};
};

// A router's options for tests: port 0, health checks and load polls every 20 ms, a fixed seed.
inline RouterOptions test_router_options() {
  RouterOptions options;
  options.http.port = 0;
  options.health.interval = 20ms;
  options.health.load_interval = 20ms;
  options.seed = 7;
  options.request_timeout_seconds = 10;
  return options;
}

inline WorkerSpec prefill_spec(const FakeWorker& worker, std::optional<uint16_t> bootstrap_port = 8998) {
  return {WorkerRole::kPrefill, worker.url(), bootstrap_port};
}
inline WorkerSpec decode_spec(const FakeWorker& worker) { return {WorkerRole::kDecode, worker.url(), std::nullopt}; }

// A chat request whose one user message is `content`.
inline std::string chat_body(const std::string& content, bool stream = false) {
  Json body = Json::object();
  body["model"] = "m";
  Json message = Json::object();
  message["role"] = "user";
  message["content"] = content;
  body["messages"].push_back(message);
  if (stream) body["stream"] = true;
  return body.dump();
}

inline server::HttpCall router_call(const Router& router, std::string target, std::string body = "",
                                    std::string method = "POST") {
  server::HttpCall call;
  call.method = std::move(method);
  call.port = router.port();
  call.target = std::move(target);
  call.body = std::move(body);
  call.headers.emplace_back("Content-Type", "application/json");
  call.timeout_seconds = 10;
  return call;
}

// The value of a metric line "name{labels} value" (the first whose text before the value starts
// with `series`); NaN when absent.
inline double metric(const std::string& text, std::string_view series) {
  for (const std::string& line : split(text, '\n')) {
    if (!line.starts_with(series)) continue;
    const size_t space = line.rfind(' ');
    if (line.substr(0, space) != series) continue;
    double value = 0;
    if (parse_double(line.substr(space + 1), &value)) return value;
  }
  return std::nan("");
}

}  // namespace dsinfer::router::testing
