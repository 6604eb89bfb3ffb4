// KV transfer between a prefill and a decode process on one GPU (issue 14's figure): the latent
// cache's pages of one request pushed through UcxTransfer (CUDA IPC between the two processes'
// device memory), against the device-to-device copy bandwidth measured in the same run.
//
//   kv_transfer_bench [--layers 61] [--isl 4096,16384,32768] [--runs 5] [--transports cuda_ipc,cuda_copy,tcp]
//                     [--layer-ms 0] [--pages random|pool] [--out FILE] [--check]
//
// The process forks before either touches CUDA; the child is the decode instance: it allocates its
// cache (DeepSeek-V3's rows: 576 bf16 a token, 64-token pages, one region a layer), registers it
// as device memory and hands its address and regions to the parent through a pipe (the control
// plane). The parent is the prefill instance: its cache holds a pattern, and for each prompt length
// it pushes the prompt's pages into pages the decode side chose at random (scattered, as a pool hands
// them out after churn), or with --pages pool as a fresh pool hands them out on both sides (consecutive,
// high to low, so each layer's pages merge into one write), one transfer a layer, the note on the last. Timed: from the first post to the note's arrival at the decode side (the child answers
// on the pipe), the median of --runs. Every run's bytes are then checked on the decode side
// (a sample of every page of every layer against the pattern); a mismatch fails the run.
//
// Layer-wise: with --layer-ms M each layer's post waits for M ms of simulated compute (the prefill of
// that layer), as the engine's layer-wise send does; the figure is the time from the last layer's
// compute to the note (exposed transfer), against the whole-request send, whose exposed time is all
// of it. --check runs one small transfer and its check, no timing (the GPU test's mode).
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/result_file.h"
#include "cli/flags.h"
#include "core/error.h"
#include "core/json.h"
#include "core/strings.h"
#include "transfer/kv_transfer.h"
#include "transfer/ucx_transfer.h"

