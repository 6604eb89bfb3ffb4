// fp8_gemm_wgmma_check: is every tiling of the FP8 swap-AB wgmma GEMM (fp8_gemm_wgmma.h) right, and
// how fast is it beside cuBLASLt at DeepSeek-V3's small-M shapes? A standalone GPU program, not a
// ctest test (a few GB of GPU memory).
//
//   build/src/backend/cuda/fp8_gemm_wgmma_check [--runs N] [--no-bench] [--chosen-only] [--only N,K]
//                                               [--m M,M,...]   (token counts; default the list below)
//
// Test data that makes the reference exact: weights random e4m3 with random positive block scales;
// activations given already quantized, q random e4m3 with one element of every 128-column group at
// +-448 and power-of-two token scales. Then x = q * scale is exactly a bf16, quantizing x again
// (GemmRunner's path) gives back the same q and scales, and the fallback GEMM (fp8_gemm.h) on x
// computes the same products as the kernel: the two differ only in summation order and in the
// tensor cores' FP8 accumulation (and, for a bf16 y, its rounding). Rows past a group's count hold
// NaN codes and NaN scales in q; they must not reach any written output.
//
// For each (N, K) and M in {1, 2, 4, 5, 8, 16, 24, 32, 33, 48, 64, 96, 128, 200, 256, 512, 1024,
// 4096}: the chosen tiling
// and the others (both tile heights, bn of M and 64, splits 1, 2, 3, 4, 8, short rings), each
// against the reference: every y element within 2^-8 |ref| (bf16 y; 1e-5 for f32) + 1e-3 rms(ref),
// NMSE <= 1e-5, y untouched outside [M, N] (stride gap and guard rows keep their 0xff bytes), two
// runs bitwise equal, the split-K counters back at zero, and a CUDA graph replay (split-K) equal to
// the eager run. The chosen tiling also with an f32 y. From M = 33 on, the tiled kernel
// (fp8_gemm_tiled.h) too, in several configurations (bn 64, 128 and 192; the token scales by TMA
// and, for the chosen one, by cp.async). Grouped (masked MoE layout): 3 groups of 64
// rows with counts {0, 7, 64}, 4 of 256 with {0, 130, 256, 7}, and 8 of 320 with very uneven counts
// {300, 0, 100, 257, 320, 1, 0, 64}, on the device (the tiled kernel's walk by row counts, also with
// 7 blocks, each walking across groups). Through GemmRunner: the wgmma path (quantization +
// kernel, launched programmatically; also replayed from a CUDA graph) must match the reference too;
// cuBLASLt's NMSE is printed for information.
//
// Timing (unless --no-bench): each call after a 256 MB memset (the L2 flushed), CUDA events, median
// of --runs (default 20). Per case: every tiling's us and TB/s of weight bytes (N * K + scales /
// us); then the kernel alone with the chosen tiling, GemmRunner's wgmma path (quantize + GEMM) and
// GemmRunner's cuBLASLt path, and the ratio cuBLASLt / wgmma path (> 1: ours is faster).
// Exit status 0 when everything matches, 1 on any mismatch (lines with FAIL say what), 2 on an error,
// 3 when a case makes no progress for 60 s (a hung kernel: the message names the case).
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/fp8_gemm.h"
#include "backend/cuda/fp8_gemm_tiled.h"
#include "backend/cuda/fp8_gemm_wgmma.h"
#include "backend/cuda/gemm.h"
#include "core/dtype.h"
#include "core/error.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;
using fp8 = __nv_fp8_e4m3;

constexpr int64_t kBlock = 128;
constexpr size_t kFlushBytes = size_t{256} << 20;
constexpr uint8_t kSentinel = 0xff;  // y bytes outside the product (bf16 / f32 NaN)

struct Shape {
  const char* name;
  int64_t n, k;
};

// DeepSeek-V3's FP8 linears at decode (N, K): o_proj-like / shared down, shared gate_up, q_b,
// fused q_a + kv_a, kv_a alone (N = 576: 4.5 scale blocks).
constexpr Shape kShapes[] = {{"down (7168, 2048)", 7168, 2048},
                             {"gate_up (4096, 7168)", 4096, 7168},
                             {"q_b (24576, 1536)", 24576, 1536},
                             {"q_a+kv_a (2112, 7168)", 2112, 7168},
                             {"kv_a (576, 7168)", 576, 7168}};
constexpr int64_t kTokenCounts[] = {1, 2, 4, 5, 8, 16, 24, 32, 33, 48, 64, 96, 128, 200, 256, 512, 1024, 4096};
// Masked grouped layout (decode MoE): these shapes' experts.
constexpr Shape kGroupedShapes[] = {{"experts gate_up (4096, 7168)", 4096, 7168},
                                    {"experts down (7168, 2048)", 7168, 2048}};
struct GroupedLayout {
  int64_t group_rows;
  std::vector<int> counts;
};
// The last: groups of two 256-row m tiles, of one, of a 1-row tile, empty ones, one full.
const GroupedLayout kGroupedLayouts[] = {
    {64, {0, 7, 64}}, {256, {0, 130, 256, 7}}, {320, {300, 0, 100, 257, 320, 1, 0, 64}}};

