// The FP8 block-scaled GEMM for small token counts (fp8_gemm_wgmma.h): swap-AB warpgroup MMA fed by
// TMA, with DeepSeek's per-128-K promotion of the FP8 products into f32 accumulators.
//
//   y[g, t, n] = sum_kb w_scale[g, n/128, kb] * x_scale[kb, g*group_rows + t] * (W_kb[n, :] . q_kb[t, :])
//
// Shapes: W [G, N, K] e4m3, w_scale [G, ceil(N/128), K/128] f32, q [q_rows, K] e4m3, x_scale
// [K/128, scale_stride] f32, y [G][group_rows, N] bf16 or f32; K % 128 == 0; m_g <= group_rows rows of
// group g are computed (DeepSeek-V3: (N, K) = (7168, 2048), (4096, 7168), (24576, 1536), (2112, 7168),
// (576, 7168); M = 1..64, up to 256).
// Roofline: bytes ~ G * N * K (the weights, read once from HBM) + G * N * K / 32 (their scales)
// + M * K (q, re-read from L2 by every weight tile) + M * N * sizeof(y); FLOPs 2 * M * N * K. At
// M <= 64 that is <= 128 FLOP per weight byte against H200's ~460 (989 TFLOP/s dense FP8 over
// ~4.3 TB/s): memory bound, so the measure is weight bytes per second (7168 x 2048 at 4.3 TB/s: 3.4 us).
//
// Swap-AB: wgmma's M is 64, so the weights go on M and the tokens on N. A = a [64 weight rows]
// [128 K] e4m3 box, B = a [bn tokens][128 K] box, both K-major in shared memory with the 128-byte
// swizzle TMA writes (one 128-byte row = one 128-wide K block of one row; 8-row atoms of 1024 B);
// a k32 step advances both descriptors' start address by 32 bytes.
//
// Launch: a 1-D grid of units (group, weight tile, split, token tile), m tiles fastest so the blocks
// that share a weight tile run together and read it from L2 after the first; rows / 64 consumer
// warpgroups + one producer warp (160 or 288 threads). Dynamic shared memory: stages x (rows + bn)
// x 128 B (the ring) + mbarriers, <= 194 KiB: one block an SM at 8 stages, more with smaller rings.
// Pipeline (per unit, over its K blocks kb_begin..kb_end):
//   producer (one lane): per K block, waits for the stage's "empty" barrier (after its first round),
//     arms "full" with the stage's bytes and issues two TMA boxes: W rows [n0, n0 + rows) and q rows
//     [row(g, t0), + bn) of columns [128 kb, + 128). Rows past the matrices read as zeros.
//   consumer warpgroup w (weight rows n0 + 64w ..): starts loading the next block's scales (one
//     weight scale, bn/4 token scales a thread: one block ahead), waits "full", issues
//     4 x wgmma.m64n{bn}k32.f32.e4m3.e4m3 into a temporary accumulator (the first with scale-d = 0),
//     waits for them, releases the stage (one arrive a warp on "empty") and promotes:
//     acc += tmp * (w_scale * x_scale[token]). The fragment:
//     tmp[4j + 2h + e] = D[16 (warp % 4) + g + 8h][8j + 2c + e] (g = lane / 4, c = lane % 4), i.e.
//     weight row n0 + 64w + 16 (warp % 4) + g + 8h and token t0 + 8j + 2c + e.
//   epilogue: y[t][n] = acc (transposed; tokens >= m_g and rows >= N are not written), or with
//     split-K: the partial tile to the workspace (float4 a thread per j, coalesced), a barrier, one
//     release-acquire add on the tile's counter; the block that sees splits - 1 resets the counter
//     to 0, copies the other partials into its ring (cp.async, all in flight together), adds them
//     in split order 0..splits-1 (its own from registers) and writes y.
// Programmatic launch: the producer issues the first ring's weight boxes, then griddepcontrol.wait,
// then their q boxes; the consumers wait before reading any token scale.
#include "backend/cuda/fp8_gemm_wgmma.h"

#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/hopper.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/wgmma_fp8.cuh"
#include "core/error.h"

