// dispatch_bench: expert dispatch and combine on every GPU of the machine, one rank a GPU, by both of
// our paths (parallel::ExpertDispatch over NCCL's all-to-all; parallel::PeerExchange, our kernels
// writing into peer buffers over NVLink, the "peer_" cases), against DeepEP's published figures
// (issue 11):
//
//   NCCL_NVLS_ENABLE=0 build/bench/dispatch_bench [--runs N] [--out FILE]
//                                                  (default bench/results/dispatch_<gpu>.json)
//
// What it measures. The ranks form the layout that dispatches experts (DP attention over every rank,
// expert parallelism: 256 experts, 256 / ranks a rank). Each rank holds T tokens [T, 7168] bf16 and a
// routing [T, 8] (top-8 of 256); T is 128 (decode, DeepEP's low-latency setting) or 4096 (prefill, its
// normal mode). Two routings, drawn on the host with a fixed seed per rank:
//   uniform  each token's 8 distinct experts drawn uniformly from the 256;
//   skewed   4 of them drawn from rank 0's experts and 4 from the others: rank 0 receives nearly
//            every token of every rank (the load EPLB exists to spread).
// Per run, the ranks line up (all_gather_counts waits for every rank's stream), then CUDA events on
// each rank's backend stream time
//   dispatch  the ExpertDispatch constructor: the routing to the host, the rows per rank, the counts
//             round (all_gather_counts), the gather of the rows sent and three all_to_all_rows (rows,
//             expert ids, weights);
//   combine   ExpertDispatch::combine on the received rows (standing in for the experts' output): one
//             all_to_all_rows back and the sum of each token's rows.
// The ranks line up again between the two. The median of --runs runs (at least 10) after kWarmups.
//
// The all-to-all path is NCCL's all-to-all with a host round trip for the counts (the routing copied
// to the host, the counts gathered through the host). The peer path (DeepEP's low-latency kind, with
// windows sized for the case's tokens) has no round trip: its dispatch is the send kernel and the
// wait for every sender, its combine the send back, the wait and the sum. After the timed runs each
// rank checks on the host that the combine of the received rows gave every token its row times the
// number of ranks it went to. DeepEP's figures are EP8 on H800 (its low-latency ones over RDMA):
// targets, not like-for-like comparisons on 2 GPUs.
//
// Bytes and bandwidth, per rank r (rows[i][j]: rows rank i sends to rank j in dispatch, one a token
// with a choice on j; a rank's rows to itself never leave the GPU and are not counted):
//   dispatch_bytes[r] = sum over j != r of rows[r][j] x (7168 x 2 + 8 x 8)   (bf16 row + ids i32 and
//                                                                             weights f32 of its k choices)
//   combine_bytes[r]  = sum over j != r of rows[j][r] x 7168 x 2             (the rows r sends back)
//   GB/s              = bytes / time, 1e9 bytes a second
// Each case reports every rank's median, and the whole: the largest median over the ranks (a layer
// waits for its slowest rank), and the mean bytes a rank over that time.
//
// Anchor: DeepEP's README (V1, now docs/legacy.md) on H800, quoted, not measured here: normal kernels
// intranode at EP8 (4096 tokens, 7168 hidden, top-8, FP8 dispatch, BF16 combine) 153 GB/s dispatch and
// 158 GB/s combine over NVLink, "bottleneck bandwidth" per GPU; low-latency kernels at EP8 (128 tokens,
// FP8 dispatch, BF16 combine, pure RDMA between nodes) 77 us dispatch and 114 us combine. We move bf16
// both ways, and our low-latency case runs over NVLink within one host, not over RDMA.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/make_backend.h"
#include "bench/result_file.h"
#include "cli/flags.h"
#include "core/error.h"
#include "core/json.h"
#include "parallel/expert_dispatch.h"
#include "parallel/nccl_rank_groups.h"
#include "parallel/peer_device_cuda.h"

