// The kernel of the FP8 block-scaled GEMM for many token rows (fp8_gemm_tiled.h; its chooser and
// launch in fp8_gemm_tiled.cu): persistent blocks over output tiles of up to 256 x 128, tokens on
// warpgroup MMA's M and weights on its N, TMA-fed, with DeepSeek's per-128-K promotion of the FP8
// products into f32 accumulators.
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
// Tiles (bm x bn): 64 x 64/128/192 (one consumer warpgroup), 128 x 64/128/192 (two), 256 x 128 (two,
// each taking two 64-row "waves" of the tile: one ring stage feeds four MMA groups). 192 columns
// cut N = 2112 into 11 whole tiles (128: 16.5) and give the rounds of tiles other sizes. Per stage
// in shared memory: A = the tile's bm token rows x 128 K bytes, B = its bn weight rows x 128 K
// bytes, both K-major with TMA's 128-byte swizzle (1024-byte atoms); a k32 step moves both
// descriptors by 32 bytes. Beside the ring, a scale slot a stage: the bm token scales of the K
// block, and for 192 columns the tile's two weight scales. A tile of bn <= 128 starting at a
// multiple of bn sits in one 128-row scale block, whose scale the consumers read from global memory;
// 192 columns span two (an even tile's first 128 columns, an odd one's first 64, are in the first;
// the promotion picks the scale per 8 columns, the split known at compile time in each of two
// branches). Then the epilogue's bf16 staging, 8 KB a 64 x 64 box.
//
// Launch: a persistent 1-D grid (one block an SM, at most the tiles); block b takes tiles b, b + grid,
// ... of the walk: groups outermost, each group's tiles in bands of kBand n tiles (all m tiles of a
// band, then the next band) so that the blocks running together share a band of weights and the
// activations in L2. Dense rows: every group has ceil(group_rows / bm) m tiles. With per-group counts
// (the masked MoE layout) a separate instantiation (kByRowCounts) walks ceil(m_g / bm) m tiles for
// group g, m_g its count read on the device, so the blocks share out only tiles with rows: walking
// group_rows' tiles and skipping the empty ones left some blocks a round more than others (max / mean
// load 1.18 with 256 x 128 tiles at kernels_bench's masked m = 192 counts). Only the walk differs:
// the same K loop and epilogue, the same bits. The dense kernels (fp8_gemm_tiled.cu) and these
// (fp8_gemm_tiled_by_row_counts.cu) are built in separate translation units, so that the dense
// kernels keep the machine code they were measured with.
// Threads: bm / 64 (at most two) consumer warpgroups, then one producer warpgroup (256 or 384
// threads). With two consumers the producer gives its registers away (setmaxnreg 40 / 232).
// Pipeline (a ring of `stages`, shared by all the block's tiles, so the producer loads the next
// tile's first K blocks while the consumers finish and store the current one):
//   producer warp (the others exit): per K block, waits for the stage's "empty" barrier (after its
//     first round); lane 0 arms "full" with the stage's bytes and issues the TMA boxes of A, B and
//     (where the scales' layout allows: tma_scales) the bm token scales as a third, unswizzled box
//     (rows past the matrices read as zeros); otherwise all 32 lanes copy the token scales with
//     4-byte cp.async (rows past the group's q rows read as zeros). For 192 columns lanes 0 and 1
//     copy the two weight scales by cp.async. Where lanes copy, all 32 arrive on "full" when their
//     copies land (cp.async.mbarrier.arrive.noinc: "full" expects 1 + 32 arrivals a phase); else
//     "full" expects the arm alone.
//   consumer warpgroup w, per K block and wave v (token rows v * (consumers * 64) + 64 w .. + 63):
//     waits "full", issues 4 x wgmma.m64n{bn}k32.f32.e4m3.e4m3 into a temporary accumulator (the
//     first overwrites it), waits for them, releases the stage after its last wave (one arrive a warp
//     on "empty") and promotes: acc[r][c] += tmp[r][c] * x_scale[r] * w_scale (w_scale loaded from
//     global memory before the wait: in L2, and not needed before the MMAs are done). The MMAs run for rows
//     past the group's count too (never stored): any branch around them makes ptxas serialise every
//     wgmma (C7518), which cost a third of the speed when it happened. The fragment:
//     tmp[4j + 2h + e] = D[16 (warp % 4) + g + 8h][8j + 2c + e], g = lane / 4, c = lane % 4.
//   epilogue: with a bf16 y on 16-byte strides and a full tile (or the product's last rows, which the
//     map clips), each warpgroup writes its rows into the swizzled staging (conflict-free: the 8 g of a
//     column block land in 8 different 16-byte chunks), fences, and one thread issues TMA stores of
//     the 64 x 64 boxes (whole 128-byte lines; asynchronous, so the next tile's MMAs start while they
//     drain; the staging is rewritten only after cp.async.bulk.wait_group.read). Other tiles (f32 y,
//     a masked group's partial rows) store pairs of columns from the registers.
//   Measured (H200, 4096 x 4096 x 7168): ~193 us with the descriptors as uniform offsets from a base
//   (hopper.cuh's descriptor_at; rebuilt per wgmma they put an R2UR and an integer chain between the
//   MMAs: ~205 us); without the promotion (wrong results, a probe) ~128 us, so the promotion, not the
//   loads, is what remains. Nsight Compute (at base clocks): the tensor pipe busy 64% of the time,
//   warps mostly waiting for their wgmmas, 7% of samples waiting for a stage's "full". Measured no
//   faster: two temporaries (one block's MMAs under the previous block's promotion; with one wave,
//   64 x 128 masked tiles went 574 -> 654 us), warpgroups taking turns to issue, and pairs of blocks
//   that share A by TMA multicast (222 us: L2 is not the bound; branch fp8-gemm-multicast).
//   The token scales as one TMA box a stage instead of 8 cp.async a lane: 195 -> 184 us (CUPTI,
//   kernels_bench at 7a707f8 and 1f3e1be; beside it in one run the cp.async path as now built took
//   251, slower than the code it replaced). With the weight scale read by the consumers from
//   global memory too, "full" waits on the TMA arm alone: 176 us (events; 184 before in the same
//   check), 99 at 4096 x 7168 x 2048 (101), 248 at 4096 x 24576 x 1536 (252).
// Programmatic launch: with dense rows (no per-group counts) the producer issues the first tile's
// weight boxes, then griddepcontrol.wait, then everything else; the consumers wait before their
// first token row count. With per-group counts everything waits first (the tile walk reads them).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/hopper.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/wgmma_fp8.cuh"