namespace dsinfer::backend::cuda {
namespace {

constexpr int kBlockK = 128;       // K per stage: one scale block, one 128-byte swizzled row of e4m3
constexpr int kRowBytes = kBlockK;  // e4m3: one byte an element
constexpr int kWgmmaK = 32;        // K of one fp8 wgmma: 32 bytes of the row
constexpr int kWgmmaM = 64;
constexpr int kWarpgroupThreads = 128;
constexpr int kNamedBarrier = 1;   // the consumers' bar.sync id (0 is __syncthreads)

template <int kRows, int kBn>
struct Config {
  static_assert(kRows == 64 || kRows == 128, "one or two consumer warpgroups");
  static_assert(kBn == 8 || kBn == 16 || kBn == 32 || kBn == 64, "wgmma N of the token tile");
  static constexpr int kConsumers = kRows / kWgmmaM;
  static constexpr int kConsumerThreads = kConsumers * kWarpgroupThreads;
  static constexpr int kConsumerWarps = kConsumerThreads / 32;
  static constexpr int kThreads = kConsumerThreads + 32;  // + the producer warp
  static constexpr int kWBytes = kRows * kRowBytes;        // 8 or 16 KB
  static constexpr int kQBytes = kBn * kRowBytes;          // 1..8 KB
  static constexpr int kStageBytes = kWBytes + kQBytes;
  static constexpr int kAccumulators = kBn / 2;            // f32 a thread: 64 x bn over 128 threads
  // Split-K's last block copies other splits' partial tiles (rows x bn f32 each) into the ring,
  // which holds at least one: two stages or more.
  static_assert(kRows * kBn * 4 <= 2 * kStageBytes);
  // Every box starts on a 1024-byte boundary: the 128-byte swizzle repeats every 8 rows of 128 B,
  // and TMA and wgmma both derive it from the address bits.
  static_assert(kWBytes % 1024 == 0 && kQBytes % 1024 == 0);
};

// Barriers after the ring: full[kFp8WgmmaMaxStages], empty[kFp8WgmmaMaxStages], then the
// last-block flag of split-K (an int).
constexpr int kBarrierBytes = 2 * kFp8WgmmaMaxStages * 8 + 16;

// After the barriers: every scale a unit multiplies by, loaded once before the main loop (a weight
// scale a K block, then bn token scales a K block), so that no promotion waits on a global load.
constexpr int scale_bytes(int bn, int kb_per_split) { return (kb_per_split * (bn + 1) * 4 + 15) / 16 * 16; }

constexpr int smem_bytes(int rows, int bn, int stages, int kb_per_split) {
  return stages * (rows + bn) * kRowBytes + kBarrierBytes + scale_bytes(bn, kb_per_split) + 1024;  // + alignment slack
}
constexpr int kMaxSmemBytes = 227 * 1024;
static_assert(smem_bytes(128, 64, kFp8WgmmaMaxStages, 56) <= kMaxSmemBytes,
              "the ring and a K = 7168 unit's scales must fit one block's shared memory");

struct KernelParams {
  const float* w_scale;        // [G, n_scale_rows, k_blocks]
  const float* x_scale;        // [k_blocks, scale_stride]
  const int32_t* rows_per_group;
  void* y;
  float4* partials;            // split-K workspace
  int32_t* counters;           // split-K, one a tile
  int64_t scale_stride;
  int64_t y_row_stride;
  int64_t y_group_stride;
  int n;
  int n_scale_rows;
  int k_blocks;
  int group_rows;
  int n_tiles;
  int m_tiles;
  int splits;
  int stages;
  bool y_f32;
};

__device__ __forceinline__ void store_y(const KernelParams& p, int64_t index, float value) {
  if (p.y_f32) {
    static_cast<float*>(p.y)[index] = value;
  } else {
    static_cast<__nv_bfloat16*>(p.y)[index] = __float2bfloat16_rn(value);
  }
}

// Writes a consumer thread's fragment, transposed: v[4j + 2h + e] -> y[g][t0 + 8j + 2c + e][row + 8h].
template <int kBn>
__device__ __forceinline__ void store_fragment(const KernelParams& p, const float (&v)[kBn / 2], int group, int row,
                                               int t0, int valid_tokens, int c) {
  const int64_t base = group * p.y_group_stride;
#pragma unroll
  for (int j = 0; j < kBn / 8; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int token = 8 * j + 2 * c + e;
      if (token >= valid_tokens) continue;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int n = row + 8 * h;
        if (n < p.n) store_y(p, base + (t0 + token) * p.y_row_stride + n, v[4 * j + 2 * h + e]);
      }
    }
}

template <int kRows, int kBn>
__global__ void __launch_bounds__(Config<kRows, kBn>::kThreads, 1)
    fp8_wgmma_kernel(const __grid_constant__ CUtensorMap w_map, const __grid_constant__ CUtensorMap q_map,
                     const KernelParams p) {
  using C = Config<kRows, kBn>;
  // The unit: m tile fastest, then split, weight tile, group.
  int unit = blockIdx.x;
  const int m_tile = unit % p.m_tiles;
  unit /= p.m_tiles;
  const int split = unit % p.splits;
  unit /= p.splits;
  const int n_tile = unit % p.n_tiles;
  const int group = unit / p.n_tiles;
  const int tile = (group * p.n_tiles + n_tile) * p.m_tiles + m_tile;  // counters, workspace

  int rows_in_group = p.group_rows;
  if (p.rows_per_group != nullptr) {
    wait_for_previous_kernel();  // the counts may be the previous kernel's output
    rows_in_group = min(max(p.rows_per_group[group], 0), p.group_rows);
  }
  const int t0 = m_tile * kBn;
  if (t0 >= rows_in_group) return;  // uniform over the block, before any barrier exists
  const int valid_tokens = rows_in_group - t0;  // >= 1; tokens past it are not written
  const int n0 = n_tile * kRows;
  const int kb_per_split = (p.k_blocks + p.splits - 1) / p.splits;  // the scale region's stride
  const int kb_begin = static_cast<int>(int64_t{split} * p.k_blocks / p.splits);
  const int kb_end = static_cast<int>(int64_t{split + 1} * p.k_blocks / p.splits);
  const int num_kb = kb_end - kb_begin;  // >= 1: splits <= k_blocks
  const int stages = p.stages;

  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_address = smem_address(smem_raw);
  const uint32_t base = (raw_address + 1023u) & ~1023u;
  const uint32_t barriers = base + stages * C::kStageBytes;
  auto full = [&](int stage) { return barriers + 8u * stage; };
  auto empty = [&](int stage) { return barriers + 8u * (kFp8WgmmaMaxStages + stage); };
  const uint32_t flag_offset = barriers + 16 * kFp8WgmmaMaxStages - raw_address;
  volatile int* last_flag = reinterpret_cast<volatile int*>(smem_raw + flag_offset);
  float* w_scales = reinterpret_cast<float*>(smem_raw + (barriers + kBarrierBytes - raw_address));  // [kb]
  float* x_scales = w_scales + kb_per_split;  // [kb][kBn]
  auto w_box = [&](int stage) { return base + stage * C::kStageBytes; };
  auto q_box = [&](int stage) { return base + stage * C::kStageBytes + C::kWBytes; };

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      mbarrier_init(full(s), 1);                    // the producer's arrive_expect_tx
      mbarrier_init(empty(s), C::kConsumerWarps);   // one arrive a consumer warp
    }
    mbarrier_init_fence();
  }
  __syncthreads();

  if (warp == C::kConsumerWarps) {
    // ---- producer: one lane issues every TMA box ----
    if (lane == 0) {
      tma_prefetch_descriptor(&w_map);
      tma_prefetch_descriptor(&q_map);
      const int w_row = group * p.n + n0;                 // < 2^31 (fp8_wgmma_supported)
      const int q_row = group * p.group_rows + t0;
      const int prologue = min(stages, num_kb);
      // The first ring's weight boxes do not depend on the previous kernel: issue them first.
      for (int i = 0; i < prologue; ++i) {
        mbarrier_arrive_expect_tx(full(i), C::kStageBytes);
        tma_load_2d(w_box(i), &w_map, (kb_begin + i) * kBlockK, w_row, full(i));
      }
      wait_for_previous_kernel();  // q is the previous kernel's output
      for (int i = 0; i < prologue; ++i) tma_load_2d(q_box(i), &q_map, (kb_begin + i) * kBlockK, q_row, full(i));
      int stage = 0;
      uint32_t phase = 0;  // parity of the empty phase to wait for: round - 1
      for (int i = prologue; i < num_kb; ++i) {
        // i >= stages here, so stage = i % stages has been filled before: wait until it is free.
        mbarrier_wait(empty(stage), phase);
        mbarrier_arrive_expect_tx(full(stage), C::kStageBytes);
        const int column = (kb_begin + i) * kBlockK;
        tma_load_2d(w_box(stage), &w_map, column, w_row, full(stage));
        tma_load_2d(q_box(stage), &q_map, column, q_row, full(stage));
        if (++stage == stages) stage = 0, phase ^= 1u;
      }
    }
    return;
  }

  // ---- consumers ----
  const int wg = warp / 4;
  const int g = lane / 4, c = lane % 4;
  const int row = n0 + wg * kWgmmaM + 16 * (warp % 4) + g;  // this thread's weight rows: row, row + 8
  const float* w_scale = p.w_scale + (int64_t{group} * p.n_scale_rows + n0 / kBlockK) * p.k_blocks;
  wait_for_previous_kernel();  // the token scales are the previous kernel's output
  const float* x_scale = p.x_scale + int64_t{group} * p.group_rows + t0;

  float acc[C::kAccumulators];
  float tmp[C::kAccumulators];
  zero_registers(acc);
  zero_registers(tmp);

  // Every scale of this unit into shared memory (one weight scale and kBn token scales a K block),
  // by all consumer threads at once, while the producer's first boxes land. Tokens past the group's
  // rows get 0 (their q rows may hold anything; their columns are never written). cp.async, so that
  // every copy is in flight together: one memory latency, where loads and stores in a loop waited
  // for one latency a round (at K = 7168 and 64 tokens, 15 rounds: ~10 us on an H200).
  for (int index = threadIdx.x; index < num_kb * (kBn + 1); index += C::kConsumerThreads) {
    if (index < num_kb) {
      cp_async_4(smem_address(w_scales + index), w_scale + kb_begin + index, true);
    } else {
      const int i = (index - num_kb) / kBn, token = (index - num_kb) % kBn;
      const bool valid = token < valid_tokens;
      cp_async_4(smem_address(x_scales + i * kBn + token),
                 valid ? x_scale + (kb_begin + i) * p.scale_stride + token : x_scale, valid);
    }
  }
  cp_async_commit();
  cp_async_wait_all();
  named_barrier_sync(kNamedBarrier, C::kConsumerThreads);

  int stage = 0;
  uint32_t phase = 0;
  const uint32_t a_desc = descriptor_base(w_box(0) + wg * kWgmmaM * kRowBytes), b_desc = descriptor_base(q_box(0));
  for (int i = 0; i < num_kb; ++i) {
    const float weight_scale = w_scales[i];
    mbarrier_wait(full(stage), phase);
    __syncwarp();  // lanes leave the spin loop at different times; wgmma needs the warp converged

    fence_registers(tmp);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kBlockK / kWgmmaK; ++k)
      WgmmaFp8<kBn>::run(tmp, descriptor_at(a_desc, stage * C::kStageBytes + k * kWgmmaK),
                         descriptor_at(b_desc, stage * C::kStageBytes + k * kWgmmaK), k);
    wgmma_commit();
    fence_registers(tmp);
    wgmma_wait<0>();
    fence_registers(tmp);
    __syncwarp();
    if (lane == 0) mbarrier_arrive(empty(stage));  // this warp's reads of the stage are complete

