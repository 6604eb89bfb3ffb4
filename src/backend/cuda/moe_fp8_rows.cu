// FP8 routed-expert products for experts with few rows (moe_fp8_rows.h): tensor-core products on the
// raw fp8 weights (the FP8 mma.sync's arithmetic, lowered by hand for sm_90, below), with the weights
// streamed through a deep per-thread cp.async ring.
//
// Shapes (V3: E = 256, I = 2048, H = 7168, top-8): gate_up W [E, 2I, H] e4m3 + scales [E, 2I/128, H/128];
// down D [E, H, I] + [E, H/128, I/128]; activations q [rows, K] (e4m3 values, stored as f16) + scales
// [rows, K/128] f32.
//
// Roofline. At decode every weight of every touched expert is read once (the activations, h, y and the
// scales are < 2% of it): 44 MB per expert, 352 MB at T = 1 (8 experts), ~11.3 GB from T ~ 100 on
// (all 256). FLOPs are 2 per weight byte per row: at 16 rows 32 FLOP/byte, far below the FP8 mma.sync
// rate, so the kernels are memory bound at every row count they take; the goal is the copy bandwidth
// (4.27 TB/s measured on H200: 2.6 ms for all 256 experts).
//
// Why this layout. A warp computes D[16 weight rows][8 activation rows] per mma (A = weights, which
// are [N, K] K-contiguous: the row-major A operand; B = activation rows, K-contiguous: the col operand),
// so weights reach the tensor cores as they are stored: no scaling, no shared-memory round trip of
// converted values, no barrier. The reduction over K does not care about the order of K, so A and B
// use the same permutation of K inside each 128-column block: lane (g = lane/4, c = lane%4) copies the
// 16-byte chunks [16c, 16c + 16) and [64 + 16c, 64 + 16c + 16) of weight rows g and g + 8, and reads
// the same 2 x 16 columns of activation row g; word w (4 columns) of chunk h is k16 step 4h + w of the
// block: a0/a1 = columns 0, 1 of the word in rows g/g+8, a2/a3 = columns 2, 3, b0/b1 the same columns
// of the activation row. This only needs what the m16n8k16 fragment layout guarantees: a0/a1 hold
// rows g/g+8 at the same k, b0 the k of a0, b1 the k of a2, and the 4 lanes of a group disjoint k.
// With Fp8RowsLoad::kLanes each lane copies exactly what it reads back: the ring needs no barrier, only
// the lane's own cp.async.wait_group. With kWarpRows (the default) a warp copies its own 32 rows whole
// (consecutive lanes on consecutive 16-byte chunks of one row, swizzled in shared memory; see the
// kernel), so lanes read what other lanes of their warp copied: a __syncwarp per stage, still no block
// barrier. Both put the same bytes in the same fragment registers: the same bits.
// Tensor-core form. Hopper has no FP8 mma.sync: ptxas lowers mma.sync.m16n8k32.e4m3 into F2FP.F16.E4M3
// unpacks of both operands, two HMMA.16816.F32 and four FADDs per instruction, converting the weights
// again for every n8 tile (160 F2FP + 64 FADD per 128 columns of a warp's 32 rows at 16 activation
// rows, which would saturate the conversion pipe). So the kernel does that lowering itself, once: each
// weight word is unpacked once per 128-column block (F2FP, one instruction per two values, exact) and
// shared by all n8 tiles, and the activations arrive as f16 copies of their e4m3 values (exact; written
// by the quantize kernel), so they are never converted. The products and their f32 accumulation are
// those of the FP8 instruction. A warp spends ~180 instructions per 4 KB of weights (its 32 rows x 128
// columns) at 8 rows, ~215 at 16 (ptxas -v / SASS of this file): under 1 per clock per SM at the 16
// bytes per clock per SM the copy bandwidth asks for; its 64 F2FP use half of a 16-per-clock
// conversion pipe (the old kernel needed two conversions per two weights: all of it).
//
// Kernels, in stream order from moe.cu:
//   fp8_rows_quantize (x, then h): one warp per (row, 128 columns), 256 threads per block.
//   fp8_rows_kernel<gate_up>: persistent, 2 blocks x 128 threads per SM (launch bounds; the grid is
//     SMs x resident blocks, at most the work). Every block lists the experts with min..max_rows rows
//     from the device offsets (expert order; one of 17 to 32 rows as two chunks of 16), and walks
//     work items item = blockIdx.x + n * gridDim.x of (chunk, 128-row weight tile): gate_up, 64 gate rows and the matching 64 up rows (outputs
//     i0 .. i0 + 63); down, 128 output rows. Warp w takes 32 rows of the tile as two m16 tiles (gate_up:
//     gate rows i0 + 16w .. +15 and up rows I + i0 + 16w .. +15, so silu(g) * u pairs the same register
//     of both; down: rows 32w .. 32w + 31) and all of the chunk's rows as up to kMaxNt n8 tiles, over
//     the whole of K (no split-K, no reduction). Per 128-column block: 8 k16 steps into a zeroed f32
//     partial, then partial * weight_scale * act_scale is added to the running sum (DeepGEMM's
//     promotion: tensor-core accumulation never runs past 128 columns).
//   fp8_rows_kernel<down>: the same.
// Weight pipeline (kLanes; kWarpRows has the same ring size, stages and copies per lane, only each
// warp's slice is laid out by row): each thread owns a ring of kStages stages x (8 x stage_k_blocks)
// 16-byte slots in shared memory (96 KB per block, laid out [stage][slot][thread] so a warp's 32 lanes
// touch 512 contiguous bytes: no bank conflicts); it keeps kStages - 1 stages of cp.async.cg (L2 only, evict-first,
// with a 256-byte L2 prefetch so that each DRAM page opened serves two 128-column blocks of a row) in
// flight, across work items (the producer side of the loop walks ahead into the next item). Bytes in
// flight: 5 stages x 16 KB = 80 KB per block, 160 KB per SM (128 KB with 2-block stages): about 20 MB
// over 132 SMs, several times the ~4 MB that 4.3 TB/s x ~1 us of loaded latency needs. The activation
// fragments (f16, 32 bytes per lane, n8 tile and chunk; shared by the block's 4 warps, which walk K in
// step) come through L1 with plain 16-byte loads.
#include "backend/cuda/moe_fp8_rows.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/mma.cuh"
#include "core/dtype.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kBlockEdge = 128;       // the scale block: 128 columns of K, 128 weight rows
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kBlocksPerSm = 2;       // launch bounds: registers for two blocks (the ring allows two)
constexpr int kMaxExperts = 1024;
// 16-byte weight chunks a lane copies per 128 columns: 2 m16 tiles x rows g, g + 8 x 2 chunks.
constexpr int kChunksPerKBlock = 8;
constexpr int kRingBytes = 96 * 1024;
constexpr int kQuantThreads = 256;