namespace dsinfer::bench {
namespace {

constexpr int64_t kHidden = 7168;  // DeepSeek-V3's hidden size
constexpr int64_t kTopK = 8;
constexpr int64_t kExperts = 256;
constexpr int kWarmups = 3;  // the first runs connect NCCL's peers and fill the caching allocator

struct Case {
  int64_t tokens;  // per rank
  bool skewed;
  bool peer;  // parallel::PeerExchange (peer buffers for `tokens` a rank) instead of ExpertDispatch
  std::string name() const { return str_cat(peer ? "peer_" : "", "t", tokens, skewed ? "_skewed" : "_uniform"); }
};
constexpr Case kCases[] = {{128, false, false}, {128, true, false}, {4096, false, false}, {4096, true, false},
                           {128, false, true},  {128, true, true},  {4096, false, true},  {4096, true, true}};

// --- Routing (host, [tokens, kTopK] int32 expert ids, row-major) ---

// `count` distinct values drawn uniformly from [begin, end), appended to `out`.
void draw_distinct(std::mt19937_64& random, int32_t begin, int32_t end, int64_t count, std::vector<int32_t>& out) {
  std::uniform_int_distribution<int32_t> pick(begin, end - 1);
  const size_t first = out.size();
  while (static_cast<int64_t>(out.size() - first) < count) {
    const int32_t expert = pick(random);
    if (std::find(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), expert) == out.end())
      out.push_back(expert);
  }
}

// Each token's kTopK distinct experts, uniform over all kExperts.
std::vector<int32_t> uniform_routing(int64_t tokens, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < tokens; ++t) draw_distinct(random, 0, static_cast<int32_t>(kExperts), kTopK, ids);
  return ids;
}

// Half of each token's choices among rank 0's experts [0, experts_per_rank), half among the rest.
std::vector<int32_t> skewed_routing(int64_t tokens, int64_t experts_per_rank, uint64_t seed) {
  DSINFER_CHECK(experts_per_rank >= kTopK / 2, "skewed routing: rank 0 holds ", experts_per_rank,
                " experts, fewer than the ", kTopK / 2, " choices it should get");
  std::mt19937_64 random(seed);
  const auto first_rank_end = static_cast<int32_t>(experts_per_rank);
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < tokens; ++t) {
    draw_distinct(random, 0, first_rank_end, kTopK / 2, ids);
    draw_distinct(random, first_rank_end, static_cast<int32_t>(kExperts), kTopK - kTopK / 2, ids);
  }
  return ids;
}

// --- Traffic and bytes ---

// The rows one rank sends to each rank in dispatch ([ranks]): a token goes once to every rank that
// holds one of its choices (expert e is held by rank e / experts_per_rank), as ExpertDispatch sends it.
std::vector<int64_t> rows_to_each_rank(const std::vector<int32_t>& ids, int64_t experts_per_rank, int ranks) {
  std::vector<int64_t> rows(static_cast<size_t>(ranks), 0);
  const auto tokens = static_cast<int64_t>(ids.size()) / kTopK;
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<bool> sent(static_cast<size_t>(ranks), false);
    for (int64_t j = 0; j < kTopK; ++j) sent[ids[t * kTopK + j] / experts_per_rank] = true;
    for (int r = 0; r < ranks; ++r) rows[r] += sent[r] ? 1 : 0;
  }
  return rows;
}

// A row in dispatch: the token's bf16 hidden state and its routing (kTopK int32 ids, kTopK f32 weights).
int64_t dispatch_bytes(int64_t rows) { return rows * (kHidden * 2 + kTopK * 8); }
// A row in combine: the bf16 expert output alone.
int64_t combine_bytes(int64_t rows) { return rows * kHidden * 2; }
// 1e9 bytes a second from bytes and microseconds.
double gb_per_s(double bytes, double us) { return us > 0 ? bytes / (us * 1e3) : 0; }

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// --- Timing on one rank ---

// A start and a stop event for each run on one stream (created on the calling thread's current GPU).
class RunEvents {
 public:
  RunEvents(cudaStream_t stream, int runs) : stream_(stream) {
    for (int i = 0; i < 2 * runs; ++i) {
      cudaEvent_t event = nullptr;
      DSINFER_CUDA_CHECK(cudaEventCreate(&event));
      events_.push_back(event);
    }
  }
  ~RunEvents() {
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
  }
  RunEvents(const RunEvents&) = delete;
  RunEvents& operator=(const RunEvents&) = delete;

