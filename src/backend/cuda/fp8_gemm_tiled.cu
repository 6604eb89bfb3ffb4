// The FP8 block-scaled GEMM for many token rows (fp8_gemm_tiled.h): persistent blocks over output
// tiles of up to 256 x 128, tokens on warpgroup MMA's M and weights on its N, TMA-fed, with DeepSeek's
// per-128-K promotion of the FP8 products into f32 accumulators.
//
//   y[g, t, n] = sum_kb w_scale[g, n/128, kb] * x_scale[kb, g*group_rows + t] * (q_kb[t, :] . W_kb[n, :])
//
// Shapes: q [q_rows, K] e4m3, x_scale [K/128, scale_stride] f32 (token-contiguous), W [G, N, K] e4m3,
// w_scale [G, ceil(N/128), K/128] f32, y [G][group_rows, N] bf16 or f32; K % 128 == 0, N even.
// DeepSeek-V3: (N, K) = (7168, 2048), (4096, 7168), (24576, 1536), (2112, 7168); M = 33 .. 16K.
// Roofline: FLOPs 2 M N K; bytes G N K + M K + M N sizeof(y) (+ scales). At M = 4096 and K = 7168
// that is ~2000 FLOP a byte against H200's ~350 (FP8 ~1480 TFLOP/s over ~4.3 TB/s): tensor-core
// bound, so the measure is TFLOP/s against the FP8 ceiling measured in the same run. At M <= 256 it
// is the weights' bytes (fp8_gemm_wgmma.h's regime; the chooser picks between the two kernels).
//
// Tiles (bm x bn): 64 x 64/128 (one consumer warpgroup), 128 x 64/128 (two), 256 x 128 (two, each
// taking two 64-row "waves" of the tile: one ring stage feeds four MMA groups). Per stage in shared
// memory: A = the tile's bm token rows x 128 K bytes, B = its bn weight rows x 128 K bytes, both
// K-major with TMA's 128-byte swizzle (1024-byte atoms); a k32 step moves both descriptors by 32
// bytes. Beside the ring, a scale slot a stage: the bm token scales of the K block, then the tile's
// weight scale (one: a tile of bn <= 128 rows starting at a multiple of bn sits in one 128-row scale
// block). Then the epilogue's bf16 staging, 8 KB a 64 x 64 box.
//
// Launch: a persistent 1-D grid (one block an SM, at most the tiles); block b takes tiles b, b + grid,
// ... of groups x m tiles x n tiles, walked in bands of kBand n tiles (all m tiles of a band, then the
// next band) so that the blocks running together share a band of weights and the activations in L2.
// Threads: bm / 64 (at most two) consumer warpgroups, then one producer warpgroup (256 or 384
// threads). With two consumers the producer gives its registers away (setmaxnreg 40 / 232).
// Pipeline (a ring of `stages`, shared by all the block's tiles, so the producer loads the next
// tile's first K blocks while the consumers finish and store the current one):
//   producer warp (the others exit): per K block, waits for the stage's "empty" barrier (after its
//     first round); lane 0 arms "full" with the stage's bytes and issues the two TMA boxes (rows past
//     the matrices read as zeros); all 32 lanes copy the token scales and lane 0 the weight scale with
//     4-byte cp.async (rows past the group's q rows read as zeros), then arrive on "full" when their
//     copies land (cp.async.mbarrier.arrive.noinc: "full" expects 1 + 32 arrivals a phase).
//   consumer warpgroup w, per K block and wave v (token rows v * (consumers * 64) + 64 w .. + 63):
//     waits "full", issues 4 x wgmma.m64n{bn}k32.f32.e4m3.e4m3 into a temporary accumulator (the
//     first overwrites it), waits for them, releases the stage after its last wave (one arrive a warp
//     on "empty") and promotes: acc[r][c] += tmp[r][c] * x_scale[r] * w_scale. The MMAs run for rows
//     past the group's count too (never stored): any branch around them makes ptxas serialise every
//     wgmma (C7518), which cost a third of the speed when it happened. The fragment:
//     tmp[4j + 2h + e] = D[16 (warp % 4) + g + 8h][8j + 2c + e], g = lane / 4, c = lane % 4.
//   epilogue: with a bf16 y on 16-byte strides and a full tile (or the product's last rows, which the
//     map clips), each warpgroup writes its rows into the swizzled staging (conflict-free: the 8 g of a
//     column block land in 8 different 16-byte chunks), fences, and one thread issues TMA stores of
//     the 64 x 64 boxes (whole 128-byte lines; asynchronous, so the next tile's MMAs start while they
//     drain; the staging is rewritten only after cp.async.bulk.wait_group.read). Other tiles (f32 y,
//     a masked group's partial rows) store pairs of columns from the registers.
//   Measured (H200, 4096 x 4096 x 7168): ~205 us; without the promotion (wrong results, a probe)
//   ~128 us, so the promotion, not the loads, is what remains; two temporaries (one block's MMAs
//   under the previous block's promotion) and warpgroups taking turns to issue were both slower.
// Programmatic launch: with dense rows (no per-group counts) the producer issues the first tile's
// weight boxes, then griddepcontrol.wait, then everything else; the consumers wait before their
// first token row count. With per-group counts everything waits first (the tile walk reads them).
#include "backend/cuda/fp8_gemm_tiled.h"

