// The routed experts of a DeepSeekMoE layer (moe.h): grouped SiLU-gated MLPs over the rows the
// router assigned to each expert, then the weighted sum of each token's k expert outputs.
//
//   x [T, H] bf16, expert_ids / weights [T, k], gate_up [E, 2I, H], down [E, H, I] (bf16, or fp8 e4m3
//   with f32 scales per 128 x 128 block) -> out [T, H] bf16. A "row" is one (token, slot) pair; the
//   T * k rows are permuted so that each expert's rows are contiguous.
//
// Roofline. Decode reads every weight of every chosen expert once and is memory bound (2 FLOPs per
// fp8 byte). V3 (E = 256, I = 2048, H = 7168, k = 8), FP8, T = 1: 8 experts x 3 x 2048 x 7168 x 1 B =
// 352 MB (+ 86 KB of scales), 0.70 GFLOP: 105 us at H100's 3.35 TB/s, 73 us at H200's 4.8 TB/s. The
// bytes grow with the distinct experts touched (about 163 of 256 at T = 32 with uniform routing,
// nearly all 256 = 11.3 GB from T ~ 100 on). Prefill is compute bound: 2 * T * k * 3 * I * H =
// 0.70 GFLOP per token, 2.9 TFLOP at T = 4096. Everything else (x, h, the expert outputs, the plan)
// is < 1% of the decode bytes.
//
// Launches, in stream order (nothing is read back to the host; every grid is sized from the shapes):
//   1. plan_kernel, 1 block x 1024 threads: maps each global expert id to the stack's expert
//      (id - first_expert; ids outside the stack's slice, other ranks' experts under expert
//      parallelism, get no row), counts each expert's rows, prefix-sums them (offsets) and writes the
//      permutation row -> (token, slot) and back, ordered by token then slot within each expert
//      (deterministic). Every later launch sees only the stack's experts 0..E-1 and the rows the plan
//      kept, so nothing after it knows about the slice. Dynamic shared memory: a [W, E] int table,
//      W = min(32, 12000 / E) warps (32 KB for V3).
//   2. gate_up, h [rows, I] bf16 = silu(gate) * up fused in the epilogue, by row count per expert:
//      FP8 weights, 1 .. fp8_mma_max_rows rows (H, I multiples of 128): x quantized to fp8 per 128
//      columns, then fp8_rows_kernel (moe_fp8_rows.h: FP8 mma.sync on the raw weights); of the other
//      experts, 1 row: expert_gemv_kernel<row tile 1>; 2 .. gemv_max_rows: expert_gemv_kernel<row
//      tile 8> (not launched when T = 1); more: expert_mma_kernel, 16-row tiles up to 16 rows, 64-row
//      tiles beyond. Each launch lists the experts in its range on the device and skips the rest.
//   3. down, y [rows, H] bf16: the same kernels (the FP8 ones after quantizing their experts' rows of h).
//   A W4A8 product (int4 weights) is instead one quantization of its input (x per token, or per row
//   with the experts' static input scales or AWQ factors, which that pass applies: the seed's fusion
//   of the pre-scale into the expand-rows step; h per row) and one w4a8_rows_product over every expert
//   (moe_w4a8_rows.h), whatever its row count.
//   4. combine_kernel: out[t] = sum_j w[t, j] * y[row(t, j)] in slot order j = 0..k-1
//      (deterministic, no atomics) over the slots the plan kept (a skipped slot has row -1 and adds
//      nothing; a token without kept slots gets zeros). Bytes: T k H 2 read, T H 2 written
//      (moe_combine times it alone). 128 threads, a thread one 16-byte unit of H (grid.x = H / 8 /
//      128 = 7 for V3); one wave of blocks (6 per SM, <= 80 registers; grid.y = SMs x 6 / grid.x,
//      at most T), each walking tokens blockIdx.y, + gridDim.y, ... A token's 8 row loads are
//      predicated (not branched around) and issued before any is converted, and the next token's
//      slots (rows and weights) load while they are in flight: one round trip a token, 128 bytes in
//      flight a thread. (The loads had sat in branches, each followed by its conversion: eight round
//      trips a token after the one for its slots, 51% of copy at 16384 tokens on an H200.)
// The product kernels are persistent (grid = SMs x guaranteed resident blocks, at most the work);
// every block lists the experts it serves from the device offsets and walks the work items of those
// only, so an empty expert costs nothing.
//   expert_gemv_kernel (the decode path), 128 threads, 6 (row tile 1) or 3 (row tile 8) blocks per
//     SM: a work item is one warp's (expert, two weight rows): gate_up rows i and I + i (so silu * up
//     fuses), down rows 2n and 2n + 1. The warp reads each weight element of its rows once, 16 bytes
//     per lane per load, lane-strided along K (coalesced 512-byte warp loads, L1 bypassed, 4 loads
//     per row issued before any is used), dequantizes in registers (fp8 block scale applied to
//     the partial sum) and multiplies with up to 8 of the expert's rows at a time, looping for more.
//     The activations come through L1/L2 (small, and shared by all the expert's warps).
//   expert_mma_kernel, 128 threads, in two tile shapes: 16 rows x 128 weight rows (1 x 4 warps, 6
//     blocks per SM) for experts with 3..16 rows (decode at larger batches), and 64 x 128 (2 x 2
//     warps, 2 blocks per SM) for more (prefill). A work item is one such tile (gate_up: 64 gate rows
//     and the matching 64 up rows). K in steps of 64 through shared memory (fp8 * scale rounded to
//     bf16 on the way: a relative error of 2^-9 per weight that the GEMV path does not have), the
//     next step's global loads in registers during this step's mma.sync.m16n8k16 (bf16 in, f32
//     accumulate). Used when H and I are multiples of 16 and x and the
//     weights 16-byte aligned; otherwise the GEMV takes every expert.
#include "backend/cuda/moe.h"

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <climits>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/expert_list.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/moe_fp8_rows.h"
#include "backend/cuda/moe_w4a8_rows.h"
#include "backend/cuda/vector.cuh"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kMaxExperts = 1024;
constexpr int64_t kMaxRows = int64_t{1} << 24;  // T * k: keeps every row and work-item count in int32
constexpr int64_t kMaxWidth = int64_t{1} << 16;  // I, H (V3: 2048, 7168)
constexpr size_t kScratchAlign = 256;

constexpr int kPlanThreads = 1024;
constexpr int kPlanSharedInts = 12000;  // < 48 KB (what a launch gets without opting in) with the static part
constexpr int kGemvThreads = 128;
constexpr int kGemvWarps = kGemvThreads / 32;
constexpr int kGemvUnroll = 4;  // weight loads a lane issues before using them (gemv_rows)
// One-row bf16 experts with short rows (down: K = 2048, 4 KB a row) take twice the loads in flight,
// so that a work item is one round trip, at fewer blocks per SM (the extra buffers' registers): at
// four loads, V3's one-token down product read 3.15 TB/s where gate_up (K = 7168) read 3.9.
constexpr int kGemvDeepUnroll = 8;
constexpr int64_t kGemvDeepMaxRowBytes = 4096;
// Activation rows per pass over the weights: 1 (80 registers, 6 blocks per SM: the decode case of one
// row per expert) or up to 8 (fewer passes for 2..16 rows, 3 blocks per SM). A kernel serves any count.
constexpr int kGemvWideRowTile = 8;
// Blocks per SM that the launch bounds guarantee (registers and shared memory allow at least this many):
// the persistent grids are SMs x this, so every block is resident at once.
constexpr int gemv_blocks_per_sm(int row_tile, int unroll = kGemvUnroll) {
  return row_tile == 1 ? (unroll == kGemvUnroll ? 6 : 4) : 3;
}
constexpr int kMmaBlocksPerSm = 2;
constexpr int kMmaThreads = 128;
constexpr int kTileM = 64;   // activation rows per tile
constexpr int kSmallTileM = 16;  // ... for experts with at most this many rows (MmaLayout)
constexpr int kTileN = 128;  // weight rows per tile
constexpr int kTileK = 64;
constexpr int kSmemStride = kTileK + 8;  // 144-byte shared rows: ldmatrix's 8 row reads hit distinct banks
constexpr int kCombineThreads = 128;
constexpr int kCombineBatch = 8;  // slots whose loads the combine issues together (V3: top-8, all of them)
constexpr int kCombineBlocksPerSm = 6;  // guaranteed by the combine's launch bounds (<= 80 registers)

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// What one grouped product (gate_up or down) reads and writes.
struct ProductArgs {
  const void* weight;       // [E, weight_rows, k] bf16 or fp8
  const float* scale;       // fp8: [E, scale_rows, scale_cols]
  int64_t weight_rows;      // 2I (gate_up) or H (down)
  int64_t k;                // H (gate_up) or I (down)
  int64_t outputs;          // per row: I (gate_up) or H (down)
  int64_t scale_rows, scale_cols;
  const bf16* input;        // gate_up: x [T, H], rows gathered through row_source; down: h [rows, I]
  const int32_t* row_source;  // gate_up: [rows] token * top_k + slot; down: unused
  int top_k;
  const int32_t* offsets;   // [E + 1] first row of each expert
  int num_experts;
  int min_rows, max_rows;   // the experts this launch serves (by row count)
  bf16* output;             // h [rows, I] or y [rows, H]
};