class Buffer {
 public:
  explicit Buffer(size_t bytes) : bytes_(bytes) { DSINFER_CUDA_CHECK(cudaMalloc(&data_, std::max<size_t>(bytes, 16))); }
  ~Buffer() { cudaFree(data_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

__host__ __device__ uint64_t mix(uint64_t x) {
  x = (x + 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 29);
}

// Uniform in [-1, 1).
__device__ float uniform(uint64_t seed, uint64_t i) {
  return static_cast<float>(mix(seed * 0x632BE59BD9B4E019ull + i) >> 40) / static_cast<float>(1ull << 23) - 1.0f;
}

__device__ fp8 to_e4m3(float v) {
  fp8 out;
  out.__x = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
  return out;
}

__global__ void fill_weights(fp8* w, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    w[i] = to_e4m3(448.0f * uniform(seed, i));
}

// Positive, not powers of two, 1e-3 .. 3e-3.
__global__ void fill_weight_scales(float* s, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    s[i] = 2e-3f + 1e-3f * uniform(seed, i);
}

// q [groups * group_rows (+ extra rows), k] and x_scale [k / 128, scale_stride]. Rows t < count(g)
// of group g: random e4m3, element (mix % 128) of each 128-group at +-448, scale 2^-(3..8). Other
// rows up to q_rows: NaN codes (0x7f) and NaN scales.
__global__ void fill_activations(fp8* q, float* x_scale, int64_t q_rows, int64_t k, int64_t scale_stride,
                                 int64_t group_rows, const int* counts, int64_t groups, uint64_t seed) {
  const int64_t total = q_rows * k;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / k, col = i % k;
    const int64_t group = group_rows > 0 ? row / group_rows : groups;
    const bool valid = group < groups && row - group * group_rows < counts[group];
    const uint64_t block_hash = mix(seed ^ mix(static_cast<uint64_t>(row) * 1000003u + col / kBlock));
    if (!valid) {
      q[i].__x = 0x7f;
      if (col % kBlock == 0) x_scale[col / kBlock * scale_stride + row] = __int_as_float(0x7fffffff);
      continue;
    }
    if (static_cast<int64_t>(block_hash % kBlock) == col % kBlock) {
      q[i] = to_e4m3((block_hash >> 20) & 1 ? 448.0f : -448.0f);
    } else {
      q[i] = to_e4m3(448.0f * uniform(seed, i));
    }
    if (col % kBlock == 0)
      x_scale[col / kBlock * scale_stride + row] = exp2f(-3.0f - static_cast<float>((block_hash >> 24) % 6));
  }
}

// x [groups * group_rows, k] bf16 = q * scale (exact), zero on rows past a group's count.
__global__ void dequantize(const fp8* q, const float* x_scale, bf16* x, int64_t rows, int64_t k, int64_t scale_stride,
                           int64_t group_rows, const int* counts) {
  const int64_t total = rows * k;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / k, col = i % k;
    const bool valid = row - row / group_rows * group_rows < counts[row / group_rows];
    const float value = valid ? static_cast<float>(q[i]) * x_scale[col / kBlock * scale_stride + row] : 0.0f;
    x[i] = __float2bfloat16_rn(value);
  }
}

// Ends the program (status 3) naming the case when no case starts for kLimit: a kernel that waits
// on a barrier phase that never completes hangs its stream, and this says which one.
class Watchdog {
 public:
  static constexpr auto kLimit = std::chrono::seconds(60);
  Watchdog() : last_(now()), thread_([this] { watch(); }) {}
  ~Watchdog() {
    stop_ = true;
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  void at(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    what_ = what;
    last_ = now();
  }

 private:
  static int64_t now() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void watch() {
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      std::lock_guard<std::mutex> lock(mutex_);
      if (now() - last_ > std::chrono::duration_cast<std::chrono::milliseconds>(kLimit).count()) {
        std::fprintf(stderr, "\nfp8_gemm_wgmma_check: HUNG: no progress for 60 s in: %s\n", what_.c_str());
        std::fflush(stdout);
        std::fflush(stderr);
        std::_Exit(3);
      }
    }
  }
  std::mutex mutex_;
  std::string what_ = "start-up";
  int64_t last_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct Timer {
  cudaStream_t stream;
  Buffer& flush;
  int runs;
  double median_us(const std::function<void()>& call) {
    cudaEvent_t start, stop;
    DSINFER_CUDA_CHECK(cudaEventCreate(&start));
    DSINFER_CUDA_CHECK(cudaEventCreate(&stop));
    std::vector<float> times;
    for (int run = 0; run < runs + 2; ++run) {  // two warm-up calls
      DSINFER_CUDA_CHECK(cudaMemsetAsync(flush.get(), run & 0xff, flush.bytes(), stream));
      DSINFER_CUDA_CHECK(cudaEventRecord(start, stream));
      call();
      DSINFER_CUDA_CHECK(cudaEventRecord(stop, stream));
      DSINFER_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      DSINFER_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (run >= 2) times.push_back(ms * 1e3f);
    }
    DSINFER_CUDA_CHECK(cudaEventDestroy(start));
    DSINFER_CUDA_CHECK(cudaEventDestroy(stop));
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }
};

std::vector<uint8_t> bytes_to_host(const void* device, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  DSINFER_CUDA_CHECK(cudaMemcpy(out.data(), device, bytes, cudaMemcpyDeviceToHost));
  return out;
}

// One product's y layout: [groups][group_rows, row_stride] then guard rows, sentinel outside
// rows t < counts[g] and columns < n.
struct YLayout {
  int64_t groups, group_rows, n, row_stride;
  bool f32;
  std::vector<int> counts;
  int64_t element_bytes() const { return f32 ? 4 : 2; }
  int64_t group_stride() const { return group_rows * row_stride; }
  int64_t elements() const { return groups * group_stride() + 2 * row_stride; }  // + 2 guard rows
  size_t bytes() const { return static_cast<size_t>(elements() * element_bytes()); }
};

struct Comparison {
  double nmse = 0;
  double worst = 0;        // max |y - ref| / (rel |ref| + 4e-3 rms)
  int64_t bad = 0;         // elements out of tolerance
  int64_t clobbered = 0;   // elements outside the product that changed
  std::string first;       // the first bad or clobbered element
  bool ok() const { return bad == 0 && clobbered == 0 && nmse <= 1e-5; }
  std::string describe() const {
    char text[256];
    std::snprintf(text, sizeof(text), "nmse %.1e worst %.2f", nmse, worst);
    std::string out = text;
    if (bad) out += str_cat("  ", bad, " out of tolerance");
    if (clobbered) out += str_cat("  ", clobbered, " written outside [M, N]");
    if (!first.empty()) out += "  first: " + first;
    return out;
  }
};

// ref: [groups][group_rows][n] f32.
Comparison compare(const std::vector<uint8_t>& y, const YLayout& layout, const std::vector<float>& ref) {
  Comparison c;
  double ref_sq = 0, diff_sq = 0;
  int64_t valid = 0;
  auto is_valid = [&](int64_t g, int64_t t, int64_t col) {
    return g < layout.groups && t < layout.counts[g] && col < layout.n;
  };
  auto ref_at = [&](int64_t g, int64_t t, int64_t col) { return ref[(g * layout.group_rows + t) * layout.n + col]; };
  for (int64_t g = 0; g < layout.groups; ++g)
    for (int64_t t = 0; t < layout.counts[g]; ++t)
      for (int64_t col = 0; col < layout.n; ++col) {
        ref_sq += static_cast<double>(ref_at(g, t, col)) * ref_at(g, t, col);
        ++valid;
      }
  const double rms = valid ? std::sqrt(ref_sq / valid) : 0.0;
  const double rel = layout.f32 ? 1e-5 : 1.0 / 256;
  for (int64_t i = 0; i < layout.elements(); ++i) {
    const int64_t g = i / layout.group_stride(), t = i % layout.group_stride() / layout.row_stride,
                  col = i % layout.row_stride;
    const uint8_t* raw = y.data() + i * layout.element_bytes();
    if (!is_valid(g, t, col)) {
      bool untouched = true;
      for (int64_t b = 0; b < layout.element_bytes(); ++b) untouched &= raw[b] == kSentinel;
      if (!untouched) {
        if (c.clobbered++ == 0 && c.first.empty())
          c.first = str_cat("written outside: group ", g, " row ", t, " col ", col);
      }
      continue;
    }
    float value;
    if (layout.f32) {
      std::memcpy(&value, raw, 4);
    } else {
      bf16 h;
      std::memcpy(&h, raw, 2);
      value = __bfloat162float(h);
    }
    const double r = ref_at(g, t, col), d = static_cast<double>(value) - r;
    diff_sq += d * d;
    // The absolute term is the tensor cores' own: an FP8 wgmma adds a 128-K block's products with less
    // than f32 precision (promotion to f32 happens once a block), which on this data's +-448 codes
    // measured up to 1.7e-3 of the output's rms on H200 at every tiling alike.
    const double tolerance = rel * std::fabs(r) + 4e-3 * rms;
    const double ratio = std::isfinite(d) ? std::fabs(d) / std::max(tolerance, 1e-30) : INFINITY;
    c.worst = std::max(c.worst, ratio);
    if (!(ratio <= 1.0)) {
      if (c.bad++ == 0 && c.first.empty())
        c.first = str_cat("group ", g, " row ", t, " col ", col, ": ", value, " vs ", r);
    }
  }
  c.nmse = ref_sq > 0 ? diff_sq / ref_sq : diff_sq;
  if (!std::isfinite(c.nmse)) c.nmse = INFINITY;
  return c;
}

int bn_for(int64_t m) { return m <= 8 ? 8 : m <= 16 ? 16 : m <= 32 ? 32 : 64; }

// One way to run the product: a swap-AB tiling (fp8_gemm_wgmma.h) or a tiled configuration
// (fp8_gemm_tiled.h).
struct Candidate {
  bool tiled = false;
  Fp8WgmmaTiling tiling;
  Fp8TiledConfig config;
  std::string describe() const { return tiled ? config.describe() : tiling.describe(); }
  bool split() const { return !tiled && tiling.splits > 1; }
  size_t workspace_bytes(int64_t max_m, int64_t n, int64_t groups) const {
    return tiled ? 0 : fp8_wgmma_workspace_bytes(tiling, max_m, n, groups);
  }
  void launch(const Fp8WgmmaGemm& g, cudaStream_t stream) const {
    if (tiled) {
      fp8_tiled_gemm(g, config, stream);
    } else {
      fp8_wgmma_gemm(g, tiling, stream);
    }
  }
};

bool same(const Fp8WgmmaTiling& a, const Fp8WgmmaTiling& b) {
  return a.bn == b.bn && a.rows == b.rows && a.splits == b.splits && a.stages == b.stages;
}

// The chosen swap-AB tiling first, then (unless chosen_only) the other swap-AB tilings up to 256
// rows, then the tiled configurations from 33 rows on.
std::vector<Candidate> candidates_for(int64_t max_m, int64_t n, int64_t k, int64_t groups, int sms, bool chosen_only) {
  const Fp8WgmmaTiling chosen = choose_fp8_wgmma_tiling(max_m, n, k, groups, sms);
  std::vector<Candidate> out = {{false, chosen, {}}};
  if (max_m > 32) out.push_back({true, {}, choose_fp8_tiled_config(max_m, n, k, groups, sms)});
  if (chosen_only) return out;
  auto add = [&](const Fp8WgmmaTiling& t) {
    if (!fp8_wgmma_tiling_valid(t, k)) return;
    if (t.splits > 1 && fp8_wgmma_tile_counters(t, max_m, n, groups) > kFp8WgmmaMaxSplitTiles) return;
    for (const Candidate& have : out)
      if (!have.tiled && same(have.tiling, t)) return;
    out.push_back({false, t, {}});
  };
  if (max_m <= 256) {
    std::vector<int> bns = {bn_for(max_m)};
    if (bns[0] != 64) bns.push_back(64);
    for (int bn : bns)
      for (int rows : {64, 128})
        for (int splits : {1, 2, 3, 4, 8}) add({bn, rows, splits, chosen.stages});
    add({chosen.bn, chosen.rows, chosen.splits, 2});  // the ring wraps on every K block
    add({chosen.bn, chosen.rows, chosen.splits, 3});
  }
  if (max_m > 32) {
    const Fp8TiledConfig picked = choose_fp8_tiled_config(max_m, n, k, groups, sms);
    for (int bm : {64, 128, 256})
      for (int bn : {64, 128, 192})
        for (int stages : {0, 3, 4}) {
          const Fp8TiledConfig c{bm, bn, stages, 0};
          if (!fp8_tiled_config_valid(c) || (c.bm == picked.bm && c.bn == picked.bn && c.stages == picked.stages))
            continue;
          if ((bm == 64 && max_m > 1024) || (bm == 256 && max_m < 128)) continue;
          out.push_back({true, {}, c});
        }
    out.push_back({true, {}, {picked.bm, picked.bn, picked.stages, sms / 2}});  // fewer blocks than SMs
    out.push_back({true, {}, {picked.bm, picked.bn, picked.stages, 0, false}});  // token scales by cp.async
    if (groups > 1) out.push_back({true, {}, {picked.bm, picked.bn, picked.stages, 7}});  // blocks across groups
  }
  return out;
}

struct Context {
  cudaStream_t stream;
  Timer timer;
  Watchdog& watchdog;
  bool bench;
  bool chosen_only;
  int sms;
  std::vector<int64_t> token_counts;
  Buffer counters{kFp8WgmmaMaxSplitTiles * sizeof(int32_t)};
  int failures = 0;
};

// The inputs of one product, on the device.
struct Problem {
  std::string name;
  int64_t n, k, groups, group_rows, q_rows, scale_stride;
  std::vector<int> counts;
  const fp8* w;
  const float* w_scale;
  const fp8* q;
  const float* x_scale;
  const int32_t* device_counts;  // nullptr: dense
  std::vector<float> reference;  // [groups][group_rows][n]
};

bool counters_zero(Context& ctx) {
  std::vector<uint8_t> raw = bytes_to_host(ctx.counters.get(), ctx.counters.bytes());
  return std::all_of(raw.begin(), raw.end(), [](uint8_t b) { return b == 0; });
}

// Checks one tiling (and times it); returns its median us (0 without --bench).
double check_tiling(Context& ctx, const Problem& p, const Candidate& tiling, bool f32, bool is_chosen) {
  ctx.watchdog.at(str_cat(p.name, ", ", tiling.describe(), f32 ? ", f32 y" : ""));
  YLayout layout{p.groups, p.group_rows, p.n, p.n + 8, f32, p.counts};
  Buffer y(layout.bytes());
  const size_t workspace_bytes = tiling.workspace_bytes(p.group_rows, p.n, p.groups);
  Buffer workspace(workspace_bytes);
  Fp8WgmmaGemm g;
  g.w = p.w;
  g.w_scale = p.w_scale;
  g.q = p.q;
  g.q_rows = p.q_rows;
  g.x_scale = p.x_scale;
  g.scale_stride = p.scale_stride;
  g.group_rows = p.group_rows;
  g.rows_per_group = p.device_counts;
  g.y = y.get();
  g.y_dtype = f32 ? DType::kF32 : DType::kBF16;
  g.y_row_stride = layout.row_stride;
  g.y_group_stride = layout.group_stride();
  g.n = p.n;
  g.k = p.k;
  g.groups = p.groups;
  g.workspace = workspace.get();
  g.workspace_bytes = workspace_bytes;
  g.tile_counters = ctx.counters.get<int32_t>();
  g.tile_counter_capacity = kFp8WgmmaMaxSplitTiles;

  auto run_once = [&] {
    DSINFER_CUDA_CHECK(cudaMemsetAsync(y.get(), kSentinel, y.bytes(), ctx.stream));
    DSINFER_CUDA_CHECK(cudaMemsetAsync(workspace.get(), 0xff, workspace.bytes(), ctx.stream));  // NaN partials
    tiling.launch(g, ctx.stream);
    DSINFER_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    return bytes_to_host(y.get(), y.bytes());
  };
  const std::vector<uint8_t> first = run_once();
  const std::vector<uint8_t> second = run_once();
  const Comparison c = compare(first, layout, p.reference);
  const bool deterministic = first == second;
  const bool counters_ok = counters_zero(ctx);
  bool graph_ok = true;
  if (tiling.split() || tiling.tiled) {  // split-K replays must find the counters zero: each launch resets them
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    DSINFER_CUDA_CHECK(cudaMemsetAsync(y.get(), kSentinel, y.bytes(), ctx.stream));
    DSINFER_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    DSINFER_CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
    tiling.launch(g, ctx.stream);
    DSINFER_CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &graph));
    DSINFER_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 3; ++replay) DSINFER_CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream));
    DSINFER_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    graph_ok = bytes_to_host(y.get(), y.bytes()) == first && counters_zero(ctx);
    DSINFER_CUDA_CHECK(cudaGraphExecDestroy(exec));
    DSINFER_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  const bool ok = c.ok() && deterministic && counters_ok && graph_ok;
  if (!ok) ++ctx.failures;

  double us = 0;
  if (ctx.bench && !f32) us = ctx.timer.median_us([&] { tiling.launch(g, ctx.stream); });
  const double weight_bytes = static_cast<double>(p.groups * p.n * p.k) +
                              4.0 * p.groups * ((p.n + kBlock - 1) / kBlock) * (p.k / kBlock);
  std::string line = str_cat("  ", tiling.describe(), f32 ? " (f32 y)" : "");
  line.resize(std::max<size_t>(line.size(), 48), ' ');
  if (us > 0) {
    char timing[96];
    std::snprintf(timing, sizeof(timing), "%8.2f us %5.2f TB/s %6.0f TFLOP/s  ", us, weight_bytes / us / 1e6,
                  2.0 * p.groups * p.group_rows * p.n * p.k / us / 1e6);
    line += timing;
  }
  line += c.describe();
  if (!deterministic) line += "  NOT DETERMINISTIC";
  if (!counters_ok) line += "  COUNTERS NOT RESET";
  if (!graph_ok) line += "  GRAPH REPLAY DIFFERS";
  if (!ok) line += str_cat("  FAIL [", p.name, "]");
  if (is_chosen) line += "  <- chosen";
  std::printf("%s\n", line.c_str());
  return us;
}