namespace dsinfer::backend::cuda::tiled {

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
  static_assert(kBn == 64 || kBn == 128 || kBn == 192, "wgmma N of the weight tile");
  static_assert(kBn < 192 || kWaves == 1, "192 columns: one wave (two waves' accumulators do not fit)");
  static constexpr int kWaveRows = kConsumers * kWgmmaM;  // token rows all warpgroups take in one wave
  static constexpr int kBm = kWaves * kWaveRows;
  static constexpr int kThreads = (kConsumers + 1) * kWarpgroupThreads;
  static constexpr int kConsumerWarps = kConsumers * 4;
  static constexpr int kABytes = kBm * kRowBytes;
  static constexpr int kStageBytes = kABytes + kBn * kRowBytes;
  // 192 columns from a multiple of 192 span two 128-row weight scale blocks: the first 128 columns
  // of an even n tile, the first 64 of an odd one, take the first block's scale.
  static constexpr bool kTwoWeightScales = kBn == 192;
  // The weight scales of a stage: read from global memory by the consumers, or where a tile has two
  // (where that measured slower: 112 against 108 us at 4096 x 2112 x 7168, while 256 x 128 tiles
  // went 184 -> 176 us at 4096 x 4096 x 7168) copied into the scale slot by the producer.
  static constexpr bool kWeightScalesInSlot = kTwoWeightScales;
  // The bm token scales of a stage (and the weight scales where kWeightScalesInSlot), padded to
  // 128 bytes (where TMA's boxes must start).
  static constexpr int kScaleSlotBytes = ((kBm + (kWeightScalesInSlot ? 4 : 0)) * 4 + 127) / 128 * 128;
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
  int tiles;  // groups * m_tiles * n_tiles (the static walk's; the walk by row counts has at most these)
  int stages;
  bool y_f32;
  bool tma_store;  // bf16 y through the y map (full tiles); otherwise direct stores
  bool tma_scales;  // the token scales through the scale map (one box a stage); otherwise cp.async
};

