// One-token bf16 products (gemv.h): y[g, n] = sum_k x[g, k] * W[g, n, k], float32 accumulation.
//
// Roofline: reads groups * n * k * 2 bytes of weights once (x is a few KB, re-read through L1);
// 2 * groups * n * k FLOPs, far below the FP32 pipe. DeepSeek-V3's one-token products run from
// 8 MB (kv_a) to 528 MB (the dense MLP's gate and up), 2 to 125 us at 4.2 TB/s.
//
// Launch: 128 threads (4 warps). The weight rows are tiled over three levels (GemvTiling, chosen on
// the host by choose_gemv_tiling from measurements):
//   - a team of `team` lanes (8, 16 or 32; rows of 64 to 512 elements are better served by narrow
//     teams) owns `rows` consecutive rows of one group (rows divides n) and walks their 16-byte
//     chunks together: lane l of the team takes chunks l, l + team, ...;
//   - `split` warps (1, 2 or 4, only with whole-warp teams) share the same rows and cut their chunks
//     into `split` contiguous slices, so that narrow products (n = 576) still have thousands of
//     warps and every block is short; the slices' sums meet in shared memory in a fixed order;
//   - a block holds 4 / split such warp groups.
// Each lane issues `loads` / `rows` chunk loads for each of its rows before it uses any (`loads`
// 16-byte loads in flight per lane), with ld.global.nc.L1::no_allocate so that the streamed
// weights do not evict x from L1. A team's sum is a butterfly of shuffles within the team. Rows
// past the end (the last block) recompute the last team's rows and are not written.
//
// Programmatic launch (gemv.h): griddepcontrol.wait comes after the first round of weight loads
// and before the first read of x; every write of y comes after it.
#include "backend/cuda/gemv.h"

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/vector.cuh"
#include "core/error.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;
using fp8 = __nv_fp8_e4m3;

constexpr int kWarpSize = 32;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kChunk = 16;  // bytes per weight load
constexpr int kFp8ScaleBlock = 128;
constexpr int64_t kMaxK = 65536;

bool aligned(const void* p, int64_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// acc += dot(x chunk, w chunk): 8 bf16 pairs, the element at the lower address in the low half.
__device__ __forceinline__ float dot_chunk(const uint4& x, const uint4& w, float acc) {
  const uint32_t xs[4] = {x.x, x.y, x.z, x.w};
  const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc = fmaf(bf16_low(xs[i]), bf16_low(ws[i]), acc);
    acc = fmaf(bf16_high(xs[i]), bf16_high(ws[i]), acc);
  }
  return acc;
}

// sum over 16 e4m3 weights times 16 bf16 activations (x0: the first 8, x1: the next 8).
__device__ __forceinline__ float dot_fp8_chunk(const uint4& x0, const uint4& x1, const uint4& w) {
  const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
  const uint32_t xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
  float part = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 lo = fp8x2_to_float2(ws[i]);
    const float2 hi = fp8x2_to_float2(ws[i] >> 16);
    part = fmaf(bf16_low(xs[2 * i]), lo.x, part);
    part = fmaf(bf16_high(xs[2 * i]), lo.y, part);
    part = fmaf(bf16_low(xs[2 * i + 1]), hi.x, part);
    part = fmaf(bf16_high(xs[2 * i + 1]), hi.y, part);
  }
  return part;
}

template <typename Out>
__device__ __forceinline__ void store(Out* p, float v) {
  if constexpr (std::is_same_v<Out, float>) {
    *p = v;
  } else {
    *p = __float2bfloat16_rn(v);
  }
}

struct Params {
  const bf16* x;
  int64_t x_group_stride;
  const void* w;  // bf16 or e4m3
  int64_t w_group_stride;
  const float* scale;  // e4m3: [ceil(n / 128), scale_row_stride]
  int scale_row_stride;
  void* y;
  int64_t y_group_stride;
  int n;
  int chunks;      // 16-byte chunks per row: k / 8 (bf16), k / 16 (e4m3)
  int total_rows;  // n * groups
};