// The reference: the fallback GEMM on the dequantized activations, f32 out.
std::vector<float> reference(Context& ctx, const Problem& p, const bf16* x) {
  Buffer y_ref(static_cast<size_t>(p.groups * p.group_rows * p.n) * 4);
  FallbackGemm f;
  f.x = x;
  f.x_row_stride = p.k;
  f.x_batch_stride = p.group_rows * p.k;
  f.w = p.w;
  f.w_dtype = DType::kF8E4M3;
  f.w_batch_stride = p.n * p.k;
  f.w_scale = p.w_scale;
  f.scale_row_stride = p.k / kBlock;
  f.scale_batch_stride = (p.n + kBlock - 1) / kBlock * (p.k / kBlock);
  f.y = y_ref.get();
  f.y_dtype = DType::kF32;
  f.y_row_stride = p.n;
  f.y_batch_stride = p.group_rows * p.n;
  f.rows = p.group_rows;
  f.n = p.n;
  f.k = p.k;
  f.batch = p.groups;
  gemm_fallback(f, ctx.stream);
  DSINFER_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  std::vector<float> out(static_cast<size_t>(p.groups * p.group_rows * p.n));
  DSINFER_CUDA_CHECK(cudaMemcpy(out.data(), y_ref.get(), out.size() * 4, cudaMemcpyDeviceToHost));
  return out;
}