// ---- small device helpers ----

// load_streaming, fp8x2_to_float2, bf16_low and bf16_high: vector.cuh.

__device__ __forceinline__ float silu_times(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// The experts a launch serves (expert_list.cuh), from the product's arguments.
template <int kThreads>
__device__ int list_product_experts(const ProductArgs& p, int rows_per_tile, int tiles, int* active, int* first_item,
                                    int* warp_sums, int* listed) {
  return list_experts<kThreads>(p.offsets, p.num_experts, p.min_rows, p.max_rows, rows_per_tile, tiles, active,
                                first_item, warp_sums, listed);
}

// ---- 1. plan ----

// Row order: expert, then flat index token * k + slot. Each of W warps owns a contiguous segment of
// the flat indices; table[w][e] first counts warp w's entries for e, then becomes the row where warp
// w's next entry for e goes (offset of e + entries of e in earlier segments), so ranks never depend
// on timing. Ids are global: id - first_expert is the stack's expert; ids outside [first_expert,
// first_expert + E) (another rank's experts, or negative dummies) get slot_row -1 and no row.
__global__ void __launch_bounds__(kPlanThreads)
    plan_kernel(const int32_t* __restrict__ expert_ids, int entries, int first_expert, int num_experts,
                int segment_warps, int32_t* __restrict__ offsets, int32_t* __restrict__ row_source,
                int32_t* __restrict__ slot_row) {
  extern __shared__ int32_t table[];  // [segment_warps, num_experts]
  __shared__ int32_t warp_sums[kPlanThreads / 32];
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  for (int i = tid; i < segment_warps * num_experts; i += kPlanThreads) table[i] = 0;
  __syncthreads();

  const int per_warp = static_cast<int>(ceil_div(ceil_div(entries, segment_warps), 32) * 32);
  const int64_t begin = static_cast<int64_t>(warp) * per_warp;
  const int64_t end = begin + per_warp < entries ? begin + per_warp : entries;
  int32_t* mine = table + warp * num_experts;
  auto expert_of = [&](int64_t i) {  // the stack's expert of entry i, or -1
    const int64_t e = i < end ? int64_t{expert_ids[i]} - first_expert : -1;  // int64: no overflow
    return e >= 0 && e < num_experts ? static_cast<int>(e) : -1;
  };
  if (warp < segment_warps) {
    for (int64_t base = begin; base < end; base += 32) {  // uniform per warp
      const int e = expert_of(base + lane);
      const unsigned peers = __match_any_sync(kFullMask, e);
      if (e >= 0 && lane == __ffs(peers) - 1) mine[e] += __popc(peers);
      __syncwarp();
    }
  }
  __syncthreads();

  int total = 0;
  if (tid < num_experts)
    for (int w = 0; w < segment_warps; ++w) total += table[w * num_experts + tid];
  int all;
  const int start = block_exclusive_scan<kPlanThreads>(total, &all, warp_sums);
  if (tid < num_experts) {
    offsets[tid] = start;
    int next = start;
    for (int w = 0; w < segment_warps; ++w) {
      const int here = table[w * num_experts + tid];
      table[w * num_experts + tid] = next;
      next += here;
    }
  }
  if (tid == 0) offsets[num_experts] = all;
  __syncthreads();

  if (warp < segment_warps) {
    for (int64_t base = begin; base < end; base += 32) {
      const int64_t i = base + lane;
      const int e = expert_of(i);
      const unsigned peers = __match_any_sync(kFullMask, e);
      if (e >= 0) {
        const int row = mine[e] + __popc(peers & ((1u << lane) - 1u));
        row_source[row] = static_cast<int32_t>(i);
        slot_row[i] = row;
      } else if (i < end) {
        slot_row[i] = -1;
      }
      __syncwarp();  // every lane has read mine[e] before the leader moves it on
      if (e >= 0 && lane == __ffs(peers) - 1) mine[e] += __popc(peers);
      __syncwarp();
    }
  }
}

// ---- 2, 3. grouped GEMV (few rows per expert) ----

// kElems weight elements per lane per step: one 16-byte load (16 fp8 or 8 bf16), or one element
// when the rows are not 16-byte aligned (K not a multiple of kElems).
template <bool kFp8, bool kVector>
constexpr int kGemvElems = kVector ? (kFp8 ? 16 : 8) : 1;

template <bool kFp8, bool kVector>
__device__ __forceinline__ uint4 load_weights(const char* row, int64_t index) {
  if constexpr (kVector) return load_streaming(row + index * (kFp8 ? 1 : 2));
  else if constexpr (kFp8) return make_uint4(reinterpret_cast<const uint8_t*>(row)[index], 0, 0, 0);
  else return make_uint4(reinterpret_cast<const uint16_t*>(row)[index], 0, 0, 0);
}

// Part `part` of a step's raw weights as floats (fp8 without its block scale, which is applied to the
// partial sum): elements [8 part, 8 part + 8) of a vector step, or the one element of a scalar step.
template <bool kFp8, bool kVector>
constexpr int kGemvPartElems = kVector ? 8 : 1;

template <bool kFp8, bool kVector>
__device__ __forceinline__ void unpack_weights(uint4 raw, int part, float (&w)[kGemvPartElems<kFp8, kVector>]) {
  if constexpr (!kVector) {
    w[0] = kFp8 ? __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(raw.x), __NV_E4M3)))
                : bf16_low(raw.x);
  } else {
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
    if constexpr (kFp8) {
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const uint32_t word = words[2 * part + q];
        const float2 low = fp8x2_to_float2(word), high = fp8x2_to_float2(word >> 16);
        w[4 * q] = low.x, w[4 * q + 1] = low.y, w[4 * q + 2] = high.x, w[4 * q + 3] = high.y;
      }
    } else {
#pragma unroll
      for (int q = 0; q < 4; ++q) w[2 * q] = bf16_low(words[q]), w[2 * q + 1] = bf16_high(words[q]);
    }
  }
}

template <int kElems>
__device__ __forceinline__ void load_activations(const bf16* p, float (&v)[kElems]) {
  if constexpr (kElems == 1) {
    v[0] = __bfloat162float(*p);
  } else {
#pragma unroll
    for (int c = 0; c < kElems / 8; ++c) {
      const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p) + c);
      const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) v[8 * c + 2 * q] = bf16_low(words[q]), v[8 * c + 2 * q + 1] = bf16_high(words[q]);
    }
  }
}