template <typename W, typename Out, int kTeam, int kRows, int kSplit, int kLoads>
__global__ void __launch_bounds__(kThreads) gemv_kernel(const Params p) {
  constexpr bool kFp8 = std::is_same_v<W, fp8>;
  static_assert(kSplit == 1 || kTeam == kWarpSize, "K is split over whole warps only");
  static_assert(kWarps % kSplit == 0 && kLoads % kRows == 0, "a tiling must divide the block and the loads");
  constexpr int kTeamsPerWarp = kWarpSize / kTeam;
  constexpr int kWarpGroups = kWarps / kSplit;
  constexpr int kRowsPerBlock = kWarpGroups * kTeamsPerWarp * kRows;
  constexpr int kUnroll = kLoads / kRows;

  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int slice = warp % kSplit;
  const int team_lane = lane % kTeam;
  const int team = (warp / kSplit) * kTeamsPerWarp + lane / kTeam;
  const int first = blockIdx.x * kRowsPerBlock + team * kRows;
  const bool writes = first < p.total_rows;
  // kRows divides n (and so total_rows): a team's rows lie in one group. Idle teams redo the last.
  const int row0 = writes ? first : p.total_rows - kRows;
  const int group = row0 / p.n;

  const uint4* w_rows[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int n = row0 + r - group * p.n;
    w_rows[r] = reinterpret_cast<const uint4*>(static_cast<const W*>(p.w) + group * p.w_group_stride) +
                static_cast<int64_t>(n) * p.chunks;
  }
  const uint4* x = reinterpret_cast<const uint4*>(p.x + group * p.x_group_stride);
  // e4m3: the team's rows share one 128-row scale block (kRows divides 128 and row0); a 16-byte
  // chunk lies in one 128-column block, chunk c in block c / 8.
  const float* scale_row = kFp8 ? p.scale + static_cast<int64_t>(row0 / kFp8ScaleBlock) * p.scale_row_stride : nullptr;

  const int per_slice = (p.chunks + kSplit - 1) / kSplit;
  const int begin = slice * per_slice + team_lane;
  const int end = min(p.chunks, (slice + 1) * per_slice);
  const int steps = begin < end ? (end - begin + kTeam - 1) / kTeam : 0;  // this lane's chunks

  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.0f;
  for (int s0 = 0; s0 < steps; s0 += kUnroll) {
    uint4 w[kUnroll][kRows];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = begin + (s0 + u) * kTeam;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        w[u][r] = s0 + u < steps ? load_streaming(w_rows[r] + c) : make_uint4(0, 0, 0, 0);
      }
    }
    if (s0 == 0) wait_for_previous_kernel();
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (s0 + u >= steps) break;
      const int c = begin + (s0 + u) * kTeam;
      if constexpr (kFp8) {
        const uint4 x0 = __ldg(x + 2 * c), x1 = __ldg(x + 2 * c + 1);
        const float block_scale = __ldg(scale_row + c / (kFp8ScaleBlock / 16));
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r] = fmaf(dot_fp8_chunk(x0, x1, w[u][r]), block_scale, acc[r]);
      } else {
        const uint4 xv = __ldg(x + c);
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r] = dot_chunk(xv, w[u][r], acc[r]);
      }
    }
  }
  wait_for_previous_kernel();  // lanes without chunks have not waited yet

#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int offset = kTeam / 2; offset > 0; offset /= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], offset);
  }
  if constexpr (kSplit == 1) {
    Out* y = static_cast<Out*>(p.y) + group * p.y_group_stride + (row0 - group * p.n);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (writes && team_lane == r % kTeam) store(y + r, acc[r]);  // rows past kTeam: lanes wrap
    }
  } else {
    __shared__ float partial[kWarps][kRows];
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) partial[warp][r] = acc[r];
    }
    __syncthreads();
    // One thread per (warp group, row): the slices' sums in slice order.
    if (threadIdx.x < kWarpGroups * kRows) {
      const int wg = threadIdx.x / kRows;
      const int r = threadIdx.x % kRows;
      const int out_first = blockIdx.x * kRowsPerBlock + wg * kRows;
      if (out_first < p.total_rows) {
        float sum = 0.0f;
#pragma unroll
        for (int s = 0; s < kSplit; ++s) sum += partial[wg * kSplit + s][r];
        const int out_group = out_first / p.n;
        store(static_cast<Out*>(p.y) + out_group * p.y_group_stride + (out_first - out_group * p.n) + r, sum);
      }
    }
  }
}