// Fills q and scales (rows past the counts poisoned), dequantizes, computes the reference.
void prepare(Context& ctx, Problem& p, Buffer& q, Buffer& x_scale, Buffer& x, uint64_t seed) {
  ctx.watchdog.at(str_cat(p.name, ", inputs and reference"));
  Buffer counts(p.groups * sizeof(int));
  DSINFER_CUDA_CHECK(cudaMemcpy(counts.get(), p.counts.data(), p.groups * sizeof(int), cudaMemcpyHostToDevice));
  DSINFER_CUDA_CHECK(cudaMemsetAsync(x_scale.get(), 0xff, x_scale.bytes(), ctx.stream));
  fill_activations<<<1024, 256, 0, ctx.stream>>>(q.get<fp8>(), x_scale.get<float>(), p.q_rows, p.k, p.scale_stride,
                                                 p.group_rows, counts.get<int>(), p.groups, seed);
  DSINFER_CUDA_CHECK_LAUNCH();
  dequantize<<<1024, 256, 0, ctx.stream>>>(q.get<fp8>(), x_scale.get<float>(), x.get<bf16>(), p.groups * p.group_rows,
                                           p.k, p.scale_stride, p.group_rows, counts.get<int>());
  DSINFER_CUDA_CHECK_LAUNCH();
  p.q = q.get<fp8>();
  p.x_scale = x_scale.get<float>();
  p.reference = reference(ctx, p, x.get<bf16>());
}