template <int kStageKBlocks>
constexpr int ring_stages() {
  return kRingBytes / (kStageKBlocks * kChunksPerKBlock * 16 * kThreads);
}

struct Params {
  const uint8_t* weight;       // [E, weight_rows, k] e4m3
  const float* weight_scale;   // [E, weight_rows / 128, k_blocks]
  const __half* act;           // [act rows, k]: e4m3 values as f16
  const float* act_scale;      // [act rows, k_blocks]
  const int32_t* offsets;      // [E + 1]
  const int32_t* row_source;   // gate_up: [rows] token * top_k + slot
  bf16* out;                   // [rows, outputs]
  int top_k;
  int num_experts;
  int min_rows;
  int max_rows;
  int k;             // H (gate_up) or I (down)
  int k_blocks;      // k / 128
  int weight_rows;   // 2I or H
  int outputs;       // I or H
  int inter;         // I: gate_up's up rows start here
  int tiles;         // work items per expert: I / 64 or H / 128
};

// ---- device helpers ----

__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// 16 bytes global -> shared, L2 only, the line marked evict-first, its 256-byte neighbourhood prefetched into L2.
__device__ __forceinline__ void copy_weights_16(uint32_t shared, const void* global, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2;\n" ::"r"(shared), "l"(global),
               "l"(policy)
               : "memory");
}
__device__ __forceinline__ void commit_group() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// d += a (16 x 16 f16, row major) * b (16 x 8 f16, column major), f32 accumulate (mma.cuh's layout).
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The two e4m3 values in the low 16 bits as two f16 (the lower-addressed byte in the low half); exact.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

// Four e4m3 values (memory order, lowest byte first) as two f16 pairs: bytes 0, 1 -> low, bytes 2, 3 ->
// high, each with the lower-addressed value in the low half; exact. Taking the 16-bit halves of the
// word as cvt operands lets ptxas read the upper half in place (no shift).
__device__ __forceinline__ void e4m3x4_to_f16x2x2(uint32_t four, uint32_t& low, uint32_t& high) {
  asm("{\n"
      "  .reg .b16 lo, hi;\n"
      "  mov.b32 {lo, hi}, %2;\n"
      "  cvt.rn.f16x2.e4m3x2 %0, lo;\n"
      "  cvt.rn.f16x2.e4m3x2 %1, hi;\n"
      "}\n"
      : "=r"(low), "=r"(high)
      : "r"(four));
}