  void start(int run) { DSINFER_CUDA_CHECK(cudaEventRecord(events_[2 * run], stream_)); }
  void stop(int run) { DSINFER_CUDA_CHECK(cudaEventRecord(events_[2 * run + 1], stream_)); }
  // Median microseconds from start to stop, once the stream has passed every stop.
  double median_us() const {
    DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<double> times;
    for (size_t i = 0; i < events_.size(); i += 2) {
      float ms = 0;
      DSINFER_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
      times.push_back(ms * 1e3);
    }
    return median(times);
  }

 private:
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;
};

// Returns once every rank has reached it with its stream drained, so that timed runs start together
// and never overlap the previous one.
void line_up(parallel::Communicator& world) {
  const int64_t nothing[] = {0};
  world.all_gather_counts(nothing);
}

struct RankTimes {
  double dispatch_us = 0, combine_us = 0;  // medians
  int64_t rows_received = -1;              // every rank's rows for this one, its own included (-1: the
                                           // peer path, whose received rows are its fixed windows)
};

// The combine of the received rows themselves gives each token its row times the number of ranks
// it went to: checked on the host, so that a fast path that moves the wrong rows cannot pass.
void check_combined(const std::string& name, backend::Backend& backend, const Tensor& x, const Tensor& combined,
                    const std::vector<int32_t>& ids, int64_t experts_per_rank) {
  Tensor have = backend.to_host(combined), sent = backend.to_host(x);
  const int64_t tokens = x.dim(0);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<bool> to(static_cast<size_t>(kExperts / experts_per_rank), false);
    for (int64_t j = 0; j < kTopK; ++j) to[ids[t * kTopK + j] / experts_per_rank] = true;
    const auto copies = static_cast<float>(std::count(to.begin(), to.end(), true));
    for (int64_t h = 0; h < kHidden; h += 97) {
      const float want = copies * bf16_to_f32(sent.data<uint16_t>()[t * kHidden + h]);
      const float got = bf16_to_f32(have.data<uint16_t>()[t * kHidden + h]);
      DSINFER_CHECK(std::fabs(got - want) <= 1e-2f * std::fabs(want) + 1e-6f, name, ": token ", t, " column ", h,
                    " combined to ", got, ", expected ", want);
    }
  }
}

// Times dispatch and combine of this rank's tokens (ids: its routing) over `world`, or through
// `peer`'s windows when given.
RankTimes time_rank(const std::string& name, backend::Backend& backend, parallel::Communicator& world,
                    parallel::PeerExchange* peer, const std::vector<int32_t>& ids, int64_t tokens, int runs,
                    uint64_t seed) {
  const cudaStream_t stream = backend::cuda::stream_of(backend);
  Tensor x = backend.empty(DType::kBF16, {tokens, kHidden});  // [T, 7168] bf16
  backend.fill_uniform(x, seed, -1.0f, 1.0f);
  Tensor host_ids = Tensor::empty(DType::kI32, {tokens, kTopK});
  std::memcpy(host_ids.raw(), ids.data(), host_ids.nbytes());
  Tensor host_weights = Tensor::empty(DType::kF32, {tokens, kTopK});
  std::fill_n(host_weights.data<float>(), host_weights.numel(), 1.0f / kTopK);
  backend::Routing routing{backend.to_device(host_ids), backend.to_device(host_weights)};  // [T, 8] i32, f32
  const int64_t experts_per_rank = kExperts / world.size();

  RunEvents dispatch_events(stream, runs), combine_events(stream, runs);
  RankTimes times;
  if (peer) peer->set_step_tokens(tokens);
  Tensor combined;
  for (int run = -kWarmups; run < runs; ++run) {
    const bool timed = run >= 0;
    line_up(world);
    if (timed) dispatch_events.start(run);
    if (peer) {
      parallel::PeerExchange::Received received = peer->dispatch(backend, x, routing, experts_per_rank);
      if (timed) dispatch_events.stop(run);
      line_up(world);
      if (timed) combine_events.start(run);
      combined = peer->combine(backend, received.tokens);  // [T, 7168]
    } else {
      parallel::ExpertDispatch dispatch(backend, world, x, routing, experts_per_rank);
      if (timed) dispatch_events.stop(run);
      line_up(world);
      if (timed) combine_events.start(run);
      combined = dispatch.combine(dispatch.tokens());  // [T, 7168]
      times.rows_received = dispatch.tokens().dim(0);
    }
    if (timed) combine_events.stop(run);
  }
  check_combined(name, backend, x, combined, ids, experts_per_rank);
  times.dispatch_us = dispatch_events.median_us();
  times.combine_us = combine_events.median_us();
  return times;
}