// GemmRunner on x (bf16): the wgmma path (checked against the reference, eager and from a graph)
// and cuBLASLt (NMSE printed). Returns {wgmma path us, cuBLASLt us}.
std::pair<double, double> check_runner(Context& ctx, const Problem& p, const bf16* x) {
  ctx.watchdog.at(str_cat(p.name, ", GemmRunner"));
  GemmOptions wgmma_options;
  wgmma_options.fp8_fallback_max_rows = 0;
  wgmma_options.fp8_wgmma_max_rows = int64_t{1} << 30;
  GemmOptions cublas_options;
  cublas_options.fp8_wgmma_max_rows = 0;
  GemmRunner wgmma_runner(wgmma_options), cublas_runner(cublas_options);
  const int64_t m = p.group_rows;
  const LinearPlan plan = plan_linear(wgmma_options, DType::kF8E4M3, DType::kBF16, m, p.n, p.k);
  const LinearPlan cublas_plan = plan_linear(cublas_options, DType::kF8E4M3, DType::kBF16, m, p.n, p.k);
  Buffer scratch(std::max(plan.scratch_bytes, cublas_plan.scratch_bytes));
  YLayout layout{1, m, p.n, p.n + 8, false, {static_cast<int>(m)}};
  Buffer y(layout.bytes());
  LinearArgs args;
  args.x = x;
  args.weight = {p.w, DType::kF8E4M3, p.w_scale};
  args.y = y.get();
  args.y_row_stride = layout.row_stride;
  args.tokens = m;
  args.out_features = p.n;
  args.in_features = p.k;
  args.scratch = scratch.get();
  args.scratch_bytes = scratch.bytes();

  auto run_once = [&](GemmRunner& runner) {
    DSINFER_CUDA_CHECK(cudaMemsetAsync(y.get(), kSentinel, y.bytes(), ctx.stream));
    runner.linear(args, ctx.stream);
    DSINFER_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    return bytes_to_host(y.get(), y.bytes());
  };
  const std::vector<uint8_t> eager = run_once(wgmma_runner);
  const bool path_ok = plan.path == GemmPath::kFp8Wgmma && wgmma_runner.last_path() == GemmPath::kFp8Wgmma;
  const Comparison c = compare(eager, layout, p.reference);
  // The same from a captured graph (quantization + programmatic wgmma launch), replayed twice.
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  DSINFER_CUDA_CHECK(cudaMemsetAsync(y.get(), kSentinel, y.bytes(), ctx.stream));
  DSINFER_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  DSINFER_CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
  wgmma_runner.linear(args, ctx.stream);
  DSINFER_CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &graph));
  DSINFER_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) DSINFER_CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream));
  DSINFER_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  const bool graph_ok = bytes_to_host(y.get(), y.bytes()) == eager;
  DSINFER_CUDA_CHECK(cudaGraphExecDestroy(exec));
  DSINFER_CUDA_CHECK(cudaGraphDestroy(graph));
  const bool ok = c.ok() && path_ok && graph_ok;
  if (!ok) ++ctx.failures;
  std::printf("  GemmRunner wgmma path (quantize + GEMM): %s%s%s%s\n", c.describe().c_str(),
              path_ok ? "" : "  WRONG PATH (not kFp8Wgmma)", graph_ok ? "" : "  GRAPH REPLAY DIFFERS",
              ok ? "" : str_cat("  FAIL [", p.name, " GemmRunner]").c_str());

  const Comparison cublas = compare(run_once(cublas_runner), layout, p.reference);
  std::printf("  GemmRunner cuBLASLt path (%s): %s (information only)\n",
              cublas_runner.last_path() == GemmPath::kCublasLt ? "cuBLASLt" : "fallback", cublas.describe().c_str());
  if (!ctx.bench) return {0, 0};
  ctx.watchdog.at(str_cat(p.name, ", GemmRunner timing"));
  const double wgmma_us = ctx.timer.median_us([&] { wgmma_runner.linear(args, ctx.stream); });
  const double cublas_us = ctx.timer.median_us([&] { cublas_runner.linear(args, ctx.stream); });
  return {wgmma_us, cublas_us};
}