// 32-bit word i (0..3) of v; i must be known at compile time (unrolled loops), so v stays in registers.
__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ float silu_times(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

// An expert with more rows than one item's n8 tiles hold is served as several chunks of chunk_rows
// rows, each its own work items (its weights are read once a chunk, all in the one launch: a 17-row
// expert at T = 256 costs one more read of 44 MB instead of a launch of its own).
constexpr int kMaxChunks = kFp8RowsMaxRows / 16;  // chunk_rows >= 16 (kMaxNt >= 2)
__device__ __forceinline__ int chunk_entry(int expert, int chunk) { return expert * kMaxChunks + chunk; }

// The chunks of the experts with min_rows..max_rows rows, in expert order, into active[]
// (chunk_entry's); returns their number. All threads of the block call it (it synchronizes).
__device__ int list_experts(const int32_t* offsets, int num_experts, int min_rows, int max_rows, int chunk_rows,
                           int* active, int* warp_counts) {
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  int listed = 0;
  for (int base = 0; base < num_experts; base += kThreads) {  // uniform over the block
    const int e = base + tid;
    const int rows = e < num_experts ? offsets[e + 1] - offsets[e] : 0;
    const int chunks = rows >= min_rows && rows <= max_rows ? (rows + chunk_rows - 1) / chunk_rows : 0;
    int before_in_warp = chunks;  // inclusive prefix sum over the warp, then exclusive
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int n = __shfl_up_sync(kFullMask, before_in_warp, d);
      if (lane >= d) before_in_warp += n;
    }
    if (lane == 31) warp_counts[warp] = before_in_warp;
    before_in_warp -= chunks;
    __syncthreads();
    int before = listed + before_in_warp, total = listed;
    for (int w = 0; w < kWarps; ++w) {
      const int n = warp_counts[w];
      before += w < warp ? n : 0;
      total += n;
    }
    for (int i = 0; i < chunks; ++i) active[before + i] = chunk_entry(e, i);
    listed = total;
    __syncthreads();  // warp_counts is rewritten by the next round; active[] is complete after the last
  }
  return listed;
}

// ---- the product kernel ----