// --- Ranks as threads ---

// Runs body(rank) on one thread per rank with GPU `rank` current. A rank that throws aborts `world`
// and the peer windows (when given), so that ranks waiting for it fail too instead of hanging; the
// first rank's error is rethrown once every thread has ended.
void on_every_rank(int ranks, const std::vector<parallel::RankGroups>* groups, const std::function<void(int)>& body,
                   parallel::PeerExchange* peer = nullptr) {
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank)
    threads.emplace_back([&, rank] {
      try {
        DSINFER_CUDA_CHECK(cudaSetDevice(rank));
        body(rank);
      } catch (const std::exception& e) {
        errors[rank] = e.what();
        if (groups) (*groups)[rank].world->abort();
        if (peer) peer->abort();
      }
    });
  for (auto& thread : threads) thread.join();
  for (int rank = 0; rank < ranks; ++rank)
    if (!errors[rank].empty()) throw Error(str_cat("rank ", rank, ": ", errors[rank]));
}

// --- Report ---

// One case's figures: every rank's, printed and added to `figures` (flat keys for the whole, the
// ranks under "<case>_per_rank").
void report_case(const Case& c, const std::vector<std::vector<int64_t>>& rows, const std::vector<RankTimes>& times,
                 Json& figures) {
  const int ranks = static_cast<int>(times.size());
  std::printf("\n%s: %lld tokens a rank, %s routing\n", c.name().c_str(), static_cast<long long>(c.tokens),
              c.skewed ? "skewed (half the choices on rank 0)" : "uniform");
  std::printf("  rank  rows out  rows in   dispatch MB       us     GB/s   combine MB       us     GB/s\n");
  Json per_rank = Json::array();
  double max_dispatch_us = 0, max_combine_us = 0, sum_dispatch_bytes = 0, sum_combine_bytes = 0;
  for (int r = 0; r < ranks; ++r) {
    int64_t rows_out = 0, rows_in = 0;  // to and from the other ranks
    for (int j = 0; j < ranks; ++j)
      if (j != r) {
        rows_out += rows[r][j];
        rows_in += rows[j][r];
      }
    // The bench's count and ExpertDispatch's must agree on what rank r received.
    DSINFER_CHECK(times[r].rows_received < 0 || times[r].rows_received == rows_in + rows[r][r], c.name(), ": rank ", r, " received ",
                  times[r].rows_received, " rows where the routing sends it ", rows_in + rows[r][r]);
    const int64_t d_bytes = dispatch_bytes(rows_out), c_bytes = combine_bytes(rows_in);
    const double d_gb_s = gb_per_s(d_bytes, times[r].dispatch_us), c_gb_s = gb_per_s(c_bytes, times[r].combine_us);
    std::printf("  %4d %9lld %8lld %12.1f %8.1f %8.1f %12.1f %8.1f %8.1f\n", r, static_cast<long long>(rows_out),
                static_cast<long long>(rows_in), d_bytes / 1e6, times[r].dispatch_us, d_gb_s, c_bytes / 1e6,
                times[r].combine_us, c_gb_s);
    Json rank;
    rank["rank"] = r;
    rank["rows_to_others"] = rows_out;
    rank["rows_from_others"] = rows_in;
    rank["dispatch_bytes"] = d_bytes;
    rank["dispatch_us"] = times[r].dispatch_us;
    rank["dispatch_gb_s"] = d_gb_s;
    rank["combine_bytes"] = c_bytes;
    rank["combine_us"] = times[r].combine_us;
    rank["combine_gb_s"] = c_gb_s;
    per_rank.push_back(rank);
    max_dispatch_us = std::max(max_dispatch_us, times[r].dispatch_us);
    max_combine_us = std::max(max_combine_us, times[r].combine_us);
    sum_dispatch_bytes += static_cast<double>(d_bytes);
    sum_combine_bytes += static_cast<double>(c_bytes);
  }
  const double dispatch_gb_s = gb_per_s(sum_dispatch_bytes / ranks, max_dispatch_us);
  const double combine_gb_s = gb_per_s(sum_combine_bytes / ranks, max_combine_us);
  std::printf("   all %9s %8s %12.1f %8.1f %8.1f %12.1f %8.1f %8.1f   (slowest rank; mean bytes a rank)\n", "", "",
              sum_dispatch_bytes / ranks / 1e6, max_dispatch_us, dispatch_gb_s, sum_combine_bytes / ranks / 1e6,
              max_combine_us, combine_gb_s);
  const std::string key = c.name();
  figures[key + "_dispatch_us"] = max_dispatch_us;
  figures[key + "_dispatch_gb_s"] = dispatch_gb_s;
  figures[key + "_combine_us"] = max_combine_us;
  figures[key + "_combine_gb_s"] = combine_gb_s;
  figures[key + "_per_rank"] = per_rank;
}