#pragma unroll
    for (int j = 0; j < kBn / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float s = weight_scale * x_scales[i * kBn + 8 * j + 2 * c + e];
        acc[4 * j + e] = fmaf(tmp[4 * j + e], s, acc[4 * j + e]);
        acc[4 * j + 2 + e] = fmaf(tmp[4 * j + 2 + e], s, acc[4 * j + 2 + e]);
      }
    if (++stage == stages) stage = 0, phase ^= 1u;
  }

  if (p.splits == 1) {
    store_fragment<kBn>(p, acc, group, row, t0, valid_tokens, c);
    return;
  }

  // ---- split-K: partial tile out, the last block of the tile to arrive reduces ----
  const int consumer = threadIdx.x;  // 0 .. kConsumerThreads - 1
  // partials[((tile * splits + s) * (kBn / 8) + j) * kConsumerThreads + consumer] = acc[4j .. 4j + 3]
  float4* tile_partials = p.partials + int64_t{tile} * p.splits * (kBn / 8) * C::kConsumerThreads;
  float4* mine = tile_partials + int64_t{split} * (kBn / 8) * C::kConsumerThreads;
#pragma unroll
  for (int j = 0; j < kBn / 8; ++j)
    mine[j * C::kConsumerThreads + consumer] = make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
  // One release-acquire add a block (CUTLASS's split-K semaphore): the barrier orders every
  // consumer's partial before consumer 0's add, whose release makes them visible with it; the last
  // block's acquire, and the barrier after it, make every other block's partials visible to all its
  // consumers. (A fence a thread before the barrier, and fences around the add, cost two more
  // memory round trips in the last block's chain.)
  named_barrier_sync(kNamedBarrier, C::kConsumerThreads);
  if (consumer == 0) {
    const bool last = atomic_add_acq_rel_gpu(p.counters + tile, 1) == p.splits - 1;
    // Every split has arrived: nothing else touches the counter in this launch. Zero it for the next.
    if (last) p.counters[tile] = 0;
    *last_flag = last ? 1 : 0;
  }
  named_barrier_sync(kNamedBarrier, C::kConsumerThreads);
  if (*last_flag == 0) return;

  // The other splits' partials come into the ring (free now: every stage has been consumed) by
  // cp.async from L2 (.cg: never a stale line of an earlier launch in this SM's L1), as many splits
  // at once as the ring holds, so that the last block waits one memory latency for them instead of
  // one a split. A thread reads back only its own copies: no barrier. Then the sum in split order
  // 0, 1, ..., splits - 1, whichever block is last: the same bits every time.
  float4* staging = reinterpret_cast<float4*>(smem_raw + (base - raw_address));
  constexpr int kSlotFloat4s = (kBn / 8) * C::kConsumerThreads;  // one split's partial tile
  const int batch = max(1, stages * C::kStageBytes / (kSlotFloat4s * 16));
  float4 total[kBn / 8];
  for (int s0 = 0; s0 < p.splits; s0 += batch) {
    const int s1 = min(s0 + batch, p.splits);
    for (int s = s0; s < s1; ++s) {
      if (s == split) continue;
#pragma unroll
      for (int j = 0; j < kBn / 8; ++j)
        cp_async_16(staging + ((s - s0) * (kBn / 8) + j) * C::kConsumerThreads + consumer,
                    tile_partials + (int64_t{s} * (kBn / 8) + j) * C::kConsumerThreads + consumer, true);
    }
    cp_async_commit();
    cp_async_wait_all();
    for (int s = s0; s < s1; ++s) {
#pragma unroll
      for (int j = 0; j < kBn / 8; ++j) {
        const float4 v = s == split ? make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3])
                                    : staging[((s - s0) * (kBn / 8) + j) * C::kConsumerThreads + consumer];
        if (s == 0) {
          total[j] = v;
        } else {
          total[j].x += v.x, total[j].y += v.y, total[j].z += v.z, total[j].w += v.w;
        }
      }
    }
  }
  float sum[C::kAccumulators];