// kWarpLoad false (Fp8RowsLoad::kLanes): each lane copies the chunks it multiplies, ring
// [kStages][kSlots][kThreads].
// kWarpLoad true (kWarpRows): each warp copies its own 32 rows x (128 kStageKBlocks) bytes per stage, 8
// kStageKBlocks consecutive lanes on consecutive 16-byte chunks of one row (a warp instruction copies 4 rows
// x 128 bytes or 2 rows x 256 bytes: whole 128-byte lines, 4 line requests instead of 8 half lines), ring
// [kStages][warp][kb][row 32][chunk 8] with chunk q of row r at position q ^ 4 (r & 1): the lane (g, c)
// reads of one k-block half (rows g, chunks 4 half + c) then hit 8 distinct 16-byte bank groups per 8
// lanes (conflict-free), and so do the copies (8 lanes = one row's 8 chunks). Lanes read chunks other lanes
// copied, but only of their own warp: a __syncwarp after each lane's wait_group publishes the stage
// (and orders the previous stage's reads before its slot is refilled); warps stay independent.
template <bool kGateUp, int kMaxNt, int kStageKBlocks, bool kWarpLoad>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) fp8_rows_kernel(const Params p) {
  constexpr int kSlots = kStageKBlocks * kChunksPerKBlock;  // 16-byte slots per thread per stage
  constexpr int kStages = ring_stages<kStageKBlocks>();
  constexpr uint32_t kStageStride = kSlots * kThreads * 16;  // bytes between stages
  constexpr int kLanesPerRow = 8 * kStageKBlocks;            // kWarpLoad: lanes copying one row's stage bytes
  constexpr int kRowsPerCopy = 32 / kLanesPerRow;            // kWarpLoad: rows per warp instruction (4 or 2)
  constexpr uint32_t kWarpStageBytes = kStageKBlocks * 32 * kBlockEdge;  // kWarpLoad: a warp's rows of a stage
  static_assert(kStages >= 2, "the ring needs a stage in flight while one is read");
  static_assert(kRowsPerCopy * kSlots == 32 && kRowsPerCopy % 2 == 0 && 16 % kRowsPerCopy == 0,
                "kWarpLoad: kSlots instructions of kRowsPerCopy rows cover the warp's 32 rows; rows of one "
                "instruction lie in one m16 tile; a lane's row parity is fixed");
  static_assert(kWarps * kWarpStageBytes == kStageStride, "kWarpLoad: a stage is the warps' slices");
  // kWarpLoad: [kStages][kWarps][kStageKBlocks][32 rows][8 chunks]; else [kStages][kSlots][kThreads].
  extern __shared__ uint4 ring[];
  constexpr int kChunkRows = 8 * kMaxNt;
  static_assert(kChunkRows >= kFp8RowsMaxRows / kMaxChunks, "an expert's rows fit its chunks");
  __shared__ int active[kMaxExperts * kMaxChunks];
  __shared__ int warp_counts[kWarps];

  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, c = lane % 4;
  const int listed = list_experts(p.offsets, p.num_experts, p.min_rows, p.max_rows, kChunkRows, active, warp_counts);
  const int items = listed * p.tiles;
  const int stages_per_item = p.k_blocks / kStageKBlocks;
  const int grid = static_cast<int>(gridDim.x);
  const int first_item = static_cast<int>(blockIdx.x);
  const int my_items = first_item < items ? (items - 1 - first_item) / grid + 1 : 0;
  const int total = my_items * stages_per_item;  // this thread's stages
  if (total == 0) return;  // uniform over the block; no barrier follows

  const int64_t K = p.k;
  const uint64_t policy = evict_first_policy();
  // Where this lane's copies land in stage 0 (kWarpLoad: its copy 0; copy i lands kRowsPerCopy i rows,
  // 128 bytes each, further).
  const int copy_row = lane / kLanesPerRow, copy_chunk = lane % kLanesPerRow;  // kWarpLoad only
  const uint32_t ring_mine =
      kWarpLoad ? smem_address(ring) + warp * kWarpStageBytes + (copy_chunk / 8) * (32 * kBlockEdge) +
                      copy_row * kBlockEdge + ((copy_chunk % 8) ^ ((copy_row & 1) << 2)) * 16
                : smem_address(ring) + static_cast<uint32_t>(tid) * 16;

  // First weight row of m16 tile m (0, 1) of this warp in a tile's 128 rows.
  auto tile_row = [&](int tile, int m) -> int64_t {
    if constexpr (kGateUp) return int64_t{m} * p.inter + int64_t{tile} * 64 + 16 * warp;
    else return int64_t{tile} * kBlockEdge + 32 * warp + 16 * m;
  };
  // The activation row (token for gate_up, expert-ordered row for down) of an expert's row r; rows
  // past the count repeat the last one (their columns are computed and never stored).
  auto act_row = [&](int first, int count, int r) -> int64_t {
    const int row = first + min(r, count - 1);
    if constexpr (kGateUp) return p.row_source[row] / p.top_k;
    else return row;
  };

  // ---- producer side: stage `produced` of this thread's sequence (item by item, 128-column blocks in order)
  const uint8_t* weight_row[2];  // row g of each m16 tile at byte 16c (kWarpLoad: row copy_row at byte 16 copy_chunk)
  int produce_item = first_item, produce_stage = 0, produced = 0;
  uint32_t produce_slot = 0;
  auto producer_item = [&]() {
    const int expert = active[produce_item / p.tiles] / kMaxChunks, tile = produce_item % p.tiles;
    const uint8_t* base = p.weight + int64_t{expert} * p.weight_rows * K;
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      weight_row[m] = kWarpLoad ? base + (tile_row(tile, m) + copy_row) * K + 16 * copy_chunk
                                : base + (tile_row(tile, m) + g) * K + 16 * c;
    }
  };
  // Queues the next stage (if any) and commits a group either way, so that wait_group counts stay uniform.
  auto produce = [&]() {
    if (produced < total) {
      const uint32_t stage = ring_mine + produce_slot * kStageStride;
      const int64_t k0 = int64_t{produce_stage} * kStageKBlocks * kBlockEdge;
      if constexpr (kWarpLoad) {
#pragma unroll
        for (int i = 0; i < kSlots; ++i) {  // rows kRowsPerCopy i + copy_row of the warp's 32
          const int row = kRowsPerCopy * i;
          copy_weights_16(stage + static_cast<uint32_t>(row) * kBlockEdge,
                          weight_row[row / 16] + (row % 16) * K + k0, policy);
        }
      } else {
#pragma unroll
        for (int kb = 0; kb < kStageKBlocks; ++kb)
#pragma unroll
          for (int m = 0; m < 2; ++m)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
              for (int half = 0; half < 2; ++half) {
                const int slot = kb * kChunksPerKBlock + m * 4 + h * 2 + half;
                copy_weights_16(stage + slot * kThreads * 16,
                                weight_row[m] + 8 * h * K + k0 + kb * kBlockEdge + 64 * half, policy);
              }
      }
      ++produced;
      produce_slot = produce_slot + 1 == kStages ? 0 : produce_slot + 1;
      if (++produce_stage == stages_per_item) {
        produce_stage = 0;
        produce_item += grid;
        if (produced < total) producer_item();
      }
    }
    commit_group();
  };

  // ---- consumer side
  int consume_item = first_item, consume_stage = 0, first = 0, count = 0, tile = 0, n_tiles = 0;
  const __half* act_lane[kMaxNt];       // activation row of column g of n8 tile j, at column 16c
  const float* act_scale_row[kMaxNt][2];  // scale rows of columns 2c and 2c + 1 of n8 tile j
  const float* weight_scale_row[2];     // scale row of each m16 tile
  auto consumer_item = [&]() {
    const int entry = active[consume_item / p.tiles];
    const int expert = entry / kMaxChunks, chunk = entry % kMaxChunks;
    tile = consume_item % p.tiles;
    first = p.offsets[expert] + chunk * kChunkRows;  // the chunk's rows
    count = min(p.offsets[expert + 1] - first, kChunkRows);  // 1..8 kMaxNt
    n_tiles = (count + 7) / 8;
#pragma unroll
    for (int j = 0; j < kMaxNt; ++j) {
      act_lane[j] = p.act + act_row(first, count, 8 * j + g) * K + 16 * c;
#pragma unroll
      for (int e = 0; e < 2; ++e)
        act_scale_row[j][e] = p.act_scale + act_row(first, count, 8 * j + 2 * c + e) * p.k_blocks;
    }
#pragma unroll
    for (int m = 0; m < 2; ++m)
      weight_scale_row[m] = p.weight_scale + (int64_t{expert} * (p.weight_rows / kBlockEdge) +
                                              tile_row(tile, m) / kBlockEdge) * p.k_blocks;
  };

  float sum[2][kMaxNt][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int j = 0; j < kMaxNt; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) sum[m][j][r] = 0.0f;

  producer_item();
  for (int s = 0; s < kStages - 1; ++s) produce();
  consumer_item();

  uint32_t consume_slot = 0;
  for (int s = 0; s < total; ++s) {
    // The stage's activation fragments and scales, all requested before the wait for its weights:
    // one L2 latency a stage, under that wait, instead of one per scale read and 64-column half.
    float weight_scale[kStageKBlocks][2];
    float act_scale[kStageKBlocks][kMaxNt][2];
    uint4 b[kStageKBlocks][2][kMaxNt][2];  // [kb_in][half][n8 tile]: this lane's f16 columns 0..7, 8..15
#pragma unroll
    for (int kb_in = 0; kb_in < kStageKBlocks; ++kb_in) {
      const int kb = consume_stage * kStageKBlocks + kb_in;
#pragma unroll
      for (int m = 0; m < 2; ++m) weight_scale[kb_in][m] = __ldg(weight_scale_row[m] + kb);
#pragma unroll
      for (int j = 0; j < kMaxNt; ++j) {
        act_scale[kb_in][j][0] = act_scale[kb_in][j][1] = 0.0f;
        if (j < n_tiles) {
#pragma unroll
          for (int e = 0; e < 2; ++e) act_scale[kb_in][j][e] = __ldg(act_scale_row[j][e] + kb);
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          b[kb_in][half][j][0] = b[kb_in][half][j][1] = make_uint4(0, 0, 0, 0);
          if (j < n_tiles) {
            const uint4* source = reinterpret_cast<const uint4*>(act_lane[j] + int64_t{kb} * kBlockEdge + 64 * half);
            b[kb_in][half][j][0] = __ldg(source);
            b[kb_in][half][j][1] = __ldg(source + 1);
          }
        }
      }
    }
    wait_group<kStages - 2>();  // this thread's stage s has landed
    // kWarpLoad: and every lane's of this warp; all lanes' reads of slot s - 1 are done before it is refilled.
    if constexpr (kWarpLoad) __syncwarp();
    produce();                  // into the slot read in iteration s - 1 (its values are in registers)
    // kWarpLoad: row g, chunk c of the warp's slice; chunk 4 half + c sits at position (4 half) ^ (4 (g & 1)) + c.
    const uint4* stage = ring + consume_slot * (kSlots * kThreads) +
                         (kWarpLoad ? warp * (kWarpStageBytes / 16) + 8 * g + c : tid);
#pragma unroll
    for (int kb_in = 0; kb_in < kStageKBlocks; ++kb_in) {
      float part[2][kMaxNt][4];
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int j = 0; j < kMaxNt; ++j)
#pragma unroll
          for (int r = 0; r < 4; ++r) part[m][j][r] = 0.0f;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        uint4 a[2][2];  // [m16 tile][row g, g + 8]: 16 e4m3 each
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            if constexpr (kWarpLoad) {  // row 16m + 8h + g, chunk 4 half + c of block kb_in
              a[m][h] = stage[(kb_in * 32 + 16 * m + 8 * h) * 8 + ((4 * half) ^ (4 * (g & 1)))];
            } else {
              a[m][h] = stage[(kb_in * kChunksPerKBlock + m * 4 + h * 2 + half) * kThreads];
            }
          }