#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
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

constexpr int kBlockK = 128;   // K per stage: one scale block, one 128-byte swizzled row of e4m3
constexpr int kRowBytes = kBlockK;
constexpr int kWgmmaK = 32;    // K of one fp8 wgmma: 32 bytes of the row
constexpr int kWgmmaM = 64;
constexpr int kWarpgroupThreads = 128;
constexpr int kMaxStages = 16;
constexpr int kBand = 8;       // n tiles walked together
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
constexpr int kMaxSmemBytes = 227 * 1024;
constexpr int kScaleArrivals = 32;  // the producer warp's lanes: one cp.async arrival each a phase

template <int kConsumers, int kWaves, int kBn>
struct Config {
  static_assert(kConsumers == 1 || kConsumers == 2, "one or two consumer warpgroups");
  static_assert(kWaves == 1 || (kWaves == 2 && kConsumers == 2), "two waves only with two warpgroups");
  static_assert(kBn == 64 || kBn == 128, "wgmma N of the weight tile");
  static constexpr int kWaveRows = kConsumers * kWgmmaM;  // token rows all warpgroups take in one wave
  static constexpr int kBm = kWaves * kWaveRows;
  static constexpr int kThreads = (kConsumers + 1) * kWarpgroupThreads;
  static constexpr int kConsumerWarps = kConsumers * 4;
  static constexpr int kABytes = kBm * kRowBytes;
  static constexpr int kStageBytes = kABytes + kBn * kRowBytes;
  static constexpr int kScaleSlotBytes = (kBm + 4) * 4;  // bm token scales, the weight scale, padding
  // The epilogue's bf16 staging: a [64 rows][64 columns] 128-byte-swizzled box (8 KB) for every
  // 64 columns of every warpgroup's rows of every wave.
  static constexpr int kBoxBytes = 64 * 64 * 2;
  static constexpr int kStagingBytes = kWaves * kConsumers * (kBn / 64) * kBoxBytes;
  static constexpr int kAccumulators = kBn / 2;          // f32 a thread: 64 x bn over 128 threads
  static_assert(kABytes % 1024 == 0 && kStageBytes % 1024 == 0, "boxes start on 1024-byte swizzle atoms");
};

constexpr int kBarrierBytes = 2 * kMaxStages * 8;  // full[kMaxStages], empty[kMaxStages]

constexpr int smem_bytes(int stage_bytes, int scale_slot_bytes, int staging_bytes, int stages) {
  return 1024 + stages * (stage_bytes + scale_slot_bytes) + staging_bytes + kBarrierBytes;  // + alignment slack
}