void dense_cases(Context& ctx, const Shape& shape) {
  const int64_t n = shape.n, k = shape.k;
  const int64_t scale_count = (n + kBlock - 1) / kBlock * (k / kBlock);
  Buffer w(n * k), w_scale(scale_count * 4);
  fill_weights<<<1024, 256, 0, ctx.stream>>>(w.get<fp8>(), n * k, 11);
  fill_weight_scales<<<64, 256, 0, ctx.stream>>>(w_scale.get<float>(), scale_count, 12);
  DSINFER_CUDA_CHECK_LAUNCH();
  const double weight_bytes = static_cast<double>(n * k + 4 * scale_count);
  for (int64_t m : ctx.token_counts) {
    Problem p;
    p.name = str_cat(shape.name, " M ", m);
    p.n = n, p.k = k, p.groups = 1, p.group_rows = m;
    p.q_rows = m + 3;         // poisoned rows after the tokens: TMA boxes reach them
    p.scale_stride = m + 8;   // not the row count: catches a stride mix-up (a multiple of 4: TMA's scales)
    p.counts = {static_cast<int>(m)};
    p.w = w.get<fp8>(), p.w_scale = w_scale.get<float>(), p.device_counts = nullptr;
    Buffer q(p.q_rows * k), x_scale((k / kBlock) * p.scale_stride * 4), x(m * k * 2);
    prepare(ctx, p, q, x_scale, x, 100 + m);
    const Fp8WgmmaTiling chosen = choose_fp8_wgmma_tiling(m, n, k, 1, ctx.sms);
    std::printf("\n%s, M %lld: chosen %s\n", shape.name, static_cast<long long>(m), chosen.describe().c_str());
    double chosen_us = 0, best_us = 1e30;
    std::string best;
    const std::vector<Candidate> candidates = candidates_for(m, n, k, 1, ctx.sms, ctx.chosen_only);
    // GemmRunner's pick: the first candidate of the kernel its options give this M.
    const bool runner_tiled = m >= GemmOptions{}.fp8_tiled_min_rows && fp8_tiled_preferred(m, n, k, 1, ctx.sms);
    for (size_t i = 0; i < candidates.size(); ++i) {
      const bool is_chosen = i == (runner_tiled ? 1 : 0);
      const double us = check_tiling(ctx, p, candidates[i], false, is_chosen);
      if (is_chosen) chosen_us = us;
      if (us > 0 && us < best_us) best_us = us, best = candidates[i].describe();
    }
    check_tiling(ctx, p, candidates[0], true, !runner_tiled);
    if (candidates.size() > 1 && candidates[1].tiled) check_tiling(ctx, p, candidates[1], true, runner_tiled);
    const auto [runner_us, cublas_us] = check_runner(ctx, p, x.get<bf16>());
    if (ctx.bench) {
      std::printf("  => kernel %.2f us (%.2f TB/s, best %s %.2f us) | GemmRunner: wgmma path %.2f us, cuBLASLt %.2f us,"
                  " cuBLASLt / ours %.2fx\n",
                  chosen_us, weight_bytes / chosen_us / 1e6, best.c_str(), best_us, runner_us, cublas_us,
                  cublas_us / runner_us);
    }
  }
}