struct Tile {
  int group, m, n;
};

// Tile r of a group's m_tiles x n_tiles: bands of kBand n tiles, then m tiles, then the n tiles of
// the band.
__device__ __forceinline__ Tile tile_in_group(int group, int r, int m_tiles, int n_tiles) {
  Tile t;
  t.group = group;
  const int band = r / (kBand * m_tiles);
  r -= band * kBand * m_tiles;
  const int width = min(kBand, n_tiles - band * kBand);
  t.m = r / width;
  t.n = band * kBand + (r - t.m * width);
  return t;
}

// Tile `index` of the static walk: groups outermost, each of p.m_tiles x p.n_tiles, each in
// tile_in_group's order. Its arithmetic is written out again: through tile_in_group the dense kernels
// compiled to other machine code (11 to 106 instructions apart) than the one measured.
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

// A block's walk over the tiles (the producer warp and the consumers each run it alike): has(index)
// says whether tile `index` exists, tile(index) which it is, rows(t) its group's row count. Indices
// only grow. The static walk: p.tiles tiles, those of rows past a group's count skipped by the caller.
template <int kBm, bool kByRowCounts>
struct TileWalk {
  __device__ __forceinline__ bool has(int index, const KernelParams& p) const { return index < p.tiles; }
  __device__ __forceinline__ Tile tile(int index, const KernelParams& p) const { return tile_at(index, p); }
  __device__ __forceinline__ int rows(const Tile& t, const KernelParams& p) const { return rows_in_group(p, t.group); }
};

// The walk by row counts: group g's tiles are its ceil(m_g / bm) x n_tiles, numbered on from the
// previous groups'. A cursor on the group of the last index asked for; it only moves forward, reading
// each count once. Its four registers cost the producer warp (40 registers with two consumers) a word
// or two of spill: loaded once a tile, and with 128-row tiles once a K block too, which the
// producer's lead of a ring over the consumers hides.
template <int kBm>
struct TileWalk<kBm, true> {
  int group = -1;
  int first = 0, end = 0;  // the group's tile indices [first, end)
  int group_rows = 0;      // its row count
  __device__ __forceinline__ int m_tiles() const { return (group_rows + kBm - 1) / kBm; }
  __device__ __forceinline__ bool has(int index, const KernelParams& p) {
    while (index >= end) {
      if (group + 1 >= p.tiles / (p.m_tiles * p.n_tiles)) return false;  // no group after this one
      group_rows = rows_in_group(p, ++group);
      first = end;
      end += m_tiles() * p.n_tiles;
    }
    return true;
  }
  __device__ __forceinline__ Tile tile(int index, const KernelParams& p) const {
    return tile_in_group(group, index - first, m_tiles(), p.n_tiles);
  }
  __device__ __forceinline__ int rows(const Tile&, const KernelParams&) const { return group_rows; }
};

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