constexpr int max_stages(int stage_bytes, int scale_slot_bytes, int staging_bytes) {
  return std::min(kMaxStages,
                  (kMaxSmemBytes - 1024 - kBarrierBytes - staging_bytes) / (stage_bytes + scale_slot_bytes));
}

struct KernelParams {
  const float* w_scale;  // [G, n_scale_rows, k_blocks]
  const float* x_scale;  // [k_blocks, scale_stride]
  const int32_t* rows_per_group;
  void* y;
  int64_t scale_stride;
  int64_t y_row_stride;
  int64_t y_group_stride;
  int n;
  int n_scale_rows;
  int k_blocks;
  int group_rows;
  int m_tiles;
  int n_tiles;
  int tiles;  // groups * m_tiles * n_tiles
  int stages;
  bool y_f32;
  bool tma_store;  // bf16 y through the y map (full tiles); otherwise direct stores
};

struct Tile {
  int group, m, n;
};

// Tile `index` of the walk: groups outermost, then bands of kBand n tiles, then m tiles, then the n
// tiles of the band.
__device__ __forceinline__ Tile tile_at(int index, const KernelParams& p) {
  const int per_group = p.m_tiles * p.n_tiles;
  Tile t;
  t.group = index / per_group;
  int r = index - t.group * per_group;
  const int band = r / (kBand * p.m_tiles);
  r -= band * kBand * p.m_tiles;
  const int width = min(kBand, p.n_tiles - band * kBand);
  t.m = r / width;
  t.n = band * kBand + (r - t.m * width);
  return t;
}

__device__ __forceinline__ int rows_in_group(const KernelParams& p, int group) {
  return p.rows_per_group == nullptr ? p.group_rows : min(max(p.rows_per_group[group], 0), p.group_rows);
}

template <bool kF32>
__device__ __forceinline__ void store_pair(void* y, int64_t index, float a, float b) {
  if constexpr (kF32) {
    *reinterpret_cast<float2*>(static_cast<float*>(y) + index) = make_float2(a, b);
  } else {
    *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(y) + index) = __floats2bfloat162_rn(a, b);
  }
}

// A consumer thread's accumulators to y: rows t0 + row + 8h (h = 0, 1) below `rows`, columns
// n0 + 8j + 2c (+ 1) below N.
template <int kBn, bool kF32>
__device__ __forceinline__ void store_tile(const KernelParams& p, const float (&acc)[kBn / 2], int group, int t0,
                                           int row, int rows, int n0, int c) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int token = t0 + row + 8 * h;
    if (token >= rows) continue;
    const int64_t base = group * p.y_group_stride + token * p.y_row_stride + n0;
#pragma unroll
    for (int j = 0; j < kBn / 8; ++j) {
      const int column = 8 * j + 2 * c;
      if (n0 + column < p.n) store_pair<kF32>(p.y, base + column, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
    }
  }
}