#pragma unroll
        for (int w = 0; w < 4; ++w) {  // k16 step 4 half + w: columns 4w .. 4w + 3 of the chunks
          uint32_t a_f16[2][4];
#pragma unroll
          for (int m = 0; m < 2; ++m) {
            // a0 / a2: row g, columns 0-1 / 2-3 of the word; a1 / a3: row g + 8.
            e4m3x4_to_f16x2x2(word(a[m][0], w), a_f16[m][0], a_f16[m][2]);
            e4m3x4_to_f16x2x2(word(a[m][1], w), a_f16[m][1], a_f16[m][3]);
          }
#pragma unroll
          for (int j = 0; j < kMaxNt; ++j) {
            if (j >= n_tiles) continue;
            const uint4& bj = b[kb_in][half][j][w / 2];
            const uint32_t b0 = word(bj, 2 * (w % 2)), b1 = word(bj, 2 * (w % 2) + 1);
#pragma unroll
            for (int m = 0; m < 2; ++m) mma_f16(part[m][j], a_f16[m], b0, b1);
          }
        }
      }
      // Promotion: c0, c2 are column 2c (rows g, g + 8), c1, c3 column 2c + 1.
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int j = 0; j < kMaxNt; ++j) {
          if (j >= n_tiles) continue;
          const float scale_even = weight_scale[kb_in][m] * act_scale[kb_in][j][0];
          const float scale_odd = weight_scale[kb_in][m] * act_scale[kb_in][j][1];
#pragma unroll
          for (int r = 0; r < 4; ++r)
            sum[m][j][r] = fmaf(part[m][j][r], r % 2 == 0 ? scale_even : scale_odd, sum[m][j][r]);
        }
    }
    consume_slot = consume_slot + 1 == kStages ? 0 : consume_slot + 1;

    if (++consume_stage == stages_per_item) {  // the item's last block: store its rows, start the next
#pragma unroll
      for (int j = 0; j < kMaxNt; ++j) {
        if (j >= n_tiles) continue;
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int row = 8 * j + 2 * c + r % 2;  // the expert's row (the mma's column)
          if (row >= count) continue;
          bf16* target = p.out + int64_t{first + row} * p.outputs;
          const int in_tile = g + 8 * (r / 2);    // the mma's row within each m16 tile
          if constexpr (kGateUp) {
            target[tile * 64 + 16 * warp + in_tile] = __float2bfloat16(silu_times(sum[0][j][r], sum[1][j][r]));
          } else {
#pragma unroll
            for (int m = 0; m < 2; ++m)
              target[tile * kBlockEdge + 32 * warp + 16 * m + in_tile] = __float2bfloat16(sum[m][j][r]);
          }
        }
      }
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int j = 0; j < kMaxNt; ++j)
#pragma unroll
          for (int r = 0; r < 4; ++r) sum[m][j][r] = 0.0f;
      consume_stage = 0;
      consume_item += grid;
      if (s + 1 < total) consumer_item();
    }
  }
  wait_group<0>();  // only empty groups remain; leave nothing outstanding at exit
}