template <int kConsumers, int kWaves, int kBn, bool kByRowCounts>
__global__ void __launch_bounds__(Config<kConsumers, kWaves, kBn>::kThreads, 1)
    fp8_tiled_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap w_map,
                     const __grid_constant__ CUtensorMap y_map, const __grid_constant__ CUtensorMap scale_map,
                     const KernelParams p) {
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
      // The TMA arm, and where the producer's lanes copy scales their copies.
      mbarrier_init(full(s), p.tma_scales && !C::kWeightScalesInSlot ? 1 : 1 + kScaleArrivals);
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
    // What TMA brings a stage: A, B and with tma_scales the bm token scales.
    const uint32_t stage_tx = C::kStageBytes + (p.tma_scales ? kBm * 4 : 0);
    if (!kByRowCounts && p.rows_per_group == nullptr && static_cast<int>(blockIdx.x) < p.tiles) {
      const Tile t = tile_at(blockIdx.x, p);
      prefetched = min(stages, k_blocks);
      if (lane == 0)
        for (int i = 0; i < prefetched; ++i) {
          mbarrier_arrive_expect_tx(full(i), stage_tx);
          tma_load_2d(b_box(i), &w_map, i * kBlockK, t.group * p.n + t.n * kBn, full(i));
        }
    }
    wait_for_previous_kernel();  // q, x_scale and the row counts are the previous kernel's output
    int stage = 0, it = 0;
    uint32_t phase = 0;  // parity of the ring round of `stage`
    TileWalk<kBm, kByRowCounts> walk;
    for (int index = blockIdx.x; walk.has(index, p); index += gridDim.x) {
      const Tile t = walk.tile(index, p);
      const int t0 = t.m * kBm;
      if (t0 >= walk.rows(t, p)) continue;
      const int q_row = t.group * p.group_rows + t0;
      const int w_row = t.group * p.n + t.n * kBn;
      const int w_scale_row = t.n * kBn / kBlockK;
      const float* w_scale = p.w_scale + (int64_t{t.group} * p.n_scale_rows + w_scale_row) * k_blocks;
      // The second block's scales (192 columns); at the end of N the tile may not reach it.
      const float* w_scale_next = w_scale + (w_scale_row + 1 < p.n_scale_rows ? k_blocks : 0);
      for (int kb = 0; kb < k_blocks; ++kb, ++it) {
        if (it >= stages) mbarrier_wait(empty(stage), phase ^ 1u);  // the previous round's readers are done
        if (lane == 0) {
          if (it >= prefetched) {
            mbarrier_arrive_expect_tx(full(stage), stage_tx);
            tma_load_2d(b_box(stage), &w_map, kb * kBlockK, w_row, full(stage));
          }
          tma_load_2d(a_box(stage), &q_map, kb * kBlockK, q_row, full(stage));
          // Past the q rows the box reads zeros; past the group's rows, the next group's scales
          // (rows never stored).
          if (p.tma_scales) tma_load_2d(scale_slot(stage), &scale_map, q_row, kb, full(stage));
        }
        if (!p.tma_scales) {
          const float* x_scale = p.x_scale + int64_t{kb} * p.scale_stride + q_row;
#pragma unroll
          for (int i = lane; i < kBm; i += 32) {
            const bool valid = t0 + i < p.group_rows;  // the group's q rows; past them: zeros
            cp_async_4(scale_slot(stage) + 4 * i, valid ? x_scale + i : p.x_scale, valid);
          }
        }
        if constexpr (C::kWeightScalesInSlot) {
          if (lane == 0) cp_async_4(scale_slot(stage) + 4 * kBm, w_scale + kb, true);
          if (lane == 1) cp_async_4(scale_slot(stage) + 4 * (kBm + 1), w_scale_next + kb, true);
        }
        if (!p.tma_scales || C::kWeightScalesInSlot) cp_async_mbarrier_arrive_noinc(full(stage));
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
  const uint32_t a_base = descriptor_base(a_box(0) + wg * kWgmmaM * kRowBytes);
  const uint32_t b_base = descriptor_base(b_box(0));
  // Queues 4 x wgmma.m64n{bn}k32 of the stage's A rows `a_row` (this warpgroup's 64) into d.
  auto issue = [&](float (&d)[C::kAccumulators], int st, int a_row) {
    const uint32_t stage_bytes = st * C::kStageBytes;
    fence_registers(d);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kBlockK / kWgmmaK; ++k)
      WgmmaFp8<kBn>::run(d, descriptor_at(a_base, stage_bytes + a_row * kRowBytes + k * kWgmmaK),
                         descriptor_at(b_base, stage_bytes + k * kWgmmaK), k);
    wgmma_commit();
    fence_registers(d);
  };
  // sum += d * scale: rows g and g + 8 scaled by s[0] and s[1] in the first kFirstColumns columns,
  // by next[0] and next[1] after them (the second weight scale block of a 192-column tile).
  auto promote = [&](float (&sum)[C::kAccumulators], const float (&d)[C::kAccumulators], const float (&s)[2],
                     const float (&next)[2], auto first_columns) {
    constexpr int kFirstColumns = decltype(first_columns)::value;
#pragma unroll
    for (int j = 0; j < kBn / 8; ++j) {
      const float s0 = 8 * j < kFirstColumns ? s[0] : next[0], s1 = 8 * j < kFirstColumns ? s[1] : next[1];
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
  TileWalk<kBm, kByRowCounts> walk;
  for (int index = blockIdx.x; walk.has(index, p); index += gridDim.x) {
    const Tile t = walk.tile(index, p);
    const int t0 = t.m * kBm;
    const int rows = walk.rows(t, p);
    if (t0 >= rows) continue;
    bool active[kWaves];  // uniform over the warpgroup: any of its 64 rows of the wave below the count
#pragma unroll
    for (int v = 0; v < kWaves; ++v) {
      active[v] = t0 + v * C::kWaveRows + wg * kWgmmaM < rows;
      zero_registers(acc[v]);
    }
    // The tile's weight scales in global memory (a few hundred bytes, in L2), each K block's read
    // before its wait (unless the producer brings them in the scale slot).
    const float* w_scale = p.w_scale + (int64_t{t.group} * p.n_scale_rows + t.n * kBn / kBlockK) * p.k_blocks;
    for (int kb = 0; kb < p.k_blocks; ++kb) {
      float weight_scale = 0.0f;
      if constexpr (!C::kWeightScalesInSlot) weight_scale = __ldg(w_scale + kb);
      mbarrier_wait(full(stage), phase);
      const float* slot = scales + stage * (C::kScaleSlotBytes / 4);
      // s: the token scales of this thread's two rows of each wave, times the weight scale (after
      // the MMAs where that comes from global memory); next: the second weight scale's.
      float s[kWaves][2], next[2] = {};
#pragma unroll
      for (int v = 0; v < kWaves; ++v) {
        s[v][0] = slot[v * C::kWaveRows + row];
        s[v][1] = slot[v * C::kWaveRows + row + 8];
      }
      if constexpr (C::kWeightScalesInSlot) {
        weight_scale = slot[kBm];
        const float next_weight_scale = slot[kBm + 1];
        next[0] = s[0][0] * next_weight_scale;
        next[1] = s[0][1] * next_weight_scale;
#pragma unroll
        for (int v = 0; v < kWaves; ++v) s[v][0] *= weight_scale, s[v][1] *= weight_scale;
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
        if constexpr (!C::kWeightScalesInSlot) s[v][0] *= weight_scale, s[v][1] *= weight_scale;
        if constexpr (!C::kTwoWeightScales) {
          promote(acc[v], tmp, s[v], s[v], std::integral_constant<int, kBn>{});
        } else if (t.n % 2 == 0) {  // the tile starts on a scale block: 128 columns in it
          promote(acc[v], tmp, s[v], next, std::integral_constant<int, 128>{});
        } else {  // it starts 64 columns into one
          promote(acc[v], tmp, s[v], next, std::integral_constant<int, 64>{});
        }
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

using KernelFunction = void (*)(CUtensorMap, CUtensorMap, CUtensorMap, CUtensorMap, KernelParams);

// The walk by row counts' kernel for tiles of bm x bn (fp8_gemm_tiled_by_row_counts.cu); nullptr
// where none is built.
KernelFunction by_row_counts_kernel(int bm, int bn);

}  // namespace dsinfer::backend::cuda::tiled