#pragma unroll
  for (int j = 0; j < kBn / 8; ++j)
    sum[4 * j] = total[j].x, sum[4 * j + 1] = total[j].y, sum[4 * j + 2] = total[j].z, sum[4 * j + 3] = total[j].w;
  store_fragment<kBn>(p, sum, group, row, t0, valid_tokens, c);
}

// ---- host ----

using KernelFunction = void (*)(CUtensorMap, CUtensorMap, KernelParams);

struct Built {
  int rows;
  int bn;
  KernelFunction kernel;
  int threads;
};

template <int kRows, int kBn>
constexpr Built built() {
  return {kRows, kBn, fp8_wgmma_kernel<kRows, kBn>, Config<kRows, kBn>::kThreads};
}

constexpr Built kBuilt[] = {built<64, 8>(),  built<64, 16>(),  built<64, 32>(),  built<64, 64>(),
                            built<128, 8>(), built<128, 16>(), built<128, 32>(), built<128, 64>()};

const Built* find_built(int rows, int bn) {
  for (const Built& b : kBuilt)
    if (b.rows == rows && b.bn == bn) return &b;
  return nullptr;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

int bn_for(int64_t max_m) { return max_m <= 8 ? 8 : max_m <= 16 ? 16 : max_m <= 32 ? 32 : 64; }

int stages_for(int64_t k_blocks, int splits) {
  const int64_t per_split = ceil_div(k_blocks, splits);
  return static_cast<int>(std::clamp<int64_t>(per_split, 2, kFp8WgmmaMaxStages));
}

// Blocks of a kernel one SM holds with `smem` bytes of dynamic shared memory each: the least of its
// shared memory (228 KB, 1 KB reserved a block), registers (65536, allocated 256 a warp) and
// threads (2048). The kernels' register counts are read once from the driver.
int blocks_per_sm(const Built& b, int smem) {
  static const std::array<int, std::size(kBuilt)> registers = [] {
    std::array<int, std::size(kBuilt)> r{};
    for (size_t i = 0; i < std::size(kBuilt); ++i) {
      cudaFuncAttributes attributes{};
      DSINFER_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kBuilt[i].kernel));
      r[i] = attributes.numRegs;
    }
    return r;
  }();
  const int warps = b.threads / 32;
  const int warp_registers = (registers[&b - kBuilt] * 32 + 255) / 256 * 256;
  return std::max(1, std::min({(228 * 1024) / (smem + 1024), 65536 / warp_registers / warps, 2048 / b.threads}));
}