void grouped_cases(Context& ctx, const Shape& shape, const GroupedLayout& grouped) {
  const int64_t n = shape.n, k = shape.k, groups = static_cast<int64_t>(grouped.counts.size()),
                group_rows = grouped.group_rows;
  const int64_t scale_count = groups * (n + kBlock - 1) / kBlock * (k / kBlock);
  Buffer w(groups * n * k), w_scale(scale_count * 4), device_counts(groups * sizeof(int32_t));
  fill_weights<<<1024, 256, 0, ctx.stream>>>(w.get<fp8>(), groups * n * k, 21);
  fill_weight_scales<<<64, 256, 0, ctx.stream>>>(w_scale.get<float>(), scale_count, 22);
  DSINFER_CUDA_CHECK_LAUNCH();
  Problem p;
  p.name = str_cat(shape.name, " grouped");
  p.n = n, p.k = k, p.groups = groups, p.group_rows = group_rows;
  p.q_rows = groups * group_rows;
  p.scale_stride = groups * group_rows + 4;
  p.counts = grouped.counts;
  DSINFER_CUDA_CHECK(
      cudaMemcpy(device_counts.get(), p.counts.data(), groups * sizeof(int32_t), cudaMemcpyHostToDevice));
  p.w = w.get<fp8>(), p.w_scale = w_scale.get<float>(), p.device_counts = device_counts.get<int32_t>();
  Buffer q(p.q_rows * k), x_scale((k / kBlock) * p.scale_stride * 4), x(groups * group_rows * k * 2);
  prepare(ctx, p, q, x_scale, x, 7);
  const Fp8WgmmaTiling chosen = choose_fp8_wgmma_tiling(group_rows, n, k, groups, ctx.sms);
  std::string counts;
  for (int c : grouped.counts) counts += str_cat(counts.empty() ? "" : ", ", c);
  std::printf("\n%s, %lld groups of %lld rows, counts {%s}: chosen %s\n", shape.name, static_cast<long long>(groups),
              static_cast<long long>(group_rows), counts.c_str(), chosen.describe().c_str());
  const std::vector<Candidate> candidates = candidates_for(group_rows, n, k, groups, ctx.sms, ctx.chosen_only);
  for (size_t i = 0; i < candidates.size(); ++i) check_tiling(ctx, p, candidates[i], false, i == 0);
  check_tiling(ctx, p, candidates[0], true, true);
  if (candidates.size() > 1 && candidates[1].tiled) check_tiling(ctx, p, candidates[1], true, false);
}