template <int kConsumers, int kWaves, int kBn>
__global__ void __launch_bounds__(Config<kConsumers, kWaves, kBn>::kThreads, 1)
    fp8_tiled_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap w_map,
                     const __grid_constant__ CUtensorMap y_map, const KernelParams p) {
  using C = Config<kConsumers, kWaves, kBn>;
  constexpr int kBm = C::kBm;
  const int stages = p.stages;

  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_address = smem_address(smem_raw);
  const uint32_t base = (raw_address + 1023u) & ~1023u;
  const uint32_t staging = base + stages * C::kStageBytes;  // 1024-aligned: stages are
  const uint32_t scale_base = staging + C::kStagingBytes;
  const uint32_t barriers = scale_base + stages * C::kScaleSlotBytes;
  auto full = [&](int stage) { return barriers + 8u * stage; };
  auto empty = [&](int stage) { return barriers + 8u * (kMaxStages + stage); };
  auto a_box = [&](int stage) { return base + stage * C::kStageBytes; };
  auto b_box = [&](int stage) { return base + stage * C::kStageBytes + C::kABytes; };
  auto scale_slot = [&](int stage) { return scale_base + stage * C::kScaleSlotBytes; };
  const float* scales = reinterpret_cast<const float*>(smem_raw + (scale_base - raw_address));

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wg = warp / 4;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      mbarrier_init(full(s), 1 + kScaleArrivals);  // the TMA arm + the lanes' scale copies
      mbarrier_init(empty(s), C::kConsumerWarps);  // one arrive a consumer warp
    }
    mbarrier_init_fence();
  }
  __syncthreads();

  if (wg == kConsumers) {
    // ---- producer ----
    if constexpr (kConsumers == 2) setmaxnreg_dec<kProducerRegisters>();
    if (warp != 4 * kConsumers) return;
    const int k_blocks = p.k_blocks;
    // The first tile's first weight boxes do not depend on the previous kernel: with dense rows the
    // first tile is never skipped, so they go out before the wait.
    int prefetched = 0;
    if (p.rows_per_group == nullptr && static_cast<int>(blockIdx.x) < p.tiles) {
      const Tile t = tile_at(blockIdx.x, p);
      prefetched = min(stages, k_blocks);
      if (lane == 0)
        for (int i = 0; i < prefetched; ++i) {
          mbarrier_arrive_expect_tx(full(i), C::kStageBytes);
          tma_load_2d(b_box(i), &w_map, i * kBlockK, t.group * p.n + t.n * kBn, full(i));
        }
    }
    wait_for_previous_kernel();  // q, x_scale and the row counts are the previous kernel's output
    int stage = 0, it = 0;
    uint32_t phase = 0;  // parity of the ring round of `stage`
    for (int index = blockIdx.x; index < p.tiles; index += gridDim.x) {
      const Tile t = tile_at(index, p);
      const int t0 = t.m * kBm;
      if (t0 >= rows_in_group(p, t.group)) continue;
      const int q_row = t.group * p.group_rows + t0;
      const int w_row = t.group * p.n + t.n * kBn;
      const float* w_scale = p.w_scale + (int64_t{t.group} * p.n_scale_rows + t.n * kBn / kBlockK) * k_blocks;
      for (int kb = 0; kb < k_blocks; ++kb, ++it) {
        if (it >= stages) mbarrier_wait(empty(stage), phase ^ 1u);  // the previous round's readers are done
        if (lane == 0) {
          if (it >= prefetched) {
            mbarrier_arrive_expect_tx(full(stage), C::kStageBytes);
            tma_load_2d(b_box(stage), &w_map, kb * kBlockK, w_row, full(stage));
          }
          tma_load_2d(a_box(stage), &q_map, kb * kBlockK, q_row, full(stage));
        }
        const float* x_scale = p.x_scale + int64_t{kb} * p.scale_stride + q_row;
#pragma unroll
        for (int i = lane; i < kBm; i += 32) {
          const bool valid = t0 + i < p.group_rows;  // the group's q rows; past them: zeros
          cp_async_4(scale_slot(stage) + 4 * i, valid ? x_scale + i : p.x_scale, valid);
        }
        if (lane == 0) cp_async_4(scale_slot(stage) + 4 * kBm, w_scale + kb, true);
        cp_async_mbarrier_arrive_noinc(full(stage));
        if (++stage == stages) stage = 0, phase ^= 1u;
      }
    }
    return;
  }

  // ---- consumers ----
  if constexpr (kConsumers == 2) setmaxnreg_inc<kConsumerRegisters>();
  const int g = lane / 4, c = lane % 4;
  // This thread's token rows in the tile: wave v's row + v * kWaveRows and 8 below it.
  const int row = wg * kWgmmaM + 16 * (warp % 4) + g;
  wait_for_previous_kernel();  // the row counts and y

  float acc[kWaves][C::kAccumulators];
  float tmp[C::kAccumulators];
  zero_registers(tmp);
  // Queues 4 x wgmma.m64n{bn}k32 of the stage's A rows `a_row` (this warpgroup's 64) into d.
  auto issue = [&](float (&d)[C::kAccumulators], int st, int a_row) {
    const uint32_t a = a_box(st) + (a_row + wg * kWgmmaM) * kRowBytes;
    const uint32_t b = b_box(st);
    fence_registers(d);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kBlockK / kWgmmaK; ++k)
      WgmmaFp8<kBn>::run(d, k_major_descriptor(a + k * kWgmmaK), k_major_descriptor(b + k * kWgmmaK), k);
    wgmma_commit();
    fence_registers(d);
  };
  auto promote = [&](float (&sum)[C::kAccumulators], const float (&d)[C::kAccumulators], float s0, float s1) {
#pragma unroll
    for (int j = 0; j < kBn / 8; ++j) {
      sum[4 * j] = fmaf(d[4 * j], s0, sum[4 * j]);
      sum[4 * j + 1] = fmaf(d[4 * j + 1], s0, sum[4 * j + 1]);
      sum[4 * j + 2] = fmaf(d[4 * j + 2], s1, sum[4 * j + 2]);
      sum[4 * j + 3] = fmaf(d[4 * j + 3], s1, sum[4 * j + 3]);
    }
  };
  auto release = [&](int st) {  // this warp's reads of the stage are complete
    __syncwarp();
    if (lane == 0) mbarrier_arrive(empty(st));
  };
  int stage = 0;
  uint32_t phase = 0;
  for (int index = blockIdx.x; index < p.tiles; index += gridDim.x) {
    const Tile t = tile_at(index, p);
    const int t0 = t.m * kBm;
    const int rows = rows_in_group(p, t.group);
    if (t0 >= rows) continue;
    bool active[kWaves];  // uniform over the warpgroup: any of its 64 rows of the wave below the count
#pragma unroll
    for (int v = 0; v < kWaves; ++v) {
      active[v] = t0 + v * C::kWaveRows + wg * kWgmmaM < rows;
      zero_registers(acc[v]);
    }
    for (int kb = 0; kb < p.k_blocks; ++kb) {
      mbarrier_wait(full(stage), phase);
      const float* slot = scales + stage * (C::kScaleSlotBytes / 4);
      const float weight_scale = slot[kBm];
      float s[kWaves][2];
#pragma unroll
      for (int v = 0; v < kWaves; ++v) {
        s[v][0] = slot[v * C::kWaveRows + row] * weight_scale;
        s[v][1] = slot[v * C::kWaveRows + row + 8] * weight_scale;
      }
      __syncwarp();  // lanes leave the spin loop at different times; wgmma needs the warp converged
      // Every wave's MMAs run, also for rows past the count (their results are never stored): a
      // branch around them would make ptxas serialise every wgmma (C7518).
#pragma unroll
      for (int v = 0; v < kWaves; ++v) {
        issue(tmp, stage, v * C::kWaveRows);
        wgmma_wait<0>();
        fence_registers(tmp);
        if (v == kWaves - 1) release(stage);
        promote(acc[v], tmp, s[v][0], s[v][1]);
      }
      if (++stage == stages) stage = 0, phase ^= 1u;
    }
    // Full tiles of a bf16 y leave through shared memory and TMA stores (whole 128-byte lines,
    // asynchronous: the next tile's MMAs start while they drain); rows past a dense product's end
    // are clipped by the map. Other tiles are stored from the registers.
    if (p.tma_store && (t0 + kBm <= rows || rows == p.group_rows)) {
      const bool leader = threadIdx.x % kWarpgroupThreads == 0;
      if (leader) bulk_wait_group_read();  // the previous tile's stores have read the staging
      named_barrier_sync(1 + wg, kWarpgroupThreads);
#pragma unroll
      for (int v = 0; v < kWaves; ++v) {
        if (!active[v]) continue;
        const uint32_t box0 = staging + (v * kConsumers + wg) * (kBn / 64) * C::kBoxBytes;
        const int r = 16 * (warp % 4) + g;  // and r + 8: both have r % 8 == g
#pragma unroll
        for (int j = 0; j < kBn / 8; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const __nv_bfloat162 pair = __floats2bfloat162_rn(acc[v][4 * j + 2 * h], acc[v][4 * j + 2 * h + 1]);
            const uint32_t address =
                box0 + (j / 8) * C::kBoxBytes + (r + 8 * h) * 128 + (((j % 8) ^ g) * 16) + 4 * c;
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(address), "r"(*reinterpret_cast<const uint32_t*>(&pair))
                         : "memory");
          }
      }
      fence_proxy_async();  // the staging writes, before the TMA reads them
      named_barrier_sync(1 + wg, kWarpgroupThreads);
      if (leader) {
#pragma unroll
        for (int v = 0; v < kWaves; ++v) {
          if (!active[v]) continue;
          const uint32_t box0 = staging + (v * kConsumers + wg) * (kBn / 64) * C::kBoxBytes;
#pragma unroll
          for (int b = 0; b < kBn / 64; ++b)
            tma_store_3d(&y_map, box0 + b * C::kBoxBytes, t.n * kBn + 64 * b, t0 + v * C::kWaveRows + wg * kWgmmaM,
                         t.group);
        }
        bulk_commit_group();
      }
      continue;
    }