// The chooser's model of the GPU, fitted to fp8_gemm_wgmma_check's timings of every tiling on an
// H200 at DeepSeek-V3's four shapes and 8, 32 and 64 tokens (its picks there come within 5% of the
// fastest measured; the previous, unfitted model's within 13%). A tiling's time is the longer of
// the weights' stream over the chip (HBM) and the busiest SM's units one wave after another, each
// unit at the rate its ring keeps in flight over a loaded memory latency, capped at an SM's share
// of the stream (split between the blocks it holds), plus a quarter of the shorter (the two never
// overlap fully), a quarter of a unit for every wave after the first, and split-K's tail.
constexpr double kHbmBytesPerNs = 3300;
constexpr double kSmMaxBytesPerNs = 60;
constexpr double kMemoryLatencyNs = 2000;
constexpr double kBoundOverlap = 0.25;
constexpr double kLaterWave = 0.25;
constexpr double kSplitFixedNs = 800;     // the last block's chain: the add, the partials' copy, the stores
constexpr double kSplitExtraNs = 300;     // each split past the second

double model_ns(const Fp8WgmmaTiling& t, int64_t max_m, int64_t n, int64_t k, int64_t groups, int sm_count) {
  const int64_t k_blocks = k / kBlockK;
  const int64_t kb_per_split = ceil_div(k_blocks, t.splits);
  const int stages = static_cast<int>(std::min<int64_t>(t.stages, kb_per_split));
  const double stage_bytes = static_cast<double>(t.rows + t.bn) * kRowBytes;
  const int64_t units = groups * ceil_div(n, t.rows) * ceil_div(max_m, t.bn) * t.splits;
  const int64_t sms = std::max(sm_count, 1);
  const int64_t per_sm =
      blocks_per_sm(*find_built(t.rows, t.bn), smem_bytes(t.rows, t.bn, stages, static_cast<int>(kb_per_split)));
  const double resident = static_cast<double>(std::min(per_sm, ceil_div(units, sms)));
  const double rate = std::min(stages * stage_bytes / kMemoryLatencyNs, kSmMaxBytesPerNs / resident);
  const double unit_ns = static_cast<double>(kb_per_split) * stage_bytes / rate;
  const double waves = static_cast<double>(ceil_div(units, sms * per_sm));
  const double sm = waves * unit_ns;
  const double hbm = static_cast<double>(groups * ceil_div(n, t.rows) * t.rows) * k / kHbmBytesPerNs;
  double ns = std::max(hbm, sm) + kBoundOverlap * std::min(hbm, sm) + kLaterWave * (waves - 1) * unit_ns;
  if (t.splits > 1) ns += kSplitFixedNs + kSplitExtraNs * (t.splits - 2);
  return ns;
}