// DeepEP's published H800 figures (README, V1; now docs/legacy.md) under the names of our figures
// of the same token count, for both of our paths; the name says what differs when this run is not EP8.
Json deepep_anchor(int ranks) {
  Json anchor;
  anchor["name"] = str_cat("DeepEP, H800, EP8, quoted", ranks == 8 ? "" : str_cat("; ours EP", ranks));
  anchor["note"] =
      "normal kernels intranode over NVLink, 4096 tokens, 7168 hidden, top-8, FP8 dispatch and BF16 combine, "
      "bottleneck bandwidth per GPU; low-latency kernels 128 tokens, FP8 dispatch and BF16 combine, pure RDMA "
      "between nodes. Ours: bf16 both ways on one host's NVLink; NCCL all-to-all with a host round trip for the "
      "counts, or (peer_) our kernels writing into peer buffers";
  for (const char* path : {"", "peer_"}) {
    anchor[str_cat(path, "t4096_uniform_dispatch_gb_s")] = 153.0;
    anchor[str_cat(path, "t4096_uniform_combine_gb_s")] = 158.0;
    anchor[str_cat(path, "t128_uniform_dispatch_us")] = 77.0;
    anchor[str_cat(path, "t128_uniform_combine_us")] = 114.0;
  }
  return anchor;
}

