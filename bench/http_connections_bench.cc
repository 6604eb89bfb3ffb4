// Probe: the largest number of concurrent streaming connections the HTTP server holds on this
// machine. Not a test; run it by hand, from the repository root:
//   build/bench/http_connections_bench [--max N] [--fd-limit N]   (writes bench/results/http_connections.json)
//
// The server runs in this process with a handler that starts an SSE stream, sends one event and
// holds the stream open. The clients run in a forked child, so that each side has its own open-file
// limit. The child opens streams in steps (1k, 2k, 4k, ...); a step counts a stream as held once its
// first event arrived. After each step it asks the server (GET /stats) for its open connections and
// resident memory, closes every stream, and goes on until a step fails or the next would pass the
// open-file limit, which is then tried last.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bench/result_file.h"
#include "core/error.h"
#include "core/json.h"
#include "core/strings.h"
#include "http/http.h"

namespace dsinfer::server {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kFirstStep = 1000;
constexpr size_t kSpareFds = 64;            // stdio, the listener, the stats connection, ...
constexpr double kStepTimeoutSeconds = 90;  // connection storms past the listen backlog retry SYNs

size_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmRSS:")) return std::stoul(line.substr(6)) * 1024;  // "VmRSS:  1234 kB"
  }
  return 0;
}