CUtensorMap make_map(const void* data, uint64_t rows, uint64_t k, uint32_t box_rows, const char* what) {
  return make_swizzled_2d_map(data, CU_TENSOR_MAP_DATA_TYPE_UINT8, k, rows, k, kBlockK, box_rows, what);
}

}  // namespace

std::string Fp8WgmmaTiling::describe() const {
  return str_cat("bn ", bn, " rows ", rows, " splits ", splits, " stages ", stages);
}

bool fp8_wgmma_tiling_valid(const Fp8WgmmaTiling& t, int64_t k) {
  return find_built(t.rows, t.bn) != nullptr && t.splits >= 1 && t.splits <= k / kBlockK && t.stages >= 2 &&
         t.stages <= kFp8WgmmaMaxStages;
}

bool fp8_wgmma_supported(const Fp8WgmmaGemm& g) {
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  const int64_t y_row_stride = g.y_row_stride == 0 ? g.n : g.y_row_stride;
  const int64_t y_group_stride = g.y_group_stride == 0 ? g.group_rows * y_row_stride : g.y_group_stride;
  const size_t y_element = g.y_dtype == DType::kF32 ? 4 : 2;
  return g.k > 0 && g.k % kBlockK == 0 && g.k <= kMaxInt && g.n > 0 && g.groups > 0 && g.group_rows >= 0 &&
         g.w != nullptr && g.w_scale != nullptr && g.q != nullptr && g.x_scale != nullptr && g.y != nullptr &&
         aligned(g.w, 16) && aligned(g.q, 16) && aligned(g.w_scale, 4) && aligned(g.x_scale, 4) &&
         (g.y_dtype == DType::kBF16 || g.y_dtype == DType::kF32) && aligned(g.y, y_element) &&
         g.groups * g.n <= kMaxInt && g.q_rows >= g.groups * g.group_rows && g.q_rows <= kMaxInt &&
         g.scale_stride >= g.groups * g.group_rows && y_row_stride >= g.n &&
         (g.groups == 1 || y_group_stride >= g.group_rows * y_row_stride) &&
         ceil_div(g.group_rows, 8) * g.groups * ceil_div(g.n, 64) * (g.k / kBlockK) <= kMaxInt;
}