// One warp: weight rows row_a and row_b of `expert` times its rows [first_row, first_row + rows),
// rows <= kRows (the missing ones repeat the last row and are not stored).
template <bool kGateUp, bool kFp8, bool kVector, int kRows, int kUnroll = kGemvUnroll>
__device__ void gemv_rows(const ProductArgs& p, int expert, int first_row, int rows, int64_t row_a, int64_t row_b,
                          int lane) {
  constexpr int kElems = kGemvElems<kFp8, kVector>;
  constexpr int kPart = kGemvPartElems<kFp8, kVector>;
  constexpr int64_t kElemBytes = kFp8 ? 1 : 2;
  const int64_t K = p.k;
  const char* weights = static_cast<const char*>(p.weight) + expert * p.weight_rows * K * kElemBytes;
  const char* weights_a = weights + row_a * K * kElemBytes;
  const char* weights_b = weights + row_b * K * kElemBytes;
  const float* scales = kFp8 ? p.scale + expert * p.scale_rows * p.scale_cols : nullptr;
  const float* scales_a = kFp8 ? scales + (row_a / kWeightBlock) * p.scale_cols : nullptr;
  const float* scales_b = kFp8 ? scales + (row_b / kWeightBlock) * p.scale_cols : nullptr;
  const bf16* in[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = first_row + min(r, rows - 1);
    const int64_t source = kGateUp ? p.row_source[row] / p.top_k : row;
    in[r] = p.input + source * K;
  }

  float acc_a[kRows], acc_b[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc_a[r] = acc_b[r] = 0.0f;
  const int64_t steps = K / kElems;
  // kUnroll steps' weights (2 x kUnroll x 512 bytes a warp) are loaded before any of them
  // is used: with one step in flight a warp kept ~1 KB outstanding, too little to cover DRAM latency
  // at the resident warps per SM (Little's law wants ~32 KB per SM at H200's 4.8 TB/s).
  for (int64_t s0 = lane; s0 < steps; s0 += 32 * kUnroll) {
    uint4 raw_a[kUnroll], raw_b[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t s = s0 + 32 * u;
      raw_a[u] = raw_b[u] = make_uint4(0, 0, 0, 0);
      if (s < steps) {
        raw_a[u] = load_weights<kFp8, kVector>(weights_a, s * kElems);
        raw_b[u] = load_weights<kFp8, kVector>(weights_b, s * kElems);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t s = s0 + 32 * u;
      if (s >= steps) break;
      const int64_t k = s * kElems;
      // A step lies inside one 128-column scale block (kElems divides 128).
      const float scale_a = kFp8 ? __ldg(scales_a + k / kWeightBlock) : 1.0f;
      const float scale_b = kFp8 ? __ldg(scales_b + k / kWeightBlock) : 1.0f;
#pragma unroll
      for (int part = 0; part < kElems / kPart; ++part) {  // 8 elements at a time: fewer live registers
        float w_a[kPart], w_b[kPart];
        unpack_weights<kFp8, kVector>(raw_a[u], part, w_a);
        unpack_weights<kFp8, kVector>(raw_b[u], part, w_b);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float v[kPart];
          load_activations<kPart>(in[r] + k + part * kPart, v);
          float dot_a = 0.0f, dot_b = 0.0f;
#pragma unroll
          for (int i = 0; i < kPart; ++i) {
            dot_a = fmaf(w_a[i], v[i], dot_a);
            dot_b = fmaf(w_b[i], v[i], dot_b);
          }
          acc_a[r] = fmaf(scale_a, dot_a, acc_a[r]);
          acc_b[r] = fmaf(scale_b, dot_b, acc_b[r]);
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    acc_a[r] = warp_sum(acc_a[r]);
    acc_b[r] = warp_sum(acc_b[r]);
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r < rows && lane == r) {
      bf16* target = p.output + static_cast<int64_t>(first_row + r) * p.outputs;
      if constexpr (kGateUp) {
        target[row_a] = __float2bfloat16(silu_times(acc_a[r], acc_b[r]));  // row_a is the output index i
      } else {
        target[row_a] = __float2bfloat16(acc_a[r]);
        if (row_b != row_a) target[row_b] = __float2bfloat16(acc_b[r]);
      }
    }
  }
}

template <bool kGateUp, bool kFp8, bool kVector, int kRowTile, int kUnroll = kGemvUnroll>
__global__ void __launch_bounds__(kGemvThreads, gemv_blocks_per_sm(kRowTile, kUnroll))
    expert_gemv_kernel(const ProductArgs p) {
  __shared__ int active[kMaxExperts];
  __shared__ int first_item[kMaxExperts];
  __shared__ int warp_sums[kGemvWarps];
  // Items per expert: gate_up, one per output i (rows i, I + i); down, one per output pair.
  const int tiles = static_cast<int>(kGateUp ? p.outputs : ceil_div(p.outputs, 2));
  int listed;
  const int items = list_product_experts<kGemvThreads>(p, 0, tiles, active, first_item, warp_sums, &listed);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  for (int item = static_cast<int>(blockIdx.x) * kGemvWarps + warp; item < items;
       item += static_cast<int>(gridDim.x) * kGemvWarps) {  // uniform per warp
    const int expert = active[item / tiles];
    const int tile = item % tiles;
    const int64_t row_a = kGateUp ? tile : 2 * int64_t{tile};
    const int64_t row_b = kGateUp ? p.outputs + tile : (row_a + 1 < p.outputs ? row_a + 1 : row_a);
    const int first = p.offsets[expert];
    const int count = p.offsets[expert + 1] - first;
    for (int done = 0; done < count; done += kRowTile) {
      const int rows = min(kRowTile, count - done);
      if constexpr (kRowTile == 1) {
        gemv_rows<kGateUp, kFp8, kVector, 1, kUnroll>(p, expert, first + done, rows, row_a, row_b, lane);
      } else {
        static_assert(kRowTile == 8);
        if (rows <= 2) gemv_rows<kGateUp, kFp8, kVector, 2>(p, expert, first + done, rows, row_a, row_b, lane);
        else if (rows <= 4) gemv_rows<kGateUp, kFp8, kVector, 4>(p, expert, first + done, rows, row_a, row_b, lane);
        else gemv_rows<kGateUp, kFp8, kVector, 8>(p, expert, first + done, rows, row_a, row_b, lane);
      }
    }
  }
}

// ---- 2, 3. grouped tensor-core GEMM (many rows per expert) ----

// The warp layout of a tile of kTileM activation rows x 128 weight rows, 4 warps: with 64 rows, 2 x 2
// warps of 32 rows (two m16 tiles) x 64 columns (eight n8 tiles); with 16 rows (the decode shape: a
// few rows per expert), 1 x 4 warps of 16 rows x 32 columns (four n8 tiles), so the block needs a
// quarter of the registers and shared memory and three times as many blocks fit an SM, each with
// its next weight step in flight.
template <int kTileM>
struct MmaLayout {
  static_assert(kTileM == 64 || kTileM == 16);
  static constexpr int kMi = kTileM == 64 ? 2 : 1;        // m16 tiles per warp
  static constexpr int kWarpsM = kTileM / (16 * kMi);      // 2 or 1
  static constexpr int kWarpsN = kMmaThreads / 32 / kWarpsM;  // 2 or 4
  static constexpr int kNj = kTileN / 8 / kWarpsN;         // n8 tiles per warp: 8 or 4
  static constexpr int kHalf = kNj / 2 * 8;                // columns a warp has in each half of the tile
  // n8 tile j of warp column wn: j < kNj / 2 at kHalf wn + 8 j in the first half of the 128 tile
  // columns, the others at the same offsets in the second half. For gate_up, columns c and 64 + c are
  // the gate and up rows of the same output, so both land in the same thread.
  static __device__ __forceinline__ int column(int warp_n, int j) {
    return (j < kNj / 2 ? 0 : kTileN / 2) + kHalf * warp_n + 8 * (j % (kNj / 2));
  }
};

// Blocks per SM the launch bounds guarantee: 16-row tiles need a quarter of the accumulators and
// ~29 KB of shared memory (64-row tiles ~36 KB), so more of them fit, each with a step in flight.
// (A 4-stage cp.async weight ring was tried for the 16-row tile: no faster at batch 64 or 256 on an
// H200, and it slowed the 64-row prefill tile; the kernel is bound by its conversion work per step,
// not by bytes in flight: ncu, batch 256, 45% of DRAM bandwidth at 18.75% occupancy.)
constexpr int mma_blocks_per_sm(int tile_m) { return tile_m == 16 ? 6 : kMmaBlocksPerSm; }

template <bool kGateUp, bool kFp8, int kTileM>
__global__ void __launch_bounds__(kMmaThreads, mma_blocks_per_sm(kTileM)) expert_mma_kernel(const ProductArgs p) {
  using Layout = MmaLayout<kTileM>;
  constexpr int kMi = Layout::kMi, kNj = Layout::kNj;
  __shared__ alignas(16) bf16 tile_a[kTileM * kSmemStride];  // [kTileM rows][64 k] (+ pad)
  __shared__ alignas(16) bf16 tile_b[kTileN * kSmemStride];  // [128 weight rows][64 k] (+ pad)
  __shared__ int active[kMaxExperts];
  __shared__ int first_item[kMaxExperts];
  __shared__ int warp_sums[kMmaThreads / 32];
  constexpr int kChunkB = kFp8 ? 16 : 8;  // weight elements per 16-byte load
  constexpr int kChunksPerRowB = kTileK / kChunkB;
  constexpr int kLoadsB = kTileN * kChunksPerRowB / kMmaThreads;  // 4 (fp8) or 8 (bf16)
  constexpr int kLoadsA = kTileM * (kTileK / 8) / kMmaThreads;    // 4 or 1
  constexpr int64_t kElemBytes = kFp8 ? 1 : 2;

  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int warp_m = warp / Layout::kWarpsN, warp_n = warp % Layout::kWarpsN;
  const int64_t K = p.k;
  const int n_tiles = static_cast<int>(ceil_div(p.outputs, kGateUp ? kTileN / 2 : kTileN));
  int listed;
  const int items = list_product_experts<kMmaThreads>(p, kTileM, n_tiles, active, first_item, warp_sums, &listed);

  for (int item = static_cast<int>(blockIdx.x); item < items; item += static_cast<int>(gridDim.x)) {
    int lo = 0, hi = listed - 1;  // the last expert whose first item is <= item
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (first_item[mid] <= item) lo = mid;
      else hi = mid - 1;
    }
    const int expert = active[lo];
    const int local = item - first_item[lo];
    const int first = p.offsets[expert];
    const int count = p.offsets[expert + 1] - first;
    const int m_tiles = static_cast<int>(ceil_div(count, kTileM));
    const int m_base = (local % m_tiles) * kTileM;  // m fastest: concurrent blocks share weight tiles in L2
    const int n_tile = local / m_tiles;
    const int tile_rows = min(kTileM, count - m_base);

    // This thread's global loads: A chunks (row tid / 8 + 16 q, k a_col..+8), B chunks (row b_row(q)).
    const int a_col = (tid % 8) * 8;
    const bf16* a_source[kLoadsA];
#pragma unroll
    for (int q = 0; q < kLoadsA; ++q) {
      const int r = tid / 8 + 16 * q;
      a_source[q] = nullptr;
      if (r < tile_rows) {
        const int row = first + m_base + r;
        const int64_t source = kGateUp ? p.row_source[row] / p.top_k : row;
        a_source[q] = p.input + source * K;
      }
    }
    const int b_col = (tid % kChunksPerRowB) * kChunkB;
    const char* b_source[kLoadsB];
    const float* b_scales[kLoadsB];
#pragma unroll
    for (int q = 0; q < kLoadsB; ++q) {
      const int j = tid / kChunksPerRowB + (kMmaThreads / kChunksPerRowB) * q;
      int64_t weight_row;
      bool valid;
      if constexpr (kGateUp) {
        const int64_t i = int64_t{n_tile} * (kTileN / 2) + (j % (kTileN / 2));
        valid = i < p.outputs;
        weight_row = j < kTileN / 2 ? i : p.outputs + i;
      } else {
        weight_row = int64_t{n_tile} * kTileN + j;
        valid = weight_row < p.outputs;
      }
      b_source[q] = valid ? static_cast<const char*>(p.weight) + (expert * p.weight_rows + weight_row) * K * kElemBytes
                          : nullptr;
      b_scales[q] = valid && kFp8
                        ? p.scale + (expert * p.scale_rows + weight_row / kWeightBlock) * p.scale_cols
                        : nullptr;
    }

    uint4 reg_a[kLoadsA], reg_b[kLoadsB];
    float reg_scale[kLoadsB];
    auto load_step = [&](int64_t k0) {
#pragma unroll
      for (int q = 0; q < kLoadsA; ++q) {
        const int64_t k = k0 + a_col;
        reg_a[q] = a_source[q] && k < K ? __ldg(reinterpret_cast<const uint4*>(a_source[q] + k))
                                        : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int q = 0; q < kLoadsB; ++q) {
        const int64_t k = k0 + b_col;  // K % 16 == 0: a chunk is all in or all out
        const bool in = b_source[q] && k < K;
        reg_b[q] = in ? load_streaming(b_source[q] + k * kElemBytes) : make_uint4(0, 0, 0, 0);
        if constexpr (kFp8) reg_scale[q] = in ? __ldg(b_scales[q] + k / kWeightBlock) : 0.0f;
      }
    };
    auto store_step = [&]() {
#pragma unroll
      for (int q = 0; q < kLoadsA; ++q)
        *reinterpret_cast<uint4*>(tile_a + (tid / 8 + 16 * q) * kSmemStride + a_col) = reg_a[q];
#pragma unroll
      for (int q = 0; q < kLoadsB; ++q) {
        bf16* target = tile_b + (tid / kChunksPerRowB + (kMmaThreads / kChunksPerRowB) * q) * kSmemStride + b_col;
        if constexpr (kFp8) {  // w = fp8 * scale, rounded to bf16 for the tensor cores
          const uint32_t words[4] = {reg_b[q].x, reg_b[q].y, reg_b[q].z, reg_b[q].w};
          uint32_t out[8];
#pragma unroll
          for (int h = 0; h < 8; ++h) {
            const float2 w = fp8x2_to_float2(words[h / 2] >> (16 * (h % 2)));
            out[h] = pack_bf16(w.x * reg_scale[q], w.y * reg_scale[q]);
          }
          reinterpret_cast<uint4*>(target)[0] = make_uint4(out[0], out[1], out[2], out[3]);
          reinterpret_cast<uint4*>(target)[1] = make_uint4(out[4], out[5], out[6], out[7]);
        } else {
          *reinterpret_cast<uint4*>(target) = reg_b[q];
        }
      }
    };

    float acc[kMi][kNj][4];
#pragma unroll
    for (int mi = 0; mi < kMi; ++mi)
#pragma unroll
      for (int j = 0; j < kNj; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[mi][j][c] = 0.0f;

    load_step(0);
    for (int64_t k0 = 0; k0 < K; k0 += kTileK) {
      __syncthreads();  // the previous step (or item) has finished reading the tiles
      store_step();
      __syncthreads();
      if (k0 + kTileK < K) load_step(k0 + kTileK);
#pragma unroll
      for (int ks = 0; ks < kTileK / 16; ++ks) {
        uint32_t a[kMi][4];
#pragma unroll
        for (int mi = 0; mi < kMi; ++mi)
          ldmatrix_x4(a[mi], tile_a + (warp_m * 16 * kMi + mi * 16 + lane % 16) * kSmemStride + ks * 16 + (lane / 16) * 8);
#pragma unroll
        for (int jp = 0; jp < kNj / 2; ++jp) {  // n8 tiles 2 jp and 2 jp + 1 (adjacent columns)
          uint32_t b[4];
          const int column = Layout::column(warp_n, 2 * jp);
          ldmatrix_x4(b, tile_b + (column + lane % 8 + 8 * (lane / 16)) * kSmemStride + ks * 16 + 8 * ((lane / 8) % 2));
#pragma unroll
          for (int mi = 0; mi < kMi; ++mi) {
            mma_bf16(acc[mi][2 * jp], a[mi], b[0], b[1]);
            mma_bf16(acc[mi][2 * jp + 1], a[mi], b[2], b[3]);
          }
        }
      }
    }

    // Accumulator c of n8 tile j: row lane / 4 (+ 8 for c >= 2), columns 2 (lane % 4) + {0, 1}.
#pragma unroll
    for (int mi = 0; mi < kMi; ++mi) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = warp_m * 16 * kMi + mi * 16 + lane / 4 + 8 * half;
        if (r >= tile_rows) continue;
        bf16* target = p.output + static_cast<int64_t>(first + m_base + r) * p.outputs;
        if constexpr (kGateUp) {
#pragma unroll
          for (int j = 0; j < kNj / 2; ++j) {
            const int64_t i = int64_t{n_tile} * (kTileN / 2) + Layout::column(warp_n, j) + 2 * (lane % 4);
            if (i < p.outputs)  // I % 16 == 0, i even: i + 1 is in range too
              *reinterpret_cast<uint32_t*>(target + i) =
                  pack_bf16(silu_times(acc[mi][j][2 * half], acc[mi][j + kNj / 2][2 * half]),
                              silu_times(acc[mi][j][2 * half + 1], acc[mi][j + kNj / 2][2 * half + 1]));
          }
        } else {
#pragma unroll
          for (int j = 0; j < kNj; ++j) {
            const int64_t n = int64_t{n_tile} * kTileN + Layout::column(warp_n, j) + 2 * (lane % 4);
            if (n < p.outputs)
              *reinterpret_cast<uint32_t*>(target + n) = pack_bf16(acc[mi][j][2 * half], acc[mi][j][2 * half + 1]);
          }
        }
      }
    }
  }
}

// ---- prefill form: rows gathered into expert order ----

// gathered[r] = x[row_source[r] / k], 16-byte units (kVector) or single elements; grid (units / 128, rows).
template <bool kVector>
__global__ void __launch_bounds__(kCombineThreads)
    gather_expert_rows_kernel(const bf16* __restrict__ x, const int32_t* __restrict__ row_source, int top_k,
                              int64_t hidden, int rows, bf16* __restrict__ gathered) {
  using Unit = std::conditional_t<kVector, uint4, bf16>;
  constexpr int64_t kElems = kVector ? 8 : 1;
  const int64_t units = hidden / kElems;
  const int64_t unit = int64_t{blockIdx.x} * kCombineThreads + threadIdx.x;
  if (unit >= units) return;
  for (int r = static_cast<int>(blockIdx.y); r < rows; r += static_cast<int>(gridDim.y)) {
    const int64_t token = row_source[r] / top_k;
    reinterpret_cast<Unit*>(gathered + int64_t{r} * hidden)[unit] = reinterpret_cast<const Unit*>(x + token * hidden)[unit];
  }
}

// ---- 4. combine ----

// A batch of a token's slots: their rows in expert_out (-1: skipped, or past top_k) and weights.
struct CombineSlots {
  int row[kCombineBatch];
  float weight[kCombineBatch];
};

// Slots [first, first + count) of the flattened [tokens, top_k] arrays, count <= kCombineBatch.
__device__ __forceinline__ void load_combine_slots(const int32_t* __restrict__ slot_row,
                                                   const float* __restrict__ weights, int64_t first, int count,
                                                   CombineSlots& slots) {
#pragma unroll
  for (int b = 0; b < kCombineBatch; ++b) {
    slots.row[b] = b < count ? __ldg(slot_row + first + b) : -1;
    slots.weight[b] = b < count ? __ldg(weights + first + b) : 0.0f;
  }
}

// out[t] = sum_j w[t, j] * expert_out[row(t, j)] for this thread's unit (8 columns, or 1 without
// kVector) of the tokens blockIdx.y, + gridDim.y, ... (see the top). A batch's row loads are
// predicated, not branched around, and their conversions come after all of them, so the 8 loads are
// in flight together; the next token's slots load while this token's rows are in flight.
template <bool kVector>
__global__ void __launch_bounds__(kCombineThreads, kCombineBlocksPerSm)
    combine_kernel(const bf16* __restrict__ expert_out, const int32_t* __restrict__ slot_row,
                   const float* __restrict__ weights, bf16* __restrict__ out, int tokens, int top_k, int64_t hidden) {
  allow_dependent_launch();  // the shared expert's product after it (gemv.h)
  constexpr int kElems = kVector ? 8 : 1;
  using Raw = std::conditional_t<kVector, uint4, uint16_t>;  // a unit's bf16 bits
  const int64_t units = hidden / kElems;
  const int64_t unit = int64_t{blockIdx.x} * kCombineThreads + threadIdx.x;
  if (unit >= units) return;
  const Raw* rows = reinterpret_cast<const Raw*>(expert_out) + unit;
  const int64_t step = gridDim.y;
  const int first_count = min(top_k, kCombineBatch);
  CombineSlots next;
  load_combine_slots(slot_row, weights, int64_t{blockIdx.y} * top_k, first_count, next);
  for (int64_t t = blockIdx.y; t < tokens; t += step) {
    float sum[kElems];
#pragma unroll
    for (int i = 0; i < kElems; ++i) sum[i] = 0.0f;
    // kCombineBatch slots at a time; the sums in slot order j = 0..k-1: the same bits on every run.
    for (int j0 = 0; j0 < top_k; j0 += kCombineBatch) {
      CombineSlots slots;
      if (j0 == 0) {
        slots = next;
      } else {
        load_combine_slots(slot_row, weights, t * top_k + j0, min(top_k - j0, kCombineBatch), slots);
      }
      Raw raw[kCombineBatch];
#pragma unroll
      for (int b = 0; b < kCombineBatch; ++b) {
        if (slots.row[b] >= 0) raw[b] = rows[slots.row[b] * units];
      }
      if (j0 == 0 && t + step < tokens) load_combine_slots(slot_row, weights, (t + step) * top_k, first_count, next);
#pragma unroll
      for (int b = 0; b < kCombineBatch; ++b) {
        if (slots.row[b] < 0) continue;
        float v[kElems];
        if constexpr (kVector) {
          unpack_bf16_words(raw[b], v);
        } else {
          v[0] = bf16_low(raw[b]);
        }
#pragma unroll
        for (int i = 0; i < kElems; ++i) sum[i] = fmaf(slots.weight[b], v[i], sum[i]);
      }
    }
    if constexpr (kVector) {
      reinterpret_cast<uint4*>(out + t * hidden)[unit] = pack_bf16_words(sum);
    } else {
      out[t * hidden + unit] = __float2bfloat16(sum[0]);
    }
  }
}

// ---- host side ----

// The direct form's scratch: the plan's arrays, h [rows, I] and y [rows, H] bf16, with the FP8
// products x [T, H] and h [rows, I] quantized to e4m3 (values stored as f16) with their scales
// [.., / 128] f32, and with W4A8 products x [T or rows, H] and h [rows, I] quantized for them
// (w4a8_quantize: e4m3 values as f16, one f32 scale per row).
struct ScratchLayout {
  size_t offsets = 0, row_source = 0, slot_row = 0, hidden_rows = 0, expert_out = 0;
  size_t x_q = 0, x_scale = 0, h_q = 0, h_scale = 0;
  size_t w4a8_x_q = 0, w4a8_x_scale = 0, w4a8_h_q = 0, w4a8_h_scale = 0, total = 0;
};

// The prefill form's scratch: the plan's arrays, then x's rows in expert order [rows, H] (reused for
// the down products, which are [rows, H] too), the gate_up products [rows, 2I] and h [rows, I].
struct ByExpertLayout {
  size_t offsets = 0, row_source = 0, slot_row = 0, rows_h = 0, gate_up = 0, hidden = 0, total = 0;
};

// Byte offsets of scratch pieces handed out in order, each kScratchAlign-aligned.
class ScratchCursor {
 public:
  size_t take(size_t bytes) {
    const size_t here = at_;
    at_ += (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
    return here;
  }
  size_t total() const { return at_; }

 private:
  size_t at_ = 0;
};

// The plan's arrays, first in both forms' scratch: offsets [E + 1], row_source and slot_row [rows].
template <typename Layout>
void take_plan(ScratchCursor& cursor, const MoeShape& s, Layout& layout) {
  const auto rows = static_cast<size_t>(s.tokens * s.top_k);
  layout.offsets = cursor.take((s.num_experts + 1) * sizeof(int32_t));
  layout.row_source = cursor.take(rows * sizeof(int32_t));
  layout.slot_row = cursor.take(rows * sizeof(int32_t));
}

ByExpertLayout by_expert_layout(const MoeShape& s) {
  const auto rows = static_cast<size_t>(s.tokens * s.top_k);
  ByExpertLayout layout;
  ScratchCursor cursor;
  take_plan(cursor, s, layout);
  layout.rows_h = cursor.take(rows * s.hidden * sizeof(bf16));
  layout.gate_up = cursor.take(rows * 2 * s.inter * sizeof(bf16));
  layout.hidden = cursor.take(rows * s.inter * sizeof(bf16));
  layout.total = cursor.total();
  return layout;
}

void check_shape(const MoeShape& s) {
  DSINFER_CHECK(s.tokens >= 0 && s.top_k >= 1 && s.num_experts >= 1 && s.num_experts <= kMaxExperts &&
                    s.inter >= 1 && s.inter <= kMaxWidth && s.hidden >= 1 && s.hidden <= kMaxWidth &&
                    s.tokens * s.top_k <= kMaxRows,
                "moe_experts: unsupported shape (tokens ", s.tokens, ", top_k ", s.top_k, ", experts ", s.num_experts,
                ", inter ", s.inter, ", hidden ", s.hidden, "); supported: up to ", kMaxExperts, " experts, ",
                kMaxRows, " tokens x top_k, widths up to ", kMaxWidth);
  DSINFER_CHECK(s.first_expert >= 0 && s.first_expert <= INT32_MAX - s.num_experts,
                "moe_experts: the stack's experts [", s.first_expert, ", ", s.first_expert + s.num_experts,
                ") are not all int32 expert ids");
  DSINFER_CHECK(s.fp8_mma_max_rows >= 0 && s.fp8_mma_max_rows <= kFp8RowsMaxRows, "moe_experts: fp8_mma_max_rows ",
                s.fp8_mma_max_rows, " outside 0..", kFp8RowsMaxRows);
  // The FP8 range must start where one of grouped_product's launches does (1 or 2).
  DSINFER_CHECK(s.fp8_mma_min_rows == 1 || s.fp8_mma_min_rows == 2, "moe_experts: fp8_mma_min_rows ",
                s.fp8_mma_min_rows, " is neither 1 nor 2");
}

// The most rows per expert the FP8 products take for shape s (moe_fp8_rows.h): 0 when they are off
// or the widths do not fit them. The scratch layout and the dispatch both follow it.
int fp8_rows_limit(const MoeShape& s) {
  return s.fp8_mma_max_rows > 0 && fp8_rows_supported(s.hidden, s.inter) ? s.fp8_mma_max_rows : 0;
}

ScratchLayout scratch_layout(const MoeShape& s) {
  const auto rows = static_cast<size_t>(s.tokens * s.top_k);
  ScratchLayout layout;
  ScratchCursor cursor;
  take_plan(cursor, s, layout);
  layout.hidden_rows = cursor.take(rows * s.inter * sizeof(bf16));
  layout.expert_out = cursor.take(rows * s.hidden * sizeof(bf16));
  if (fp8_rows_limit(s) > 0) {
    const auto tokens = static_cast<size_t>(s.tokens);
    layout.x_q = cursor.take(tokens * s.hidden * sizeof(__half));
    layout.x_scale = cursor.take(tokens * (s.hidden / kWeightBlock) * sizeof(float));
    layout.h_q = cursor.take(rows * s.inter * sizeof(__half));
    layout.h_scale = cursor.take(rows * (s.inter / kWeightBlock) * sizeof(float));
  }
  if (s.w4a8_gate_up) {  // x per token, or per row (each row's expert has its own static scale or factors)
    const auto x_rows = s.w4a8_gate_up_per_row ? rows : static_cast<size_t>(s.tokens);
    layout.w4a8_x_q = cursor.take(x_rows * s.hidden * sizeof(__half));
    layout.w4a8_x_scale = cursor.take(x_rows * sizeof(float));
  }
  if (s.w4a8_down) {
    layout.w4a8_h_q = cursor.take(rows * s.inter * sizeof(__half));
    layout.w4a8_h_scale = cursor.take(rows * sizeof(float));
  }
  layout.total = cursor.total();
  return layout;
}

void check_matrix(const ExpertMatrix& m, const char* name) {
  DSINFER_CHECK(m.data != nullptr, "moe_experts: ", name, " weights are null");
  DSINFER_CHECK(m.format == WeightFormat::kDense || m.format == WeightFormat::kFp8Block ||
                    m.format == WeightFormat::kW4A8,
                "moe_experts: ", name, " has a weight format the CUDA experts do not support");
  DSINFER_CHECK(m.format != WeightFormat::kFp8Block || m.scale != nullptr, "moe_experts: ", name,
                " is fp8 without scales");
  DSINFER_CHECK(m.format != WeightFormat::kW4A8 || (m.scale != nullptr && m.group_size > 0), "moe_experts: ", name,
                " is W4A8 without scales or a group size");
}

// The W4A8 fields of a MoeShape size the scratch: they must describe the matrices.
void check_w4a8_shape(const MoeShape& s, const ExpertMatrix& gate_up, const ExpertMatrix& down) {
  const bool gate_up_w4a8 = gate_up.format == WeightFormat::kW4A8, down_w4a8 = down.format == WeightFormat::kW4A8;
  DSINFER_CHECK(s.w4a8_gate_up == gate_up_w4a8 && s.w4a8_down == down_w4a8 &&
                    s.w4a8_gate_up_per_row ==
                        (gate_up_w4a8 && (gate_up.input_scale != nullptr || gate_up.pre_scale != nullptr)),
                "moe_experts: the MoeShape's W4A8 fields (gate_up ", s.w4a8_gate_up, ", per row ",
                s.w4a8_gate_up_per_row, ", down ", s.w4a8_down, ") do not describe the expert matrices");
}

// A persistent grid: blocks_per_sm on every SM of the current device, or fewer when there is less work.
int persistent_grid(int blocks_per_sm, int64_t max_blocks) {
  int device = 0, multiprocessors = 0;
  DSINFER_CUDA_CHECK(cudaGetDevice(&device));
  DSINFER_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  const int64_t resident = int64_t{multiprocessors} * blocks_per_sm;
  return static_cast<int>(std::max<int64_t>(1, std::min(resident, max_blocks)));
}

template <bool kGateUp, bool kFp8, bool kVector, int kRowTile, int kUnroll = kGemvUnroll>
void launch_gemv_kernel(const ProductArgs& p, int64_t max_items, cudaStream_t stream) {
  const auto kernel = expert_gemv_kernel<kGateUp, kFp8, kVector, kRowTile, kUnroll>;
  const int grid = persistent_grid(gemv_blocks_per_sm(kRowTile, kUnroll), ceil_div(max_items, kGemvWarps));
  kernel<<<grid, kGemvThreads, 0, stream>>>(p);
  DSINFER_CUDA_CHECK_LAUNCH();
}

template <bool kGateUp>
void launch_gemv(const ProductArgs& p, bool fp8, bool vector, bool wide, int64_t max_items, cudaStream_t stream) {
  if (fp8 && vector) {
    wide ? launch_gemv_kernel<kGateUp, true, true, kGemvWideRowTile>(p, max_items, stream)
         : launch_gemv_kernel<kGateUp, true, true, 1>(p, max_items, stream);
  } else if (fp8) {
    wide ? launch_gemv_kernel<kGateUp, true, false, kGemvWideRowTile>(p, max_items, stream)
         : launch_gemv_kernel<kGateUp, true, false, 1>(p, max_items, stream);
  } else if (vector) {
    if (wide) launch_gemv_kernel<kGateUp, false, true, kGemvWideRowTile>(p, max_items, stream);
    else if (p.k * 2 <= kGemvDeepMaxRowBytes)
      launch_gemv_kernel<kGateUp, false, true, 1, kGemvDeepUnroll>(p, max_items, stream);
    else launch_gemv_kernel<kGateUp, false, true, 1>(p, max_items, stream);
  } else {
    wide ? launch_gemv_kernel<kGateUp, false, false, kGemvWideRowTile>(p, max_items, stream)
         : launch_gemv_kernel<kGateUp, false, false, 1>(p, max_items, stream);
  }
}

template <bool kGateUp, bool kFp8, int kTileM>
void launch_mma(const ProductArgs& p, int64_t max_items, cudaStream_t stream) {
  const auto kernel = expert_mma_kernel<kGateUp, kFp8, kTileM>;
  const int grid = persistent_grid(mma_blocks_per_sm(kTileM), max_items);
  kernel<<<grid, kMmaThreads, 0, stream>>>(p);
  DSINFER_CUDA_CHECK_LAUNCH();
}

// Experts' row counts lo..hi (hi < lo: none).
struct RowRange {
  int lo = 1, hi = 0;
  bool empty() const { return hi < lo; }
};

// One grouped product, split by each expert's row count (read on the device): experts with a row
// count in `served` are not touched (the FP8 products take them); of the others, 1 row,
// the one-row GEMV; 2..16, the wide GEMV; more, the tensor-core kernel when use_mma (else the wide
// GEMV). With one token every expert has one row (unless the router repeated an id), so the one-row
// GEMV serves all. rows = T * k bounds every expert's count.
template <bool kGateUp>
void grouped_product(ProductArgs p, bool fp8, bool gemv_vector, bool use_mma, int mma_min_rows, RowRange served,
                     int64_t tokens, int64_t rows, cudaStream_t stream) {
  const int64_t tiles = kGateUp ? p.outputs : ceil_div(p.outputs, 2);  // GEMV items per expert
  // With fewer tokens than mma_min_rows no expert reaches the tensor-core tiles unless the router
  // repeated an id in a row; the GEMVs (which loop over any row count) then take every expert, and
  // no tile kernel is launched to find nothing (two ~3 us launches a layer at batch 1).
  use_mma = use_mma && tokens >= mma_min_rows;
  const int gemv_max_rows = use_mma ? mma_min_rows - 1 : INT_MAX;
  // A launch's range of row counts, raised past the served range when it starts inside it (served
  // starts at 1 or at mma_min_rows: where a launch's range starts); false when no expert can fall in it.
  auto serve = [&](int lo, int hi) {
    p.min_rows = !served.empty() && served.lo <= lo ? std::max(lo, served.hi + 1) : lo;
    p.max_rows = hi;
    return p.min_rows <= p.max_rows && rows >= p.min_rows;
  };
  if (serve(1, tokens == 1 ? gemv_max_rows : 1))
    launch_gemv<kGateUp>(p, fp8, gemv_vector, false, std::min<int64_t>(p.num_experts, rows / p.min_rows) * tiles,
                         stream);
  if (tokens > 1 && serve(2, gemv_max_rows))
    launch_gemv<kGateUp>(p, fp8, gemv_vector, true, std::min<int64_t>(p.num_experts, rows / p.min_rows) * tiles,
                         stream);
  if (!use_mma) return;
  const int64_t n_tiles = ceil_div(p.outputs, kGateUp ? kTileN / 2 : kTileN);
  if (mma_min_rows <= kSmallTileM && serve(mma_min_rows, kSmallTileM)) {  // a few rows: one 16-row tile per expert
    const int64_t experts_served = std::min<int64_t>(p.num_experts, rows / p.min_rows);
    fp8 ? launch_mma<kGateUp, true, kSmallTileM>(p, experts_served * n_tiles, stream)
        : launch_mma<kGateUp, false, kSmallTileM>(p, experts_served * n_tiles, stream);
  }
  if (!serve(std::max(mma_min_rows, kSmallTileM + 1), INT_MAX)) return;
  const int64_t experts_served = std::min<int64_t>(p.num_experts, rows / p.min_rows);
  const int64_t mma_items = (rows / kTileM + experts_served) * n_tiles;
  fp8 ? launch_mma<kGateUp, true, kTileM>(p, mma_items, stream) : launch_mma<kGateUp, false, kTileM>(p, mma_items, stream);
}

// Launch 1 of both forms: the plan (offsets, the row permutation and its inverse).
void launch_plan(const int32_t* expert_ids, int64_t rows, const MoeShape& shape, int32_t* offsets, int32_t* row_source,
                 int32_t* slot_row, cudaStream_t stream) {
  const int64_t num_experts = shape.num_experts;
  const int segment_warps = static_cast<int>(std::min<int64_t>(kPlanThreads / 32, kPlanSharedInts / num_experts));
  plan_kernel<<<1, kPlanThreads, segment_warps * num_experts * sizeof(int32_t), stream>>>(
      expert_ids, static_cast<int>(rows), static_cast<int>(shape.first_expert), static_cast<int>(num_experts),
      segment_warps, offsets, row_source, slot_row);
  DSINFER_CUDA_CHECK_LAUNCH();
}

// Launch 4 of both forms: out[t] = sum_j weights[t, j] * expert_out[slot_row[t, j]]. One wave of
// blocks, as many on every SM (at most one a token and column block).
void launch_combine(const bf16* expert_out, const int32_t* slot_row, const float* weights, bf16* out, int64_t tokens,
                    int64_t top_k, int64_t hidden, cudaStream_t stream) {
  const bool vector = hidden % 8 == 0 && aligned16(out) && aligned16(expert_out);
  const int64_t units = vector ? hidden / 8 : hidden;
  const int64_t blocks_x = ceil_div(units, kCombineThreads);
  const int64_t row_slots = std::max<int64_t>(1, persistent_grid(kCombineBlocksPerSm, INT64_MAX) / blocks_x);
  const int64_t blocks_y = std::min(tokens, row_slots);
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(blocks_y));
  if (vector) {
    combine_kernel<true><<<grid, kCombineThreads, 0, stream>>>(expert_out, slot_row, weights, out,
                                                               static_cast<int>(tokens), static_cast<int>(top_k), hidden);
  } else {
    combine_kernel<false><<<grid, kCombineThreads, 0, stream>>>(expert_out, slot_row, weights, out,
                                                                static_cast<int>(tokens), static_cast<int>(top_k), hidden);
  }
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

void moe_combine(const __nv_bfloat16* rows, const int32_t* slot_row, const float* weights, __nv_bfloat16* out,
                 int64_t tokens, int64_t top_k, int64_t hidden, cudaStream_t stream) {
  DSINFER_CHECK(tokens >= 0 && top_k >= 1 && hidden >= 1 && tokens <= INT32_MAX, "moe_combine: ", tokens,
                " tokens, top_k ", top_k, ", hidden ", hidden);
  if (tokens == 0) return;
  DSINFER_CHECK(rows && slot_row && weights && out, "moe_combine: null pointer");
  launch_combine(rows, slot_row, weights, out, tokens, top_k, hidden, stream);
}

size_t moe_experts_scratch_bytes(const MoeShape& shape) {
  check_shape(shape);
  return scratch_layout(shape).total;
}

void moe_experts(const __nv_bfloat16* x, const int32_t* expert_ids, const float* weights,
                 const ExpertMatrix& gate_up, const ExpertMatrix& down, const MoeShape& shape,
                 __nv_bfloat16* out, void* scratch, size_t scratch_bytes, cudaStream_t stream) {
  check_shape(shape);
  check_matrix(gate_up, "gate_up");
  check_matrix(down, "down");
  check_w4a8_shape(shape, gate_up, down);
  const ScratchLayout layout = scratch_layout(shape);
  DSINFER_CHECK(scratch_bytes >= layout.total, "moe_experts: scratch of ", scratch_bytes, " bytes, ", layout.total,
                " needed for ", shape.tokens, " tokens (size it with moe_experts_scratch_bytes at the largest step)");
  if (shape.tokens == 0) return;
  DSINFER_CHECK(x && expert_ids && weights && out && scratch, "moe_experts: null input, output or scratch pointer");
  DSINFER_CHECK(aligned16(scratch), "moe_experts: scratch must be 16-byte aligned");

  const int64_t T = shape.tokens, k = shape.top_k, E = shape.num_experts, I = shape.inter, H = shape.hidden;
  const int64_t rows = T * k;
  auto* base = static_cast<char*>(scratch);
  auto* offsets = reinterpret_cast<int32_t*>(base + layout.offsets);
  auto* row_source = reinterpret_cast<int32_t*>(base + layout.row_source);
  auto* slot_row = reinterpret_cast<int32_t*>(base + layout.slot_row);
  auto* hidden_rows = reinterpret_cast<bf16*>(base + layout.hidden_rows);
  auto* expert_out = reinterpret_cast<bf16*>(base + layout.expert_out);
  auto* x_q = reinterpret_cast<__half*>(base + layout.x_q);
  auto* x_scale = reinterpret_cast<float*>(base + layout.x_scale);
  auto* h_q = reinterpret_cast<__half*>(base + layout.h_q);
  auto* h_scale = reinterpret_cast<float*>(base + layout.h_scale);

  launch_plan(expert_ids, rows, shape, offsets, row_source, slot_row, stream);

  // What every rows product (FP8 or W4A8) takes from the plan and the shape.
  auto planned = [&](auto& product) {
    product.offsets = offsets;
    product.row_source = row_source;
    product.top_k = static_cast<int>(k);
    product.num_experts = static_cast<int>(E);
    product.inter = I;
    product.hidden = H;
    product.row_bound = rows;
  };

  // W4A8 products: every expert through w4a8_rows_product, its input quantized first.
  W4a8RowsProduct w4a8;
  planned(w4a8);
  auto w4a8_product = [&](bool gate_up_product, const ExpertMatrix& matrix, const W4a8Quantize& quantize,
                          bf16* out_rows) {
    w4a8_quantize(quantize, stream);
    const bool tensor_core =
        !shape.w4a8_reference && w4a8_rows_supported(gate_up_product, H, I, matrix.group_size);
    w4a8.kernel = tensor_core ? W4a8RowsKernel::kTensorCore : W4a8RowsKernel::kReference;
    w4a8.gate_up = gate_up_product;
    w4a8.weight = static_cast<const uint8_t*>(matrix.data);
    w4a8.weight_scale = matrix.scale;
    w4a8.group_size = matrix.group_size;
    w4a8.act = quantize.q;
    w4a8.act_scale = quantize.scale;
    w4a8.act_per_token = gate_up_product && quantize.row_source == nullptr;
    w4a8.out = out_rows;
    w4a8_rows_product(w4a8, stream);
  };

  const bool gate_up_fp8 = gate_up.format == WeightFormat::kFp8Block;
  const bool down_fp8 = down.format == WeightFormat::kFp8Block;
  const bool gate_up_w4a8 = gate_up.format == WeightFormat::kW4A8;
  const bool down_w4a8 = down.format == WeightFormat::kW4A8;
  const int mma_min_rows = std::max(shape.gemv_max_rows, 1) + 1;
  const bool use_mma = rows >= mma_min_rows && H % 16 == 0 && I % 16 == 0 && aligned16(x) &&
                       aligned16(gate_up.data) && aligned16(down.data);
  // The FP8 products take the experts of fp8_mma_min_rows (1 only from two tokens on; at most
  // mma_min_rows) to fp8_rows_limit rows, per product with FP8 weights (without the tensor-core
  // kernel, from 1). Experts with fewer rows keep the GEMV. An H200 (moe_fp8_rows_check) timed the two
  // alike where every expert has one or two rows (T = 1, 118 vs 118 us; T = 8, 743 vs 740 us) and the
  // FP8 products ahead from ~3 rows (T = 64, 3.00 vs 3.54 ms; T = 256, 3.40 vs 4.89 ms); in the
  // 4-layer V3 step, taking two-row experts too saved 0.2 ms at batch 64 (model_step_bench): one
  // launch over all experts instead of a wide GEMV's and its tail after it.
  const int fp8_lo = use_mma ? std::min(mma_min_rows, T >= 2 ? shape.fp8_mma_min_rows : 2) : 1;
  const RowRange fp8_rows{fp8_lo, fp8_rows_limit(shape)};
  // With fewer tokens than the range's first count, no expert reaches it unless the router repeated
  // an id in a row: the old kernels then take every expert (a T = 1 step launches nothing more).
  const bool fp8_reachable = !fp8_rows.empty() && T >= fp8_rows.lo;
  const RowRange gate_up_fp8_rows =
      fp8_reachable && gate_up_fp8 && aligned16(gate_up.data) && aligned16(x) ? fp8_rows : RowRange{};
  const RowRange down_fp8_rows = fp8_reachable && down_fp8 && aligned16(down.data) ? fp8_rows : RowRange{};
  Fp8RowsProduct fp8_product;
  planned(fp8_product);
  // Two 128-column blocks per pipeline stage: 3.42 vs 3.23 TB/s for the two products at T = 256 on an
  // H200 (moe_fp8_rows_check, warp-row loads).
  fp8_product.stage_k_blocks = 2;
  auto fp8_products = [&](bool gate_up_product, const ExpertMatrix& matrix, const __half* act, const float* act_scale,
                          RowRange range, bf16* out_rows) {
    fp8_product.gate_up = gate_up_product;
    fp8_product.weight = static_cast<const __nv_fp8_e4m3*>(matrix.data);
    fp8_product.weight_scale = matrix.scale;
    fp8_product.act = act;
    fp8_product.act_scale = act_scale;
    fp8_product.min_rows = range.lo;
    fp8_product.max_rows = range.hi;
    fp8_product.out = out_rows;
    fp8_rows_product(fp8_product, stream);
  };

  // 2. gate_up: h [rows, I] = silu(gate) * up
  ProductArgs args{};
  args.weight = gate_up.data;
  args.scale = gate_up_fp8 ? gate_up.scale : nullptr;
  args.weight_rows = 2 * I;
  args.k = H;
  args.outputs = I;
  args.scale_rows = ceil_div(2 * I, kWeightBlock);
  args.scale_cols = ceil_div(H, kWeightBlock);
  args.input = x;
  args.row_source = row_source;
  args.top_k = static_cast<int>(k);
  args.offsets = offsets;
  args.num_experts = static_cast<int>(E);
  args.output = hidden_rows;
  if (gate_up_w4a8) {
    W4a8Quantize quantize;
    quantize.x = x;
    quantize.width = H;
    quantize.q = reinterpret_cast<__half*>(base + layout.w4a8_x_q);
    quantize.scale = reinterpret_cast<float*>(base + layout.w4a8_x_scale);
    if (shape.w4a8_gate_up_per_row) {  // per row: each row's expert has its own static scale or AWQ factors
      quantize.rows = rows;
      quantize.row_source = row_source;
      quantize.top_k = static_cast<int>(k);
      quantize.offsets = offsets;
      quantize.num_experts = static_cast<int>(E);
      quantize.input_scale = gate_up.input_scale;
      quantize.pre_scale = gate_up.pre_scale;
    } else {  // per token: a token's rows of every expert share its amax
      quantize.rows = T;
    }
    w4a8_product(true, gate_up, quantize, hidden_rows);
  } else {
    if (!gate_up_fp8_rows.empty()) {  // x's rows quantized once, whatever their number of slots
      fp8_rows_quantize(x, T, H, nullptr, 0, 0, 0, x_q, x_scale, stream);
      fp8_products(true, gate_up, x_q, x_scale, gate_up_fp8_rows, hidden_rows);
    }
    const int64_t gate_up_elems = gate_up_fp8 ? 16 : 8;
    grouped_product<true>(args, gate_up_fp8, H % gate_up_elems == 0 && aligned16(x) && aligned16(gate_up.data),
                          use_mma, mma_min_rows, gate_up_fp8_rows, T, rows, stream);
  }

  // 3. down: y [rows, H]
  args.weight = down.data;
  args.scale = down_fp8 ? down.scale : nullptr;
  args.weight_rows = H;
  args.k = I;
  args.outputs = H;
  args.scale_rows = ceil_div(H, kWeightBlock);
  args.scale_cols = ceil_div(I, kWeightBlock);
  args.input = hidden_rows;
  args.row_source = nullptr;
  args.output = expert_out;
  if (down_w4a8) {  // after every gate_up launch: the rows of h it reads are written
    W4a8Quantize quantize;
    quantize.x = hidden_rows;
    quantize.width = I;
    quantize.rows = rows;
    quantize.offsets = offsets;  // rows past the plan's are not quantized
    quantize.num_experts = static_cast<int>(E);
    quantize.input_scale = down.input_scale;
    quantize.pre_scale = down.pre_scale;
    quantize.q = reinterpret_cast<__half*>(base + layout.w4a8_h_q);
    quantize.scale = reinterpret_cast<float*>(base + layout.w4a8_h_scale);
    w4a8_product(false, down, quantize, expert_out);
  } else {
    if (!down_fp8_rows.empty()) {  // after every gate_up launch: the rows of h it reads are written
      fp8_rows_quantize(hidden_rows, rows, I, offsets, static_cast<int>(E), down_fp8_rows.lo, down_fp8_rows.hi, h_q,
                        h_scale, stream);
      fp8_products(false, down, h_q, h_scale, down_fp8_rows, expert_out);
    }
    const int64_t down_elems = down_fp8 ? 16 : 8;
    grouped_product<false>(args, down_fp8, I % down_elems == 0 && aligned16(down.data), use_mma, mma_min_rows,
                           down_fp8_rows, T, rows, stream);
  }

  launch_combine(expert_out, slot_row, weights, out, T, k, H, stream);
}

size_t moe_experts_by_expert_scratch_bytes(const MoeShape& shape) {
  check_shape(shape);
  return by_expert_layout(shape).total;
}

void moe_experts_by_expert(const __nv_bfloat16* x, const int32_t* expert_ids, const float* weights,
                           const ExpertMatrix& gate_up, const ExpertMatrix& down, const MoeShape& shape,
                           const ExpertProduct& product, __nv_bfloat16* out, void* scratch, size_t scratch_bytes,
                           int32_t* host_offsets, cudaStream_t stream) {
  check_shape(shape);
  check_matrix(gate_up, "gate_up");
  check_matrix(down, "down");
  DSINFER_CHECK(gate_up.format != WeightFormat::kW4A8 && down.format != WeightFormat::kW4A8,
                "moe_experts_by_expert: W4A8 experts take moe_experts, which serves them at any size");
  const ByExpertLayout layout = by_expert_layout(shape);
  DSINFER_CHECK(scratch_bytes >= layout.total, "moe_experts: scratch of ", scratch_bytes, " bytes, ", layout.total,
                " needed for ", shape.tokens, " tokens (moe_experts_by_expert_scratch_bytes)");
  if (shape.tokens == 0) return;
  DSINFER_CHECK(x && expert_ids && weights && out && scratch && host_offsets && product,
                "moe_experts: null input, output, scratch, host buffer or product");
  DSINFER_CHECK(aligned16(scratch), "moe_experts: scratch must be 16-byte aligned");

  const int64_t T = shape.tokens, k = shape.top_k, E = shape.num_experts, I = shape.inter, H = shape.hidden;
  const int64_t rows = T * k;
  auto* base = static_cast<char*>(scratch);
  auto* offsets = reinterpret_cast<int32_t*>(base + layout.offsets);
  auto* row_source = reinterpret_cast<int32_t*>(base + layout.row_source);
  auto* slot_row = reinterpret_cast<int32_t*>(base + layout.slot_row);
  auto* rows_h = reinterpret_cast<bf16*>(base + layout.rows_h);
  auto* gate_up_out = reinterpret_cast<bf16*>(base + layout.gate_up);
  auto* hidden = reinterpret_cast<bf16*>(base + layout.hidden);

  launch_plan(expert_ids, rows, shape, offsets, row_source, slot_row, stream);
  DSINFER_CUDA_CHECK(cudaMemcpyAsync(host_offsets, offsets, (E + 1) * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream));  // host_offsets: the per-expert row counts
  const int64_t valid_rows = host_offsets[E];  // rows with an expert of the stack: the plan's first rows
  DSINFER_CHECK(valid_rows >= 0 && valid_rows <= rows, "moe_experts: the plan counted ", valid_rows, " rows of ", rows);

  const bool vector = H % 8 == 0 && aligned16(x) && aligned16(rows_h);
  const int64_t units = vector ? H / 8 : H;
  const dim3 grid(static_cast<unsigned>(ceil_div(units, kCombineThreads)),
                  static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(valid_rows, 1), 65535)));
  if (valid_rows > 0) {
    if (vector) {
      gather_expert_rows_kernel<true><<<grid, kCombineThreads, 0, stream>>>(x, row_source, static_cast<int>(k), H,
                                                                            static_cast<int>(valid_rows), rows_h);
    } else {
      gather_expert_rows_kernel<false><<<grid, kCombineThreads, 0, stream>>>(x, row_source, static_cast<int>(k), H,
                                                                             static_cast<int>(valid_rows), rows_h);
    }
    DSINFER_CUDA_CHECK_LAUNCH();
  }

  // gate_up products, then h = silu(gate) * up over every row at once, then the down products into
  // rows_h (x's gathered rows are dead by then).
  for (int64_t e = 0; e < E; ++e) {
    const int64_t first = host_offsets[e], count = host_offsets[e + 1] - first;
    if (count > 0) product(rows_h + first * H, count, gate_up, e, 2 * I, H, gate_up_out + first * 2 * I);
  }
  silu_mul(gate_up_out, hidden, valid_rows, I, stream);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t first = host_offsets[e], count = host_offsets[e + 1] - first;
    if (count > 0) product(hidden + first * I, count, down, e, H, I, rows_h + first * H);
  }

  launch_combine(rows_h, slot_row, weights, out, T, k, H, stream);
}

}  // namespace dsinfer::backend::cuda