#pragma unroll
    for (int v = 0; v < kWaves; ++v) {
      if (!active[v]) continue;
      if (p.y_f32) {
        store_tile<kBn, true>(p, acc[v], t.group, t0 + v * C::kWaveRows, row, rows, t.n * kBn, c);
      } else {
        store_tile<kBn, false>(p, acc[v], t.group, t0 + v * C::kWaveRows, row, rows, t.n * kBn, c);
      }
    }
  }
  if (threadIdx.x % kWarpgroupThreads == 0) bulk_wait_group();  // before the block's shared memory goes
}

// ---- host ----

using KernelFunction = void (*)(CUtensorMap, CUtensorMap, CUtensorMap, KernelParams);

struct Built {
  int bm, bn;
  KernelFunction kernel;
  int threads;
  int stage_bytes;
  int scale_slot_bytes;
  int staging_bytes;
  int most_stages() const { return max_stages(stage_bytes, scale_slot_bytes, staging_bytes); }
};

template <int kConsumers, int kWaves, int kBn>
constexpr Built built() {
  using C = Config<kConsumers, kWaves, kBn>;
  return {C::kBm,         kBn, fp8_tiled_kernel<kConsumers, kWaves, kBn>, C::kThreads, C::kStageBytes,
          C::kScaleSlotBytes, C::kStagingBytes};
}