template <typename W, typename Out, int kTeam, int kRows, int kSplit, int kLoads>
void launch(const Params& params, bool programmatic, cudaStream_t stream) {
  constexpr int kRowsPerBlock = (kWarps / kSplit) * (kWarpSize / kTeam) * kRows;
  ProgrammaticLaunch launch(dim3(static_cast<unsigned>((params.total_rows + kRowsPerBlock - 1) / kRowsPerBlock)),
                            dim3(kThreads), 0, stream, programmatic);
  DSINFER_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, gemv_kernel<W, Out, kTeam, kRows, kSplit, kLoads>, params));
}

using Launcher = void (*)(const Params&, bool, cudaStream_t);

struct Built {
  GemvTiling tiling;
  Launcher bf16_out;  // bf16 weights
  Launcher f32_out;
  Launcher fp8_bf16_out;  // e4m3 weights (bf16 output only: no FP8 product writes f32)
};

template <int kTeam, int kRows, int kSplit, int kLoads>
constexpr Built built() {
  return {{kTeam, kRows, kSplit, kLoads}, &launch<bf16, bf16, kTeam, kRows, kSplit, kLoads>,
          &launch<bf16, float, kTeam, kRows, kSplit, kLoads>, &launch<fp8, bf16, kTeam, kRows, kSplit, kLoads>};
}

// Every tiling compiled: narrow teams with 4 or 8 rows (short rows: one load per lane and row),
// whole-warp teams with 1, 2 or 4 rows, K split over 1, 2 or 4 warps, 8 or 16 loads in flight.
constexpr Built kBuilt[] = {
    built<8, 4, 1, 8>(),   built<8, 8, 1, 8>(),   built<16, 4, 1, 8>(),  built<16, 8, 1, 8>(),
    built<32, 1, 1, 8>(),  built<32, 1, 2, 8>(),  built<32, 1, 4, 8>(),  built<32, 2, 1, 8>(),
    built<32, 2, 2, 8>(),  built<32, 2, 4, 8>(),  built<32, 4, 1, 8>(),  built<32, 4, 2, 8>(),
    built<32, 4, 4, 8>(),  built<32, 1, 1, 16>(), built<32, 1, 2, 16>(), built<32, 1, 4, 16>(),
    built<32, 2, 1, 16>(), built<32, 2, 2, 16>(), built<32, 2, 4, 16>(), built<32, 4, 1, 16>(),
    built<32, 4, 2, 16>(), built<32, 4, 4, 16>(),
};

const Built* find_built(const GemvTiling& t) {
  for (const Built& b : kBuilt)
    if (b.tiling.team == t.team && b.tiling.rows == t.rows && b.tiling.split == t.split && b.tiling.loads == t.loads)
      return &b;
  return nullptr;
}

}  // namespace

std::vector<GemvTiling> gemv_tilings() {
  std::vector<GemvTiling> out;
  for (const Built& b : kBuilt) out.push_back(b.tiling);
  return out;
}

std::string GemvTiling::describe() const { return str_cat("team ", team, " rows ", rows, " split ", split, " loads ", loads); }

int64_t weight_bytes(DType dtype) { return dtype == DType::kF8E4M3 ? 1 : 2; }