namespace dsinfer::bench {
namespace {

constexpr int64_t kPageTokens = 64;
constexpr int64_t kRowBytes = 576 * 2;
constexpr int64_t kPageBytes = kPageTokens * kRowBytes;  // 73,728
using Clock = std::chrono::steady_clock;

void cuda(cudaError_t status, const char* what) {
  DSINFER_CHECK(status == cudaSuccess, what, ": ", cudaGetErrorString(status));
}

// A length-prefixed message over a pipe.
void send(int fd, const std::string& message) {
  const uint64_t size = message.size();
  DSINFER_CHECK(write(fd, &size, 8) == 8 && write(fd, message.data(), size) == static_cast<ssize_t>(size),
                "pipe write");
}
std::string receive(int fd) {
  uint64_t size = 0;
  DSINFER_CHECK(read(fd, &size, 8) == 8, "pipe read (the other process ended)");
  std::string message(size, '\0');
  for (size_t got = 0; got < size;) {
    const ssize_t n = read(fd, message.data() + got, size - got);
    DSINFER_CHECK(n > 0, "pipe read (the other process ended)");
    got += static_cast<size_t>(n);
  }
  return message;
}

// The pattern byte of (layer, source page, byte): what the decode side must find.
uint8_t pattern(int64_t layer, int64_t page, int64_t byte) {
  return static_cast<uint8_t>((layer * 131 + page * 31 + byte * 7) & 0xff);
}

struct Plan {
  int64_t layers = 61;
  int64_t pool_pages = 0;  // per layer, on each side
  std::vector<int64_t> isl;
  int runs = 5;
  double layer_ms = 0;
  std::string transports;
  bool check_only = false;
  bool pool_order = false;  // --pages pool: both sides' pages as a fresh pool hands them out
};

// The decode side: allocates and registers its cache, serves the parent's requests until "quit".
int decode_side(const Plan& plan, int from_parent, int to_parent) {
  try {
    cuda(cudaSetDevice(0), "cudaSetDevice");
    const uint64_t layer_bytes = static_cast<uint64_t>(plan.pool_pages * kPageBytes);
    std::vector<void*> layers(plan.layers);
    auto agent = transfer::make_ucx_transfer({plan.transports});
    Json hello = Json::object();
    hello["address"] = transfer::blob_to_hex(agent->address());
    hello["regions"] = Json::array();
    for (int64_t l = 0; l < plan.layers; ++l) {
      cuda(cudaMalloc(&layers[l], layer_bytes), "cudaMalloc (decode cache)");
      cuda(cudaMemset(layers[l], 0, layer_bytes), "cudaMemset");
      hello["regions"].push_back(transfer::blob_to_hex(agent->describe(agent->register_memory(layers[l], layer_bytes,
                                                                                 transfer::MemoryKind::kDevice))));
    }
    cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    send(to_parent, hello.dump());
    std::vector<uint8_t> page(kPageBytes);
    for (;;) {
      Json order = Json::parse(receive(from_parent));
      const std::string what = order.find("do")->as_string();
      if (what == "quit") return 0;
      if (what == "wait") {  // until the note arrives
        const std::string want = order.find("note")->as_string();
        const auto deadline = Clock::now() + std::chrono::seconds(60);
        bool arrived = false;
        while (!arrived && Clock::now() < deadline)
          for (const transfer::Blob& note : agent->take_notes()) arrived = arrived || note == want;
        send(to_parent, arrived ? "arrived" : "timed out");
      } else if (what == "check") {  // every destination page of every layer holds its source page
        const Json& pairs = *order.find("pairs");
        int64_t bad = 0;
        for (int64_t l = 0; l < plan.layers; ++l)
          for (const Json& pair : pairs.as_array()) {
            const int64_t from = pair.at(0).as_int(), to = pair.at(1).as_int();
            cuda(cudaMemcpy(page.data(), static_cast<char*>(layers[l]) + to * kPageBytes, kPageBytes,
                            cudaMemcpyDeviceToHost),
                 "cudaMemcpy (check)");
            for (int64_t b = 0; b < kPageBytes; b += 97) bad += page[b] != pattern(l, from, b);
          }
        for (void* layer : layers) cuda(cudaMemset(layer, 0, layer_bytes), "cudaMemset");
        cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        send(to_parent, std::to_string(bad));
      }
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "decode side: %s\n", error.what());
    return 1;
  }
}

double copy_bandwidth_tb_s(void* a, void* b, uint64_t bytes) {
  cudaEvent_t start, stop;
  cuda(cudaEventCreate(&start), "event");
  cuda(cudaEventCreate(&stop), "event");
  std::vector<float> ms;
  for (int run = 0; run < 10; ++run) {
    cuda(cudaEventRecord(start), "record");
    cuda(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice), "copy");
    cuda(cudaEventRecord(stop), "record");
    cuda(cudaEventSynchronize(stop), "sync");
    float t = 0;
    cuda(cudaEventElapsedTime(&t, start, stop), "elapsed");
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  // A copy reads and writes every byte.
  return 2.0 * static_cast<double>(bytes) / (ms[ms.size() / 2] * 1e-3) / 1e12;
}

int prefill_side(const Plan& plan, int to_child, int from_child, const std::string& out) {
  cuda(cudaSetDevice(0), "cudaSetDevice");
  const uint64_t layer_bytes = static_cast<uint64_t>(plan.pool_pages * kPageBytes);
  auto agent = transfer::make_ucx_transfer({plan.transports});
  std::vector<void*> layers(plan.layers);
  std::vector<int> local(plan.layers);
  std::vector<uint8_t> host(layer_bytes);
  for (int64_t l = 0; l < plan.layers; ++l) {
    cuda(cudaMalloc(&layers[l], layer_bytes), "cudaMalloc (prefill cache)");
    for (int64_t p = 0; p < plan.pool_pages; ++p)
      for (int64_t b = 0; b < kPageBytes; ++b) host[p * kPageBytes + b] = pattern(l, p, b);
    cuda(cudaMemcpy(layers[l], host.data(), layer_bytes, cudaMemcpyHostToDevice), "cudaMemcpy (pattern)");
    local[l] = agent->register_memory(layers[l], layer_bytes, transfer::MemoryKind::kDevice);
  }
  Json hello = Json::parse(receive(from_child));
  const int peer = agent->connect(transfer::blob_from_hex(hello["address"].as_string(), "the decode side's address"));
  std::vector<int> remote(plan.layers);
  for (int64_t l = 0; l < plan.layers; ++l) {
    const std::string& region = hello["regions"].at(static_cast<size_t>(l)).as_string();
    remote[l] = agent->import(peer, transfer::blob_from_hex(region, "a region"));
  }
  // The ceiling on buffers of their own (1 GiB each way), never the cache's pages.
  void* copy_from = nullptr;
  void* copy_to = nullptr;
  constexpr uint64_t kCopyBytes = uint64_t{1} << 30;
  cuda(cudaMalloc(&copy_from, kCopyBytes), "cudaMalloc (copy)");
  cuda(cudaMalloc(&copy_to, kCopyBytes), "cudaMalloc (copy)");
  const double copy_tb_s = copy_bandwidth_tb_s(copy_from, copy_to, kCopyBytes);
  cuda(cudaFree(copy_from), "cudaFree");
  cuda(cudaFree(copy_to), "cudaFree");

  std::mt19937 random(7);
  Json figures = Json::object();
  figures["copy_tb_s"] = copy_tb_s;
  std::printf("KV transfer, prefill -> decode process on one GPU (%s), %lld layers of 64-token pages of 576 bf16; "
              "copy %.2f TB/s (read + write)\n", plan.transports.empty() ? "UCX's transports" : plan.transports.c_str(),
              static_cast<long long>(plan.layers), copy_tb_s);
  std::printf("  %8s %10s %12s %10s %9s %s\n", "ISL", "MB", "whole ms", "GB/s", "of copy", plan.layer_ms > 0 ? "  layer-wise exposed ms" : "");
  int failures = 0;
  for (int64_t isl : plan.isl) {
    const int64_t pages = (isl + kPageTokens - 1) / kPageTokens;
    DSINFER_CHECK(pages <= plan.pool_pages, "ISL ", isl, " needs ", pages, " pages, the pool has ", plan.pool_pages);
    // The prefill side's pages in order, the decode side's at random (a pool's free list after
    // churn), or with --pages pool both as a fresh pool hands them out: consecutive, high to low.
    std::vector<int64_t> to(plan.pool_pages);
    std::iota(to.begin(), to.end(), 0);
    std::vector<double> whole_ms, exposed_ms;
    for (int run = 0; run < (plan.check_only ? 1 : plan.runs + 1); ++run) {
      if (!plan.pool_order) std::shuffle(to.begin(), to.end(), random);
      std::vector<transfer::Write> writes;
      Json pairs = Json::array();
      for (int64_t p = 0; p < pages; ++p) {
        const int64_t from = plan.pool_order ? pages - 1 - p : p;
        const int64_t into = plan.pool_order ? plan.pool_pages - 1 - p : to[p];
        writes.push_back({static_cast<uint64_t>(from * kPageBytes), static_cast<uint64_t>(into * kPageBytes),
                          static_cast<uint64_t>(kPageBytes)});
        Json pair = Json::array();
        pair.push_back(from);
        pair.push_back(into);
        pairs.push_back(std::move(pair));
      }
      for (bool layerwise : {false, true}) {
        if (layerwise && plan.layer_ms <= 0) continue;
        const std::string note = str_cat("isl ", isl, " run ", run, layerwise ? " layer-wise" : " whole");
        Json wait = Json::object();
        wait["do"] = "wait";
        wait["note"] = note;
        send(to_child, wait.dump());
        std::vector<uint64_t> transfers;
        const Clock::time_point start = Clock::now();
        Clock::time_point computed = start;
        for (int64_t l = 0; l < plan.layers; ++l) {
          if (layerwise) {  // this layer's prefill, then its send
            std::this_thread::sleep_until(start + std::chrono::microseconds(static_cast<int64_t>((l + 1) * plan.layer_ms * 1000)));
            computed = Clock::now();
          }
          transfers.push_back(agent->post(local[l], remote[l], writes, l + 1 == plan.layers ? note : ""));
          for (uint64_t t : transfers) agent->poll(t);
        }
        for (;;) {
          bool done = true;
          for (uint64_t t : transfers) {
            const transfer::TransferState state = agent->poll(t);
            DSINFER_CHECK(state != transfer::TransferState::kFailed, "transfer failed: ", agent->error(t));
            done = done && state == transfer::TransferState::kDone;
          }
          if (done) break;
        }
        const std::string answer = receive(from_child);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - (layerwise ? computed : start)).count();
        DSINFER_CHECK(answer == "arrived", "the decode side: ", answer);
        for (uint64_t t : transfers) agent->release(t);
        if (run > 0 || plan.check_only) (layerwise ? exposed_ms : whole_ms).push_back(ms);
        Json check = Json::object();
        check["do"] = "check";
        check["pairs"] = pairs;
        send(to_child, check.dump());
        const int64_t bad = std::stoll(receive(from_child));
        if (bad != 0) {
          std::printf("  ISL %lld%s: %lld sampled bytes differ on the decode side\n", static_cast<long long>(isl),
                      layerwise ? " layer-wise" : "", static_cast<long long>(bad));
          ++failures;
        }
      }
    }
    auto median = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v.empty() ? 0.0 : v[v.size() / 2]; };
    const double ms = median(whole_ms), bytes = static_cast<double>(pages * kPageBytes * plan.layers);
    const double gb_s = bytes / (ms * 1e-3) / 1e9;
    // The transfer moves each byte once (read there, written here): against half the copy's rate.
    const double of_copy = gb_s / (copy_tb_s * 1e3 / 2);
    std::printf("  %8lld %10.1f %12.3f %10.1f %8.0f%%", static_cast<long long>(isl), bytes / 1e6, ms, gb_s, 100 * of_copy);
    const std::string key = str_cat("isl", isl);
    figures[key + "_mb"] = bytes / 1e6;
    figures[key + "_whole_ms"] = ms;
    figures[key + "_gb_s"] = gb_s;
    figures[key + "_of_copy"] = of_copy;
    if (!exposed_ms.empty()) {
      std::printf("  %10.3f (saves %.3f ms)", median(exposed_ms), ms - median(exposed_ms));
      figures[key + "_layerwise_exposed_ms"] = median(exposed_ms);
      figures[key + "_layerwise_saved_ms"] = ms - median(exposed_ms);
    }
    std::printf("\n");
  }
  send(to_child, R"({"do": "quit"})");
  if (plan.check_only) {
    std::printf(failures == 0 ? "kv transfer check: every sampled byte landed\n" : "kv transfer check: FAILED\n");
    return failures == 0 ? 0 : 1;
  }
  cudaDeviceProp properties{};
  cuda(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  Json result = Json::object();
  result["benchmark"] = "kv_transfer_bench";
  result["device"] = properties.name;
  Json& config = result["config"] = Json::object();
  config["layers"] = plan.layers;
  config["page_bytes"] = kPageBytes;
  config["transports"] = plan.transports;
  config["runs"] = plan.runs;
  config["layer_ms"] = plan.layer_ms;
  config["pages"] = plan.pool_order ? "as a fresh pool hands them out on both sides (consecutive, high to low: one write "
                                      "a layer); one transfer a layer, the note on the last"
                                    : "scattered at random on the decode side; one transfer a layer, the note on the last";
  result["figures"] = figures;
  Json& anchor = result["anchor"] = Json::object();
  anchor["name"] = "device-to-device copy bandwidth of the same GPU, same run (read + write; a transfer moves a byte once)";
  anchor["copy_tb_s"] = copy_tb_s;
  write_result(out.empty() ? str_cat("bench/results/kv_transfer_", gpu_tag(properties.name), ".json") : out, result);
  return failures == 0 ? 0 : 1;
}

int run(int argc, char** argv) {
  cli::Flags flags("kv_transfer_bench [flags]", "a request's KV pages between two processes on one GPU, over UCX");
  flags.add_int("layers", "cache layers (DeepSeek-V3: 61)", 61);
  flags.add_string("isl", "LIST", "prompt lengths in tokens", false, "4096,16384,32768");
  flags.add_int("runs", "timed runs per length (the median is reported)", 5);
  flags.add_string("transports", "TLS", "UCX transports", false, "cuda_ipc,cuda_copy,tcp");
  flags.add_double("layer-ms", "simulated prefill time a layer, for the layer-wise figure (0: none)", 0);
  flags.add_bool("check", "one small transfer and its check, no figures");
  flags.add_string("pages", "ORDER", "the decode side's pages: random (a pool after churn) or pool (a fresh pool's order)",
                   false, "random");
  flags.add_string("out", "FILE", "result JSON (default bench/results/kv_transfer.json)");
  if (!flags.parse(argc - 1, argv + 1)) return 0;
  Plan plan;
  plan.check_only = flags.get_bool("check");
  plan.layers = plan.check_only ? 3 : flags.get_int("layers");
  for (const std::string& isl : split(flags.get_string("isl"), ',')) plan.isl.push_back(std::stoll(isl));
  if (plan.check_only) plan.isl = {1000};
  plan.runs = static_cast<int>(std::max<int64_t>(1, flags.get_int("runs")));
  plan.layer_ms = flags.get_double("layer-ms");
  plan.transports = flags.get_string("transports");
  DSINFER_CHECK(flags.get_string("pages") == "random" || flags.get_string("pages") == "pool",
                "--pages is random or pool, not '", flags.get_string("pages"), "'");
  plan.pool_order = flags.get_string("pages") == "pool";
  plan.pool_pages = (*std::max_element(plan.isl.begin(), plan.isl.end()) + kPageTokens - 1) / kPageTokens * 2;

  int to_child[2], from_child[2];
  DSINFER_CHECK(pipe(to_child) == 0 && pipe(from_child) == 0, "pipe");
  const pid_t child = fork();  // before either process touches CUDA
  DSINFER_CHECK(child >= 0, "fork");
  if (child == 0) {
    close(to_child[1]);
    close(from_child[0]);
    _exit(decode_side(plan, to_child[0], from_child[1]));
  }
  close(to_child[0]);
  close(from_child[1]);
  int status = 1;
  try {
    status = prefill_side(plan, to_child[1], from_child[0], flags.has("out") ? flags.get_string("out") : "");
  } catch (const std::exception& error) {
    std::fprintf(stderr, "kv_transfer_bench: %s\n", error.what());
    kill(child, SIGKILL);
  }
  int child_status = 0;
  waitpid(child, &child_status, 0);
  return status != 0 || !WIFEXITED(child_status) || WEXITSTATUS(child_status) != 0 ? 1 : 0;
}

}  // namespace
}  // namespace dsinfer::bench

int main(int argc, char** argv) { return dsinfer::bench::run_benchmark("kv_transfer_bench", dsinfer::bench::run, argc, argv); }