int run(int argc, char** argv) {
  // NVLink multicast (NVLS) stays off: on shared machines a program using it can put the host's GPUs
  // out of service. Before any NCCL call.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  cli::Flags flags("dispatch_bench [flags]",
                   "Expert dispatch and combine over NCCL on every GPU, against DeepEP's published figures");
  flags.add_int("runs", "timed runs per case (the median is reported; at least 10)", 20);
  flags.add_string("out", "FILE", "result JSON (default bench/results/dispatch_<gpu>.json)");
  if (!flags.parse(argc - 1, argv + 1)) return 0;
  const int runs = static_cast<int>(std::max<int64_t>(10, flags.get_int("runs")));

  const int ranks = backend::cuda::device_count();
  if (ranks < 2) {
    std::fprintf(stderr, "dispatch_bench: needs 2 or more GPUs and found %d: dispatch moves tokens between GPUs\n",
                 ranks);
    return 1;
  }
  DSINFER_CHECK(kExperts % ranks == 0, "dispatch_bench: ", kExperts, " experts do not divide over ", ranks, " GPUs");
  const int64_t experts_per_rank = kExperts / ranks;
  const std::string device = backend::describe_device("cuda:0");
  std::printf("%d x %s\nexpert dispatch and combine: hidden %lld bf16, top-%lld of %lld experts (%lld a rank), "
              "median of %d runs after %d warm-ups\n",
              ranks, device.c_str(), static_cast<long long>(kHidden), static_cast<long long>(kTopK),
              static_cast<long long>(kExperts), static_cast<long long>(experts_per_rank), runs, kWarmups);

  // Each rank's backend made on a thread of its own (as ShardedModel does), declared before the groups
  // that borrow them so that the groups are destroyed first.
  std::vector<std::unique_ptr<backend::Backend>> backends(static_cast<size_t>(ranks));
  on_every_rank(ranks, nullptr, [&](int rank) { backends[rank] = backend::make_backend(str_cat("cuda:", rank)); });
  std::vector<backend::Backend*> pointers;
  for (auto& backend : backends) pointers.push_back(backend.get());
  const std::vector<parallel::RankGroups> groups =
      parallel::make_nccl_rank_groups({.attention_dp = ranks, .expert_parallel = true}, pointers);

  Json figures = Json::object();
  for (const Case& c : kCases) {
    // Every rank's routing and what it sends where: rows[i][j] from rank i to rank j.
    std::vector<std::vector<int32_t>> ids(static_cast<size_t>(ranks));
    std::vector<std::vector<int64_t>> rows;
    for (int r = 0; r < ranks; ++r) {
      const uint64_t seed = 1000 * static_cast<uint64_t>(c.tokens) + 2 * r + (c.skewed ? 1 : 0);
      ids[r] = c.skewed ? skewed_routing(c.tokens, experts_per_rank, seed) : uniform_routing(c.tokens, seed);
      rows.push_back(rows_to_each_rank(ids[r], experts_per_rank, ranks));
    }
    std::vector<RankTimes> times(static_cast<size_t>(ranks));
    // The peer path's windows, sized for the case (and released after it).
    auto peers = c.peer ? parallel::make_peer_exchanges(ranks, c.tokens, parallel::make_cuda_peer_device())
                        : std::vector<std::unique_ptr<parallel::PeerExchange>>{};
    on_every_rank(ranks, &groups, [&](int rank) {
      times[rank] = time_rank(c.name(), *backends[rank], *groups[rank].world, c.peer ? peers[rank].get() : nullptr,
                              ids[rank], c.tokens, runs, 7 + rank);
    }, c.peer ? peers[0].get() : nullptr);
    report_case(c, rows, times, figures);
  }

  Json result;
  result["benchmark"] = "dispatch";
  result["device"] = str_cat(ranks, " x ", device);
  Json config;
  config["ranks"] = ranks;
  config["hidden"] = kHidden;
  config["top_k"] = kTopK;
  config["experts"] = kExperts;
  config["dtype"] = "bf16";
  config["runs"] = runs;
  config["warmups"] = kWarmups;
  config["dispatch"] = "parallel::ExpertDispatch: NCCL all-to-all, counts through the host; peer_ cases: "
                       "parallel::PeerExchange, peer buffers written over NVLink by our kernels, no host round trip";
  config["timing"] = "CUDA events on each rank's stream, ranks lined up before each, median; whole = slowest rank";
  config["bytes"] = "rows to other ranks x (7168 x 2 + 8 x 8) for dispatch, x 7168 x 2 for combine";
  result["config"] = config;
  result["figures"] = figures;
  result["anchor"] = deepep_anchor(ranks);
  const std::string out = flags.has("out") ? flags.get_string("out")
                                           : str_cat("bench/results/dispatch_", gpu_tag(device), ".json");
  write_result(out, result);
  std::printf("\nwrote %s\n", out.c_str());
  return 0;
}

}  // namespace
}  // namespace dsinfer::bench

int main(int argc, char** argv) {
  return dsinfer::bench::run_benchmark("dispatch_bench", dsinfer::bench::run, argc, argv);
}