// ---- activation quantization ----

__global__ void __launch_bounds__(kQuantThreads)
    quantize_kernel(const bf16* __restrict__ x, int64_t rows, int64_t width, const int32_t* __restrict__ offsets,
                    int num_experts, int min_rows, int max_rows, __half* __restrict__ q,
                    float* __restrict__ scale) {
  const int64_t groups = width / kBlockEdge;
  const int64_t item = (static_cast<int64_t>(blockIdx.x) * kQuantThreads + threadIdx.x) / 32;
  if (item >= rows * groups) return;  // uniform per warp
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t row = item / groups, group = item % groups;
  if (offsets != nullptr) {  // only the rows of experts the fp8 products take
    if (row >= offsets[num_experts]) return;
    int lo = 0, hi = num_experts - 1;  // the last expert whose first row is <= row: the one holding it
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (offsets[mid] <= row) lo = mid;
      else hi = mid - 1;
    }
    const int expert_rows = offsets[lo + 1] - offsets[lo];
    if (expert_rows < min_rows || expert_rows > max_rows) return;
  }
  const int64_t col = group * kBlockEdge + 4 * lane;
  const uint2 raw = *reinterpret_cast<const uint2*>(x + row * width + col);
  const float v[4] = {__uint_as_float(raw.x << 16), __uint_as_float(raw.x & 0xffff0000u),
                      __uint_as_float(raw.y << 16), __uint_as_float(raw.y & 0xffff0000u)};
  float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, offset));
  float s = amax / kFp8E4M3Max;
  if (!(s > 0.0f)) s = 1.0f;  // a zero group (or an underflowing scale): any scale gives zeros
  // e4m3 (round to nearest, saturating), then back to f16 exactly; the first element of each pair low.
  const __nv_fp8x2_storage_t low = __nv_cvt_float2_to_fp8x2(make_float2(v[0] / s, v[1] / s), __NV_SATFINITE, __NV_E4M3);
  const __nv_fp8x2_storage_t high =
      __nv_cvt_float2_to_fp8x2(make_float2(v[2] / s, v[3] / s), __NV_SATFINITE, __NV_E4M3);
  *reinterpret_cast<uint2*>(q + row * width + col) = make_uint2(e4m3x2_to_f16x2(low), e4m3x2_to_f16x2(high));
  if (lane == 0) scale[row * groups + group] = s;
}