int run(Context& ctx, const std::vector<Shape>& shapes) {
  int device = 0;
  DSINFER_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  DSINFER_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf("%s: %d SMs; %s, runs %d\n", prop.name, prop.multiProcessorCount,
              ctx.bench ? "timing each call after a 256 MB L2 flush" : "no timing", ctx.timer.runs);
  DSINFER_CHECK(prop.major == 9, "fp8_gemm_wgmma_check needs an sm_90 GPU (Hopper), got sm_", prop.major, prop.minor);
  DSINFER_CUDA_CHECK(cudaMemset(ctx.counters.get(), 0, ctx.counters.bytes()));
  DSINFER_CUDA_CHECK(cudaDeviceSynchronize());
  for (const Shape& shape : shapes) dense_cases(ctx, shape);
  for (const Shape& shape : kGroupedShapes) {
    bool wanted = false;
    for (const Shape& s : shapes) wanted |= s.n == shape.n && s.k == shape.k;
    if (wanted)
      for (const GroupedLayout& grouped : kGroupedLayouts) grouped_cases(ctx, shape, grouped);
  }
  std::printf("\n%s\n", ctx.failures == 0 ? "all checks match" : str_cat(ctx.failures, " checks FAILED").c_str());
  return ctx.failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace dsinfer::backend::cuda

int main(int argc, char** argv) {
  using namespace dsinfer::backend::cuda;
  int runs = 20;
  bool bench = true, chosen_only = false;
  std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
  std::vector<int64_t> token_counts(std::begin(kTokenCounts), std::end(kTokenCounts));
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::max(3, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--no-bench") == 0) {
      bench = false;
    } else if (std::strcmp(argv[i], "--chosen-only") == 0) {
      chosen_only = true;
    } else if (std::strcmp(argv[i], "--m") == 0 && i + 1 < argc) {
      token_counts.clear();
      for (const char* p = argv[++i]; *p != '\0';) {
        char* end = nullptr;
        token_counts.push_back(std::strtoll(p, &end, 10));
        if (end == p || token_counts.back() <= 0) {
          std::fprintf(stderr, "fp8_gemm_wgmma_check: --m wants a comma-separated list of token counts\n");
          return 2;
        }
        p = *end == ',' ? end + 1 : end;
      }
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      long long n = 0, k = 0;
      if (std::sscanf(argv[++i], "%lld,%lld", &n, &k) != 2) {
        std::fprintf(stderr, "fp8_gemm_wgmma_check: --only wants N,K\n");
        return 2;
      }
      std::erase_if(shapes, [&](const Shape& s) { return s.n != n || s.k != k; });
    } else {
      std::fprintf(stderr, "usage: fp8_gemm_wgmma_check [--runs N] [--no-bench] [--chosen-only] [--only N,K] [--m M,M,...]\n");
      return 2;
    }
  }
  try {
    Watchdog watchdog;
    cudaStream_t stream;
    DSINFER_CUDA_CHECK(cudaStreamCreate(&stream));
    Buffer flush(kFlushBytes);
    Context ctx{stream, Timer{stream, flush, runs}, watchdog, bench, chosen_only, fp8_wgmma_sm_count(), token_counts};
    const int status = run(ctx, shapes);
    DSINFER_CUDA_CHECK(cudaStreamDestroy(stream));
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp8_gemm_wgmma_check: %s\n", e.what());
    return 2;
  }
}