Fp8WgmmaTiling choose_fp8_wgmma_tiling(int64_t max_m, int64_t n, int64_t k, int64_t groups, int sm_count) {
  const int64_t k_blocks = std::max<int64_t>(k / kBlockK, 1);
  Fp8WgmmaTiling best;
  best.bn = bn_for(max_m);
  best.rows = 64;
  best.splits = 1;
  best.stages = stages_for(k_blocks, 1);
  double best_ns = std::numeric_limits<double>::infinity();
  // Fewer splits first, then the larger tile (q is re-read once per weight tile), then the longer
  // ring (a shorter one lets an SM hold more blocks); a later candidate must be more than 1% faster
  // in the model to win.
  for (int splits = 1; splits <= std::min<int64_t>(k_blocks, 16); ++splits) {
    for (int rows : {128, 64}) {
      const int longest = stages_for(k_blocks, splits);
      for (int stages : {longest, 4, 3}) {
        if (stages > longest) continue;  // (a repeat of the longest cannot win)
        Fp8WgmmaTiling t{best.bn, rows, splits, stages};
        const int64_t tiles = groups * ceil_div(n, rows) * ceil_div(max_m, t.bn);
        if (splits > 1 && tiles > kFp8WgmmaMaxSplitTiles) continue;
        const double ns = model_ns(t, max_m, n, k, groups, sm_count);
        if (ns < best_ns * 0.99) best = t, best_ns = ns;
      }
    }
  }
  return best;
}

size_t fp8_wgmma_workspace_bytes(const Fp8WgmmaTiling& t, int64_t max_m, int64_t n, int64_t groups) {
  if (t.splits <= 1 || max_m <= 0) return 0;
  // One f32 partial tile (rows x bn) a split and tile.
  return static_cast<size_t>(fp8_wgmma_tile_counters(t, max_m, n, groups)) * t.splits * t.rows * t.bn * sizeof(float);
}

int64_t fp8_wgmma_tile_counters(const Fp8WgmmaTiling& t, int64_t max_m, int64_t n, int64_t groups) {
  if (t.splits <= 1 || max_m <= 0) return 0;
  return groups * ceil_div(n, t.rows) * ceil_div(max_m, t.bn);
}

size_t fp8_wgmma_workspace_bound(int64_t max_rows, int64_t n, int64_t k, int64_t groups, int sm_count) {
  // The tiling depends on max_m only through bn and the m tile count, so one max_m a class covers
  // them all: 1-8, 9-16, 17-32, 33-64, then 64 more rows a class.
  size_t bound = 0;
  for (int64_t m = 8; max_rows > 0; m = m < 64 ? 2 * m : m + 64) {
    const int64_t rows = std::min(m, max_rows);
    bound = std::max(bound, fp8_wgmma_workspace_bytes(choose_fp8_wgmma_tiling(rows, n, k, groups, sm_count), rows,
                                                      n, groups));
    if (m >= max_rows) break;
  }
  return bound;
}