constexpr Built kBuilt[] = {built<1, 1, 64>(), built<1, 1, 128>(), built<2, 1, 64>(), built<2, 1, 128>(),
                            built<2, 2, 128>()};

const Built* find_built(int bm, int bn) {
  for (const Built& b : kBuilt)
    if (b.bm == bm && b.bn == bn) return &b;
  return nullptr;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

CUtensorMap make_map(const void* data, uint64_t rows, uint64_t k, uint32_t box_rows, const char* what) {
  return make_swizzled_2d_map(data, CU_TENSOR_MAP_DATA_TYPE_UINT8, k, rows, k, kBlockK, box_rows, what);
}

}  // namespace

std::string Fp8TiledConfig::describe() const {
  return str_cat("tiled bm ", bm, " bn ", bn, " stages ", stages, " blocks ", blocks);
}

bool fp8_tiled_config_valid(const Fp8TiledConfig& config) {
  const Built* b = find_built(config.bm, config.bn);
  return b != nullptr && config.stages >= 0 && config.stages <= b->most_stages() &&
         config.stages != 1 && config.blocks >= 0;
}

bool fp8_tiled_supported(const Fp8WgmmaGemm& g) {
  const int64_t y_row_stride = g.y_row_stride == 0 ? g.n : g.y_row_stride;
  const size_t y_element = g.y_dtype == DType::kF32 ? 4 : 2;
  return fp8_wgmma_supported(g) && g.n % 2 == 0 && y_row_stride % 2 == 0 &&
         (g.groups == 1 || (g.y_group_stride == 0 ? g.group_rows * y_row_stride : g.y_group_stride) % 2 == 0) &&
         aligned(g.y, 2 * y_element);
}