double mib(size_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// Sets the open-file limit to `wanted` (raising the hard limit needs privilege), or else raises the
// soft limit to the hard one. Returns the limit in force.
size_t raise_fd_limit(size_t wanted) {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  if (wanted > 0) {
    rlimit asked{wanted, wanted};
    if (setrlimit(RLIMIT_NOFILE, &asked) == 0) return wanted;
    std::fprintf(stderr, "cannot set the open-file limit to %zu; using the hard limit\n", wanted);
  }
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  getrlimit(RLIMIT_NOFILE, &limit);
  return limit.rlim_cur;
}

// The server side: holds every stream until its client leaves. Runs until the child exits.
int run_server(int port_pipe, pid_t clients) {
  std::unordered_map<HttpResponder*, std::shared_ptr<HttpResponder>> held;  // event loop only
  HttpServerOptions options;
  options.port = 0;
  options.max_connections = SIZE_MAX;
  HttpServer server(options, [&](const HttpRequest& request, std::shared_ptr<HttpResponder> responder) {
    if (request.path() == "/stats") {
      Json stats = Json::object();
      stats["open_connections"] = static_cast<uint64_t>(server.open_connections());
      stats["rss_bytes"] = static_cast<uint64_t>(resident_bytes());
      return responder->respond(200, "application/json", stats.dump());
    }
    responder->on_disconnect([&held, key = responder.get()] { held.erase(key); });
    responder->start_stream(200, "text/event-stream");
    responder->send_chunk("data: {\"held\":true}\n\n");
    held.emplace(responder.get(), std::move(responder));
  });
  server.start();
  const uint16_t port = server.port();
  if (write(port_pipe, &port, sizeof port) != sizeof port) return 1;
  int status = 0;
  waitpid(clients, &status, 0);
  server.stop();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

struct StepResult {
  size_t held = 0;          // streams whose first event arrived
  std::string first_error;  // of the streams that failed, if any did
};

// Opens `count` streams at once and waits until each has its first event or has failed.
StepResult open_streams(HttpClient& client, uint16_t port, size_t count) {
  struct Shared {
    std::atomic<size_t> held{0}, failed{0};
    std::mutex mutex;
    std::string first_error;
  };
  auto shared = std::make_shared<Shared>();
  for (size_t i = 0; i < count; ++i) {
    HttpCall call;
    call.method = "GET";
    call.port = port;
    call.target = "/v1/stream";
    call.timeout_seconds = 3600;
    auto seen = std::make_shared<bool>(false);
    call.on_data = [shared, seen](std::string_view) {
      if (!std::exchange(*seen, true)) ++shared->held;
    };
    call.on_done = [shared, seen](const HttpClientResponse& response) {
      if (response.error == "cancelled" || *seen) return;
      std::lock_guard lock(shared->mutex);
      if (shared->first_error.empty())
        shared->first_error = response.error.empty() ? str_cat("HTTP ", response.status) : response.error;
      ++shared->failed;
    };
    client.start(std::move(call));
  }
  const auto deadline = Clock::now() + std::chrono::duration<double>(kStepTimeoutSeconds);
  while (shared->held + shared->failed < count && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::lock_guard lock(shared->mutex);
  return {shared->held.load(), shared->first_error};
}

struct ServerStats {
  size_t open_connections = 0;  // including the one asking
  size_t rss = 0;               // bytes
};

ServerStats server_stats(uint16_t port) {
  HttpClient client;
  HttpCall call;
  call.method = "GET";
  call.port = port;
  call.target = "/stats";
  call.timeout_seconds = 30;
  const HttpClientResponse response = client.fetch(call);
  DSINFER_CHECK(response.error.empty() && response.status == 200, "GET /stats failed: ", response.error);
  const Json stats = Json::parse(response.body);
  return {static_cast<size_t>(stats.find("open_connections")->as_int()),
          static_cast<size_t>(stats.find("rss_bytes")->as_int())};
}

struct StepFigures {
  StepResult streams;
  size_t open = 0;        // connections the server held at the end of the step
  size_t server_rss = 0;  // bytes
  size_t client_rss = 0;  // bytes
};

// Opens `count` streams, measures both sides while they are held, then closes them all.
StepFigures run_step(uint16_t port, size_t count) {
  StepFigures figures;
  HttpClient client;  // its destructor closes every stream
  figures.streams = open_streams(client, port, count);
  const ServerStats stats = server_stats(port);
  figures.open = stats.open_connections - 1;  // less the one asking
  figures.server_rss = stats.rss;
  figures.client_rss = resident_bytes();
  return figures;
}

void wait_until_server_idle(uint16_t port) {
  while (server_stats(port).open_connections > 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// The client side: steps up until a step fails or the open-file limit is reached.
int run_clients(int port_pipe, size_t max_streams, size_t fd_limit) {
  uint16_t port = 0;
  if (read(port_pipe, &port, sizeof port) != sizeof port) return 1;
  const size_t ceiling = std::min(max_streams, fd_limit - kSpareFds);
  std::printf("open-file limit %zu per process; stepping up to %zu streams\n", fd_limit, ceiling);
  std::printf("%10s %10s %12s %14s %14s %14s\n", "streams", "held", "server open", "server RSS", "per stream",
              "client RSS");
  const size_t idle_rss = server_stats(port).rss;
  StepFigures best;
  for (size_t step = std::min(kFirstStep, ceiling); step <= ceiling;
       step = step == ceiling ? ceiling + 1 : std::min(step * 2, ceiling)) {
    const StepFigures figures = run_step(port, step);
    const StepResult& result = figures.streams;
    const double per_stream_kib = static_cast<double>(figures.server_rss - idle_rss) / 1024 /
                                  static_cast<double>(std::max<size_t>(figures.open, 1));
    std::printf("%10zu %10zu %12zu %10.1f MiB %10.1f KiB %10.1f MiB\n", step, result.held, figures.open,
                mib(figures.server_rss), per_stream_kib, mib(figures.client_rss));
    std::fflush(stdout);
    if (figures.open >= best.open) best = figures;
    if (result.held < step) {
      std::printf("the step of %zu stopped: %s\n", step,
                  result.first_error.empty() ? "timeout" : result.first_error.c_str());
      break;
    }
    wait_until_server_idle(port);
  }
  std::printf("largest number of concurrent streaming connections held: %zu\n", best.open);
  std::printf("open-file limit %zu per process; server RSS at that point %.1f MiB\n", fd_limit,
              mib(best.server_rss));
  Json result;
  result["benchmark"] = "http_connections";
  Json config;
  config["open_file_limit"] = static_cast<int64_t>(fd_limit);
  config["event_loop_threads"] = 1;
  config["stream"] = "SSE: one event, then held open until every stream of the step is open";
  result["config"] = config;
  Json figures;
  figures["concurrent_streams_held"] = static_cast<int64_t>(best.open);
  figures["server_rss_mib"] = mib(best.server_rss);
  figures["server_kib_per_stream"] = static_cast<double>(best.server_rss - idle_rss) / 1024 /
                                     static_cast<double>(std::max<size_t>(best.open, 1));
  result["figures"] = figures;
  Json anchor;
  anchor["name"] = "the open-file limit of one process (what stopped the count)";
  anchor["concurrent_streams_held"] = static_cast<int64_t>(fd_limit);
  result["anchor"] = anchor;
  bench::write_result("bench/results/http_connections.json", result);
  return 0;
}

int probe(int argc, char** argv) {
  size_t max_streams = SIZE_MAX, wanted_fd_limit = 0;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    int64_t value = 0;
    DSINFER_CHECK(i + 1 < argc && parse_int64(argv[i + 1], &value) && value > 0, flag,
                  ": expected a positive number after it");
    if (flag == "--max") {
      max_streams = static_cast<size_t>(value);
    } else if (flag == "--fd-limit") {
      wanted_fd_limit = static_cast<size_t>(value);
    } else {
      throw Error(str_cat("unknown flag ", flag, " (expected --max N, --fd-limit N)"));
    }
  }
  const size_t fd_limit = raise_fd_limit(wanted_fd_limit);
  int port_pipe[2];
  DSINFER_CHECK(pipe(port_pipe) == 0, "pipe failed");
  // Fork before either side starts a thread.
  const pid_t child = fork();
  DSINFER_CHECK(child >= 0, "fork failed");
  if (child == 0) std::exit(run_clients(port_pipe[0], max_streams, fd_limit));
  return run_server(port_pipe[1], child);
}

}  // namespace
}  // namespace dsinfer::server

int main(int argc, char** argv) {
  return dsinfer::bench::run_benchmark("http_connections_probe", dsinfer::server::probe, argc, argv);
}