int fp8_wgmma_sm_count() {
  int device = 0, sms = 0;
  DSINFER_CUDA_CHECK(cudaGetDevice(&device));
  DSINFER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

void fp8_wgmma_gemm(const Fp8WgmmaGemm& g, const Fp8WgmmaTiling& tiling, cudaStream_t stream) {
  DSINFER_CHECK(fp8_wgmma_supported(g), "fp8_wgmma_gemm: unsupported arguments (N ", g.n, ", K ", g.k, ", groups ",
                g.groups, ", group rows ", g.group_rows, ", q rows ", g.q_rows, ", scale stride ", g.scale_stride,
                "): K must be a multiple of 128, W and q 16-byte aligned, y bf16 or f32, and the strides must cover "
                "the rows");
  DSINFER_CHECK(fp8_wgmma_tiling_valid(tiling, g.k), "fp8_wgmma_gemm: no kernel for the tiling ", tiling.describe(),
                " at K ", g.k);
  if (g.group_rows == 0) return;
  const Built& b = *find_built(tiling.rows, tiling.bn);
  const int64_t n_tiles = ceil_div(g.n, tiling.rows);
  const int64_t m_tiles = ceil_div(g.group_rows, tiling.bn);
  if (tiling.splits > 1) {
    const int64_t counters = fp8_wgmma_tile_counters(tiling, g.group_rows, g.n, g.groups);
    const size_t bytes = fp8_wgmma_workspace_bytes(tiling, g.group_rows, g.n, g.groups);
    DSINFER_CHECK(g.workspace != nullptr && aligned(g.workspace, 16) && g.workspace_bytes >= bytes,
                  "fp8_wgmma_gemm: split-K (", tiling.describe(), ") needs ", bytes,
                  " bytes of 16-byte aligned workspace, got ", g.workspace_bytes);
    DSINFER_CHECK(g.tile_counters != nullptr && g.tile_counter_capacity >= counters, "fp8_wgmma_gemm: split-K (",
                  tiling.describe(), ") needs ", counters, " zeroed tile counters, got ", g.tile_counter_capacity);
  }

  const CUtensorMap w_map = make_map(g.w, static_cast<uint64_t>(g.groups * g.n), g.k, tiling.rows, "the FP8 weights");
  const CUtensorMap q_map = make_map(g.q, static_cast<uint64_t>(g.q_rows), g.k, tiling.bn, "the FP8 activations");
  KernelParams p{};
  p.w_scale = g.w_scale;
  p.x_scale = g.x_scale;
  p.rows_per_group = g.rows_per_group;
  p.y = g.y;
  p.partials = static_cast<float4*>(g.workspace);
  p.counters = g.tile_counters;
  p.scale_stride = g.scale_stride;
  p.y_row_stride = g.y_row_stride == 0 ? g.n : g.y_row_stride;
  p.y_group_stride = g.y_group_stride == 0 ? g.group_rows * p.y_row_stride : g.y_group_stride;
  p.n = static_cast<int>(g.n);
  p.n_scale_rows = static_cast<int>(ceil_div(g.n, kBlockK));
  p.k_blocks = static_cast<int>(g.k / kBlockK);
  p.group_rows = static_cast<int>(g.group_rows);
  p.n_tiles = static_cast<int>(n_tiles);
  p.m_tiles = static_cast<int>(m_tiles);
  p.splits = tiling.splits;
  // The ring gives way to the scales where both would not fit (K = 18432, the dense MLP's down: 7 stages).
  const int kb_per_split = static_cast<int>(ceil_div(p.k_blocks, tiling.splits));
  const int stage_bytes = (tiling.rows + tiling.bn) * kRowBytes;
  const int fitting = (kMaxSmemBytes - smem_bytes(tiling.rows, tiling.bn, 0, kb_per_split)) / stage_bytes;
  DSINFER_CHECK(fitting >= 2, "fp8_wgmma_gemm: K = ", g.k, " in ", tiling.splits,
                " splits has too many scales for shared memory; split K more");
  p.stages = std::min(tiling.stages, fitting);
  p.y_f32 = g.y_dtype == DType::kF32;

  const int smem = smem_bytes(tiling.rows, tiling.bn, p.stages, kb_per_split);
  // A function attribute, not a stream operation: legal (and cheap) during graph capture.
  DSINFER_CUDA_CHECK(cudaFuncSetAttribute(b.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  ProgrammaticLaunch launch(dim3(static_cast<unsigned>(g.groups * n_tiles * tiling.splits * m_tiles)), dim3(b.threads),
                            smem, stream, g.programmatic);
  DSINFER_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, b.kernel, w_map, q_map, p));
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