// The chooser's model (H200 measurements of fp8_gemm_wgmma_check, rounded): a tile costs, per K block,
// the larger of its MMAs (2 bm n 128 FLOP at ~9.5 TFLOP/s an SM with two consumer warpgroups, ~5 with
// one: a lone warpgroup cannot hide its promotions) and its loads ((bm + bn) 128 bytes at ~40 GB/s an
// SM), plus ~0.7 us a tile (epilogue, ring turnover); tiles run in rounds of one an SM; and nothing
// beats reading W and q once from HBM.
namespace {
constexpr double kTwoWarpgroupFlopsPerNs = 9500, kOneWarpgroupFlopsPerNs = 5000;
constexpr double kTileBytesPerNs = 40, kTileFixedNs = 700, kTiledHbmBytesPerNs = 3000;

struct TiledEstimate {
  double ns;
  int64_t tiles;
};

TiledEstimate tiled_estimate(int bm, int bn, int64_t max_m, int64_t n, int64_t k, int64_t groups, int sm_count) {
  const int64_t m_tiles = ceil_div(max_m, bm), tiles = groups * m_tiles * ceil_div(n, bn);
  const int64_t rows = std::min<int64_t>(bm, ceil_div(max_m, 64) * 64);  // rows a tile multiplies usefully
  const double mma = 2.0 * rows * bn * kBlockK / (bm >= 128 ? kTwoWarpgroupFlopsPerNs : kOneWarpgroupFlopsPerNs);
  const double load = static_cast<double>(bm + bn) * kRowBytes / kTileBytesPerNs;
  const double rounds = static_cast<double>(ceil_div(tiles, std::max(sm_count, 1)));
  const double hbm = static_cast<double>(groups) * (n + max_m) * k / kTiledHbmBytesPerNs;
  return {std::max(hbm, rounds * ((k / kBlockK) * std::max(mma, load) + kTileFixedNs)), tiles};
}

constexpr int kTiledShapes[][2] = {{256, 128}, {128, 128}, {128, 64}, {64, 128}, {64, 64}};  // (bm, bn)
}  // namespace

Fp8TiledConfig choose_fp8_tiled_config(int64_t max_m, int64_t n, int64_t k, int64_t groups, int sm_count) {
  Fp8TiledConfig best{64, 64, 0, 0};
  double best_ns = std::numeric_limits<double>::infinity();
  for (const auto& shape : kTiledShapes) {
    // No tile taller than the rows rounded up to a warpgroup's 64.
    if (shape[0] > 64 && shape[0] > ceil_div(max_m, 64) * 64) continue;
    const double ns = tiled_estimate(shape[0], shape[1], max_m, n, k, groups, sm_count).ns;
    if (ns < best_ns) best_ns = ns, best = {shape[0], shape[1], 0, 0};
  }
  return best;
}

bool fp8_tiled_preferred(int64_t max_m, int64_t n, int64_t k, int64_t groups, int sm_count) {
  if (max_m <= 32) return false;
  // With fewer tiles than half the SMs even at 64 x 64, the swap-AB kernel's split-K streams the
  // weights faster.
  return tiled_estimate(64, 64, max_m, n, k, groups, sm_count).tiles * 2 >= sm_count;
}