// ---- host side ----

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <bool kGateUp, int kMaxNt, int kStageKBlocks, bool kWarpLoad>
void launch_product(const Params& p, int64_t max_items, cudaStream_t stream) {
  const auto kernel = fp8_rows_kernel<kGateUp, kMaxNt, kStageKBlocks, kWarpLoad>;
  // A function attribute, not a stream operation: legal during graph capture.
  DSINFER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kRingBytes));
  // Two 100 KB blocks per SM need the largest shared-memory carveout (the L1 keeps the rest).
  DSINFER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          cudaSharedmemCarveoutMaxShared));
  int device = 0, multiprocessors = 0, resident = 0;
  DSINFER_CUDA_CHECK(cudaGetDevice(&device));
  DSINFER_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  DSINFER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kThreads, kRingBytes));
  // Persistent: every block resident at once (any grid is correct: blocks never wait for each other).
  const int64_t blocks = std::min<int64_t>(int64_t{multiprocessors} * std::max(resident, 1), max_items);
  kernel<<<static_cast<unsigned>(std::max<int64_t>(blocks, 1)), kThreads, kRingBytes, stream>>>(p);
  DSINFER_CUDA_CHECK_LAUNCH();
}

// Two n8 tiles an item: experts of 17 to 32 rows are two chunks (list_experts). Four tiles took too
// many registers for 2-block stages, and as a launch of their own the few experts that large left
// most SMs idle (an H200, T = 256: 190 us for one or two experts on the 16-row tensor-core tile).
constexpr int kItemNt = 2;

template <bool kGateUp, bool kWarpLoad>
void launch_product(const Params& p, int stage_k_blocks, int64_t max_items, cudaStream_t stream) {
  stage_k_blocks == 2 ? launch_product<kGateUp, kItemNt, 2, kWarpLoad>(p, max_items, stream)
                      : launch_product<kGateUp, kItemNt, 1, kWarpLoad>(p, max_items, stream);
}

template <bool kGateUp>
void launch_product(const Params& p, Fp8RowsLoad load, int stage_k_blocks, int64_t max_items, cudaStream_t stream) {
  load == Fp8RowsLoad::kWarpRows ? launch_product<kGateUp, true>(p, stage_k_blocks, max_items, stream)
                                 : launch_product<kGateUp, false>(p, stage_k_blocks, max_items, stream);
}

}  // namespace

bool fp8_rows_supported(int64_t hidden, int64_t inter) {
  return hidden > 0 && inter > 0 && hidden % kBlockEdge == 0 && inter % kBlockEdge == 0 && hidden <= (1 << 16) &&
         inter <= (1 << 16);
}