// Measured on an H200 (gemv_check, one call with the L2 flushed; us, chosen vs the next best form):
//   - rows of at most 64 chunks: 16-lane teams of 4 rows (w_uk 9.4 vs 11.5 for whole warps, w_uv 9.7);
//   - rows of at most 128 chunks: 16-lane teams of 8 rows (FP8 q_b 15.8 vs 16.5, and 21.9 with K
//     split over 4 warps, which leaves lanes idle);
//   - the widest bf16 products: one row per warp, K over 4 warps, 16 loads in flight (dense gate_up
//     126.1 vs 131.8, LM head 420.0 vs 425.4);
//   - the rest: 4 rows per warp, K over 4 warps, 8 loads (q_a 11.6, q_b 24.2, o_proj 63.3, dense down
//     70.2, FP8 q_a 8.9, FP8 o_proj 36.6, FP8 dense down 41.5: the best or within 8% of it).
GemvTiling choose_gemv_tiling(int64_t n, int64_t k, int64_t groups, DType w_dtype) {
  const int64_t chunks = k * weight_bytes(w_dtype) / kChunk;
  GemvTiling t;
  if (chunks <= 64 && n % 4 == 0) {
    t.team = chunks <= 8 ? 8 : 16;
    t.rows = 4;
    return t;
  }
  if (chunks <= 128 && n % 8 == 0) {
    t.team = 16;
    t.rows = 8;
    return t;
  }
  t.split = 4;
  if (n * groups >= 32768 && chunks >= 512) {
    t.loads = 16;
    return t;
  }
  t.rows = n % 4 == 0 ? 4 : n % 2 == 0 ? 2 : 1;
  return t;
}

bool gemv_supported(const Gemv& g) {
  const int64_t y_bytes = g.y_dtype == DType::kF32 ? 4 : 2;
  const bool fp8 = g.w_dtype == DType::kF8E4M3;
  const int64_t k_multiple = kChunk / weight_bytes(g.w_dtype);  // elements per 16-byte chunk
  return (g.w_dtype == DType::kBF16 || (fp8 && g.w_scale != nullptr && g.groups == 1 && g.y_dtype == DType::kBF16)) &&
         (g.y_dtype == DType::kBF16 || g.y_dtype == DType::kF32) && g.x != nullptr && g.w != nullptr &&
         g.y != nullptr && g.n > 0 && g.k > 0 && g.groups >= 1 && g.k % k_multiple == 0 && g.k <= kMaxK &&
         g.n * g.groups < (int64_t{1} << 31) && aligned(g.x, 16) && aligned(g.w, 16) && aligned(g.y, y_bytes) &&
         (g.groups == 1 || (g.x_group_stride % 8 == 0 && g.w_group_stride % k_multiple == 0));
}

void gemv(const Gemv& g, const GemvTiling& tiling, cudaStream_t stream) {
  DSINFER_CHECK(gemv_supported(g), "gemv: unsupported arguments (n ", g.n, ", k ", g.k, ", groups ", g.groups,
                "): k must fill 16-byte chunks (and be at most 65536), x and w 16-byte aligned, y bf16 or f32, "
                "e4m3 weights ungrouped with scales and a bf16 y");
  const Built* built = find_built(tiling);
  DSINFER_CHECK(built != nullptr, "gemv: no kernel is built for the tiling ", tiling.describe());
  DSINFER_CHECK(g.n % tiling.rows == 0, "gemv: ", tiling.rows, " rows per team must divide n = ", g.n);
  const int scale_row_stride = static_cast<int>((g.k + kFp8ScaleBlock - 1) / kFp8ScaleBlock);
  const Params params{g.x, g.x_group_stride, g.w, g.w_group_stride, g.w_scale, scale_row_stride, g.y,
                      g.y_group_stride, static_cast<int>(g.n), static_cast<int>(g.k * weight_bytes(g.w_dtype) / kChunk),
                      static_cast<int>(g.n * g.groups)};
  const Launcher launcher = g.w_dtype == DType::kF8E4M3 ? built->fp8_bf16_out
                            : g.y_dtype == DType::kF32  ? built->f32_out
                                                        : built->bf16_out;
  launcher(params, g.programmatic, stream);
}

void gemv(const Gemv& g, cudaStream_t stream) {
  gemv(g, choose_gemv_tiling(g.n, g.k, g.groups, g.w_dtype), stream);
}

}  // namespace dsinfer::backend::cuda