void fp8_tiled_gemm(const Fp8WgmmaGemm& g, const Fp8TiledConfig& config, cudaStream_t stream) {
  DSINFER_CHECK(fp8_tiled_supported(g), "fp8_tiled_gemm: unsupported arguments (N ", g.n, ", K ", g.k, ", groups ",
                g.groups, ", group rows ", g.group_rows, ", q rows ", g.q_rows, ", scale stride ", g.scale_stride,
                "): K must be a multiple of 128, N and the y strides even, W and q 16-byte aligned, y bf16 or f32 "
                "aligned to two elements, and the strides must cover the rows");
  DSINFER_CHECK(fp8_tiled_config_valid(config), "fp8_tiled_gemm: no kernel for ", config.describe());
  if (g.group_rows == 0) return;
  const Built& b = *find_built(config.bm, config.bn);
  const int stages = config.stages == 0 ? b.most_stages() : config.stages;

  KernelParams p{};
  p.w_scale = g.w_scale;
  p.x_scale = g.x_scale;
  p.rows_per_group = g.rows_per_group;
  p.y = g.y;
  p.scale_stride = g.scale_stride;
  p.y_row_stride = g.y_row_stride == 0 ? g.n : g.y_row_stride;
  p.y_group_stride = g.y_group_stride == 0 ? g.group_rows * p.y_row_stride : g.y_group_stride;
  p.n = static_cast<int>(g.n);
  p.n_scale_rows = static_cast<int>(ceil_div(g.n, kBlockK));
  p.k_blocks = static_cast<int>(g.k / kBlockK);
  p.group_rows = static_cast<int>(g.group_rows);
  p.m_tiles = static_cast<int>(ceil_div(g.group_rows, config.bm));
  p.n_tiles = static_cast<int>(ceil_div(g.n, config.bn));
  const int64_t tiles = g.groups * p.m_tiles * p.n_tiles;
  DSINFER_CHECK(tiles <= std::numeric_limits<int32_t>::max(), "fp8_tiled_gemm: ", tiles, " tiles are too many");
  p.tiles = static_cast<int>(tiles);
  p.stages = stages;
  p.y_f32 = g.y_dtype == DType::kF32;
  // TMA stores need a 16-byte aligned y with 16-byte row and group strides.
  p.tma_store = !p.y_f32 && aligned(g.y, 16) && p.y_row_stride % 8 == 0 && p.y_group_stride % 8 == 0;

  const CUtensorMap q_map = make_map(g.q, static_cast<uint64_t>(g.q_rows), g.k, config.bm, "the FP8 activations");
  const CUtensorMap w_map = make_map(g.w, static_cast<uint64_t>(g.groups * g.n), g.k, config.bn, "the FP8 weights");
  const int blocks = static_cast<int>(
      std::min<int64_t>(tiles, config.blocks > 0 ? config.blocks : fp8_wgmma_sm_count()));
  // y as [groups][group_rows][n] bf16, written in 64 x 64 boxes (the 128-byte swizzle of the staging).
  const CUtensorMap y_map =
      p.tma_store ? make_swizzled_3d_map(g.y, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                                         {static_cast<uint64_t>(g.n), static_cast<uint64_t>(g.group_rows),
                                          static_cast<uint64_t>(g.groups)},
                                         {static_cast<uint64_t>(p.y_row_stride) * 2,
                                          static_cast<uint64_t>(p.y_group_stride) * 2},
                                         {64, 64, 1}, "the bf16 output")
                  : q_map;  // unused
  const int smem = smem_bytes(b.stage_bytes, b.scale_slot_bytes, b.staging_bytes, stages);
  // A function attribute, not a stream operation: legal (and cheap) during graph capture.
  DSINFER_CUDA_CHECK(cudaFuncSetAttribute(b.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaLaunchConfig_t launch = {};
  launch.gridDim = dim3(static_cast<unsigned>(blocks));
  launch.blockDim = dim3(b.threads);
  launch.dynamicSmemBytes = smem;
  launch.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  launch.attrs = attribute;
  launch.numAttrs = g.programmatic ? 1 : 0;
  DSINFER_CUDA_CHECK(cudaLaunchKernelEx(&launch, b.kernel, q_map, w_map, y_map, p));
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