void fp8_rows_quantize(const __nv_bfloat16* x, int64_t rows, int64_t width, const int32_t* offsets, int num_experts,
                       int min_rows, int max_rows, __half* q, float* scale, cudaStream_t stream) {
  DSINFER_CHECK(rows >= 0 && width > 0 && width % kBlockEdge == 0, "fp8_rows_quantize: ", rows, " rows of width ",
                width, " (the width must be a positive multiple of 128)");
  if (rows == 0) return;
  DSINFER_CHECK(x && q && scale, "fp8_rows_quantize: null pointer");
  DSINFER_CHECK(aligned(x, 16) && aligned(q, 16) && aligned(scale, 4),
                "fp8_rows_quantize: x and q must be 16-byte aligned, scale 4-byte aligned");
  DSINFER_CHECK(offsets == nullptr || (num_experts >= 1 && min_rows >= 1 && max_rows >= min_rows),
                "fp8_rows_quantize: ", num_experts, " experts, rows ", min_rows, "..", max_rows);
  const int64_t warps = rows * (width / kBlockEdge);
  const int64_t blocks = (warps * 32 + kQuantThreads - 1) / kQuantThreads;
  DSINFER_CHECK(blocks <= INT32_MAX, "fp8_rows_quantize: ", rows, " x ", width, " is too large for one grid");
  quantize_kernel<<<static_cast<unsigned>(blocks), kQuantThreads, 0, stream>>>(x, rows, width, offsets, num_experts,
                                                                                 min_rows, max_rows, q, scale);
  DSINFER_CUDA_CHECK_LAUNCH();
}

void fp8_rows_product(const Fp8RowsProduct& a, cudaStream_t stream) {
  DSINFER_CHECK(fp8_rows_supported(a.hidden, a.inter), "fp8_rows_product: hidden ", a.hidden, " and inter ", a.inter,
                " must be multiples of 128 (at most 65536)");
  DSINFER_CHECK(a.num_experts >= 1 && a.num_experts <= kMaxExperts && a.top_k >= 1, "fp8_rows_product: ",
                a.num_experts, " experts (1..", kMaxExperts, "), top_k ", a.top_k);
  DSINFER_CHECK(a.min_rows >= 1 && a.max_rows >= a.min_rows && a.max_rows <= kFp8RowsMaxRows,
                "fp8_rows_product: rows ", a.min_rows, "..", a.max_rows, " outside 1..", kFp8RowsMaxRows);
  DSINFER_CHECK(a.stage_k_blocks >= 0 && a.stage_k_blocks <= 2, "fp8_rows_product: stage_k_blocks ", a.stage_k_blocks,
                " (0, 1 or 2)");
  DSINFER_CHECK(a.load == Fp8RowsLoad::kWarpRows || a.load == Fp8RowsLoad::kLanes, "fp8_rows_product: load form ",
                static_cast<int>(a.load), " unknown");
  DSINFER_CHECK(a.row_bound >= 0 && a.row_bound <= INT32_MAX, "fp8_rows_product: row bound ", a.row_bound);
  if (a.row_bound == 0) return;
  DSINFER_CHECK(a.weight && a.weight_scale && a.act && a.act_scale && a.offsets && a.out &&
                    (!a.gate_up || a.row_source),
                "fp8_rows_product: null pointer");
  DSINFER_CHECK(aligned(a.weight, 16) && aligned(a.act, 16), "fp8_rows_product: weights and activations must be "
                "16-byte aligned");

  Params p{};
  p.weight = reinterpret_cast<const uint8_t*>(a.weight);
  p.weight_scale = a.weight_scale;
  p.act = a.act;
  p.act_scale = a.act_scale;
  p.offsets = a.offsets;
  p.row_source = a.row_source;
  p.out = a.out;
  p.top_k = a.top_k;
  p.num_experts = a.num_experts;
  p.min_rows = a.min_rows;
  p.max_rows = a.max_rows;
  p.k = static_cast<int>(a.gate_up ? a.hidden : a.inter);
  p.k_blocks = p.k / kBlockEdge;
  p.weight_rows = static_cast<int>(a.gate_up ? 2 * a.inter : a.hidden);
  p.outputs = static_cast<int>(a.gate_up ? a.inter : a.hidden);
  p.inter = static_cast<int>(a.inter);
  p.tiles = static_cast<int>(a.gate_up ? a.inter / 64 : a.hidden / kBlockEdge);
  const int stage_k_blocks = a.stage_k_blocks == 2 && p.k_blocks % 2 == 0 ? 2 : 1;
  // Each expert served has at least min_rows rows: at most min(E, rows / min_rows) experts, each of
  // at most ceil(max_rows / chunk rows) chunks of `tiles` items (this only sizes the grid).
  const int64_t chunks = (a.max_rows + 8 * kItemNt - 1) / (8 * kItemNt);
  const int64_t max_items = std::min<int64_t>(a.num_experts, a.row_bound / a.min_rows) * chunks * p.tiles;
  if (max_items == 0) return;
  a.gate_up ? launch_product<true>(p, a.load, stage_k_blocks, max_items, stream)
            : launch_product<false>(p, a.load, stage_k_blocks, max_items, stream);
}

}  // namespace dsinfer::backend::cuda
