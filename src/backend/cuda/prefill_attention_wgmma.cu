// Expanded (prefill) MLA attention with Hopper warpgroup MMA and TMA: PrefillAttentionKernel::kWgmma.
// The contract is prefill_attention.h's (ragged, causal by position; the same outputs as kFlash up to
// float summation order).
//
// Shapes: q [T, H, 192] (q_nope 128 | q_rope 64), kv [S, H, 256] (k_nope 128 | v 128 per head),
// k_rope [S, 64] shared by the heads, out [T, H, 128]; bf16.
// Roofline: FLOPs = 2 * (192 + 128) * H * sum over queries of their visible keys; 8 x 2048 tokens at
// 128 heads is ~1.4 TFLOP against ~80 MB of q, kv and out: tensor-core bound.
//
// Launch: grid (ceil(T / 128) + B, ceil(H / P)), 384 threads = three warpgroups, one block per SM (~209 KB of
// shared memory). Block (x, y) takes one 128-query tile of one sequence (the last tiles of a
// sequence, which see the most keys, first; spare blocks exit) for heads y * P .. y * P + P - 1, one
// after another (P = 4, 2 or 1: the most that still leaves two blocks an SM): the next head's Q is
// loaded once every consumer has scored the current head's last block, and the K/V rings run on
// across the heads, so one head's start overlaps the previous one's end. Warpgroup 2 is the producer: one
// thread issues every TMA load, and the warpgroup gives its registers to the consumers (setmaxnreg
// 24 / 240). Consumer warpgroup w owns queries 64w .. 64w + 63 and walks the visible keys 128 at a
// time, multiplying by V one block behind so that each block's softmax runs under MMAs:
//   step b: [its turn] issue S_b = Q K_b^T (12 x wgmma m64n128k16, A = Q and B = the key block, both
//           K-major from shared memory) and O = O * c_{b-1} + P_{b-1} V_{b-1} (8 x m64n128k16, P from
//           registers, V MN-major); [the other warpgroup's turn]; wait for S_b, release K_b, online
//           softmax of S_b in place (f32, log2 units; only blocks that cross some query's position
//           are masked; 2^(scale s - max) as one FFMA and ex2.approx a score) giving c_b; wait for the
//           P V, release V_{b-1}, pack P_b to bf16.
// The two warpgroups take turns issuing (named barriers), so one's softmax runs under the other's
// MMAs as well (FlashAttention-3's ping-pong).
// Shared memory, every operand in the 128-byte-swizzled layout TMA writes (rows of 64 bf16):
//   Q        [3 boxes: q_nope 0..63, 64..127, q_rope][128 queries][64]   48 KB, loaded once
//   K ring   2 x [3 boxes: k_nope 0..63, 64..127, k_rope][128 keys][64]  96 KB
//   V ring   2 x [2 boxes][128 keys][64]                                  64 KB
// Block b's K is loaded once every consumer warp has released K_{b-2} (its scores are done), its V
// once they released V_{b-2} (its P V is done); q and kv are read through 3D tensor maps over
// [rows, heads, dims], k_rope through a 2D one. Rows past a tile's queries score whatever q rows
// follow (or TMA's zeros) and are never written; keys past the context are either another
// sequence's rows or zeros, and always masked by position, so P = 0 never meets NaN.
// The kernel is issue-bound (Nsight Compute, H200, 8 x 2K: 2.1 instructions a cycle, "selected" the
// top stall reason). It executed 1.35 G instructions against FlashInfer's 0.91 G; the softmax's
// separate scaling pass, exp2f's range checks and a compare and select per score on every block
// (the mask, if-converted) were most of the difference. As now (the scale folded into one FFMA with
// ex2.approx per score, the mask only on blocks that cross a position): 523 -> 582 TFLOP/s at 8 x 2K,
// 575 -> 650 at 1 x 16K, 570 -> 698 for a 4K chunk on a 4K prefix, 0.95-0.99x FlashInfer's sm90
// prefill in the same run (kernels_bench; FlashInfer then built without its -use_fast_math, which
// understates it). Waits that sleep in try_wait (a suspend-time hint, as
// CUTLASS's barriers do) measured no faster.
#include "backend/cuda/prefill_attention_wgmma.h"

#include <climits>
#include <cmath>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/hopper.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/prefill_tile.cuh"
#include "backend/cuda/tensor_map.h"
#include "core/error.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kNope = kPrefillNopeDim, kRope = kPrefillRopeDim, kValue = kPrefillValueDim;  // 128 / 64 / 128
constexpr int kQk = kNope + kRope;      // 192
constexpr int kKvRow = kNope + kValue;  // 256
constexpr int kBlockQ = 128;            // queries a block: two warpgroups of 64 (wgmma's M)
constexpr int kBlockK = 128;            // keys a step (wgmma's N for S)
constexpr int kBox = 64;                // bf16 in one 128-byte swizzled row
constexpr int kRowBytes = kBox * 2;
constexpr int kBoxBytes = 128 * kRowBytes;  // 16,384: one [128 rows][64 dims] box
constexpr int kQkBoxes = kQk / kBox;        // 3
constexpr int kVBoxes = kValue / kBox;      // 2
constexpr int kQBytes = kQkBoxes * kBoxBytes;
constexpr int kKBytes = kQkBoxes * kBoxBytes;
constexpr int kVBytes = kVBoxes * kBoxBytes;
constexpr int kConsumerThreads = 256;                 // two warpgroups
constexpr int kConsumerWarps = kConsumerThreads / 32;
constexpr int kThreads = kConsumerThreads + 128;      // + the producer warpgroup (one TMA thread)
// Registers move from the producer to the consumers once the block starts (setmaxnreg): 240 a
// consumer thread holds S, O and P (64 + 64 + 32) without spilling.
constexpr int kProducerRegisters = 24, kConsumerRegisters = 240;
static_assert(kConsumerThreads * kConsumerRegisters + (kThreads - kConsumerThreads) * kProducerRegisters <= 65536);
static_assert(kBlockQ == 2 * 64 && kBlockK == 128 && kQk % kBox == 0 && kValue % kBox == 0);

constexpr int kQOffset = 0;
constexpr int kKOffset = kQBytes;                     // + stage * kKBytes
constexpr int kVOffset = kKOffset + 2 * kKBytes;      // + stage * kVBytes
constexpr int kBarrierOffset = kVOffset + 2 * kVBytes;
// full: the producer's TMA landed; free: every consumer warp is done with the stage.
constexpr int kQFull = 0, kKFull = 1, kKFree = 3, kVFull = 5, kVFree = 7;  // K / V barriers: + stage
constexpr int kQFree = 9;  // every consumer warp has scored the head's last block: Q may take the next head
constexpr int kNumBarriers = 10;
constexpr int kSmemBytes = kBarrierOffset + kNumBarriers * 8 + 1024;  // + alignment slack
static_assert(kSmemBytes <= 227 * 1024, "must fit Hopper's 227 KB of shared memory a block");
// Named barriers (0 is __syncthreads): warpgroup w waits on kTurn + w before issuing its MMAs and
// then lets the other go (kTurn + 1 - w), so the two warpgroups' MMAs alternate and each one's
// softmax runs under the other's MMAs.
constexpr int kTurn = 1;

struct Params {
  const int32_t* query_start;
  const int32_t* kv_start;
  const int32_t* positions;
  bf16* out;
  int heads;
  int heads_per_block;  // heads a block walks one after another, with the same query tile
  int num_sequences;
  float scale_log2;  // scale * log2(e)
};

// MN-major V ([keys][64 dims] boxes of 128 keys): leading offset = the next 64 dims (the next box),
// stride offset = the next 8 keys. A k16 step (16 keys) advances the start address by 2 KB.
// (descriptor_base(address, kBoxBytes) and descriptor_at build them.)

// S[64 x 128] (+)= A[64 x 16] B[16 x 128]^T, both K-major in shared memory (64 accumulators:
// d[4 j + 2 h + e] = S[16 (warp % 4) + g + 8 h][8 j + 2 c + e]).
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t a, uint64_t b, int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(accumulate));
}

// O[64 x 128] += A[64 x 16] B[16 x 128]: A in registers (each warp's m16n8k16 A fragment), B
// MN-major in shared memory (transpose bit set).
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}


__global__ void __launch_bounds__(kThreads, 1)
    prefill_wgmma_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap kv_map,
                         const __grid_constant__ CUtensorMap rope_map, const Params p) {
  __shared__ int tile_sequence, tile_begin, tile_end, min_position, max_position;
  const int head0 = blockIdx.y * p.heads_per_block;
  const int block_heads = min(p.heads_per_block, p.heads - head0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wg = warp / 4;  // 0, 1: consumers; 2: the producer warpgroup
  const int g = lane / 4, c = lane % 4;
  const int row_in_tile = 64 * wg + 16 * (warp % 4) + g;  // a consumer's query rows: +0 and +8

  if (threadIdx.x == 0) {
    const PrefillTile tile = find_prefill_tile<kBlockQ>(p.query_start, p.num_sequences, blockIdx.x);
    tile_sequence = tile.sequence;
    tile_begin = tile.begin;
    tile_end = tile.end;
    min_position = INT_MAX;
    max_position = -1;
  }
  __syncthreads();
  if (tile_sequence < 0) return;  // uniform: a spare block
  const int begin = tile_begin, end = tile_end;
  const int kv0 = p.kv_start[tile_sequence], kv_len = p.kv_start[tile_sequence + 1] - kv0;
  // Positions clamped to the context (the caller guarantees it; a bad one must not read past it).
  if (threadIdx.x < end - begin) {
    const int position = min(p.positions[begin + threadIdx.x], kv_len - 1);
    atomicMin(&min_position, position);
    atomicMax(&max_position, position);
  }

  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_address = smem_address(smem_raw);
  const uint32_t base = (raw_address + 1023u) & ~1023u;
  auto barrier = [&](int index) { return base + kBarrierOffset + 8u * index; };
  auto k_box = [&](int stage, int box) { return base + kKOffset + stage * kKBytes + box * kBoxBytes; };
  auto v_box = [&](int stage, int box) { return base + kVOffset + stage * kVBytes + box * kBoxBytes; };
  if (threadIdx.x == 0) {
    mbarrier_init(barrier(kQFull), 1);
    mbarrier_init(barrier(kQFree), kConsumerWarps);
    for (int stage = 0; stage < 2; ++stage) {
      mbarrier_init(barrier(kKFull + stage), 1);
      mbarrier_init(barrier(kVFull + stage), 1);
      mbarrier_init(barrier(kKFree + stage), kConsumerWarps);
      mbarrier_init(barrier(kVFree + stage), kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  const int block_min_position = min_position;
  const int num_blocks = (min(max_position + 1, kv_len) + kBlockK - 1) / kBlockK;  // <= 0: nothing visible

  if (wg == 2) {
    setmaxnreg_dec<kProducerRegisters>();
    // ---- producer: one thread issues every TMA load. Key block b's K goes into K stage b % 2 once
    // every consumer has scored block b - 2; its V into V stage b % 2 once every consumer has
    // finished P V of block b - 2 (one step later: the consumers multiply by V one block behind).
    if (threadIdx.x == kConsumerThreads && num_blocks > 0) {
      for (int hi = 0; hi < block_heads; ++hi) {
        const int h = head0 + hi;
        if (hi > 0) mbarrier_wait(barrier(kQFree), (hi - 1) & 1);
        mbarrier_arrive_expect_tx(barrier(kQFull), kQBytes);
        for (int box = 0; box < kQkBoxes; ++box)
          tma_load_3d(base + kQOffset + box * kBoxBytes, &q_map, box * kBox, h, begin, barrier(kQFull));
        for (int b = 0; b < num_blocks; ++b) {
          // n counts the blocks of all of the block's heads: the rings' stage and phase follow it.
          const int n = hi * num_blocks + b, stage = n & 1, row = kv0 + b * kBlockK;
          const uint32_t parity = ((n - 2) >> 1) & 1;
          if (n >= 2) mbarrier_wait(barrier(kKFree + stage), parity);
          mbarrier_arrive_expect_tx(barrier(kKFull + stage), kKBytes);
          for (int box = 0; box < kNope / kBox; ++box)
            tma_load_3d(k_box(stage, box), &kv_map, box * kBox, h, row, barrier(kKFull + stage));
          tma_load_2d(k_box(stage, kNope / kBox), &rope_map, 0, row, barrier(kKFull + stage));
          if (n >= 2) mbarrier_wait(barrier(kVFree + stage), parity);
          mbarrier_arrive_expect_tx(barrier(kVFull + stage), kVBytes);
          for (int box = 0; box < kVBoxes; ++box)
            tma_load_3d(v_box(stage, box), &kv_map, kNope + box * kBox, h, row, barrier(kVFull + stage));
        }
      }
    }
    return;
  }

  // ---- consumers ----
  setmaxnreg_inc<kConsumerRegisters>();
  int row_position[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = begin + row_in_tile + 8 * half;
    row_position[half] = row < end ? min(p.positions[row], kv_len - 1) : -1;
  }
  float o[64];  // O[row_in_tile + 8 h][8 j + 2 c + e] = o[4 j + 2 h + e]
  zero_registers(o);
  float s[64];  // S[row_in_tile + 8 h][8 j + 2 c + e] = s[4 j + 2 h + e]
  zero_registers(s);
  uint32_t pa[kBlockK / 16][4];  // P of the previous block, the register A operand of its P V
  float running_max[2] = {-INFINITY, -INFINITY};
  float partial_sum[2] = {0.f, 0.f};  // this thread's columns; quad-reduced at the end
  float correction[2] = {1.f, 1.f};   // O's rescale before the previous block's P V

  // The operands' descriptors as uniform offsets from three bases (hopper.cuh's descriptor_at).
  const uint32_t q_desc = descriptor_base(base + kQOffset), k_desc = descriptor_base(base + kKOffset);
  const uint32_t v_desc = descriptor_base(base + kVOffset, kBoxBytes);
  // S = Q K^T of ring block n: 3 boxes x 4 k16 steps, committed as one group.
  auto issue_scores = [&](int n) {
    const int stage = n & 1;
    mbarrier_wait(barrier(kKFull + stage), (n >> 1) & 1);
    __syncwarp();
    fence_registers(s);
    wgmma_fence();
#pragma unroll
    for (int box = 0; box < kQkBoxes; ++box)
#pragma unroll
      for (int kk = 0; kk < kBox / 16; ++kk) {
        const uint64_t a = descriptor_at(q_desc, box * kBoxBytes + wg * 64 * kRowBytes + 32 * kk);
        const uint64_t bd = descriptor_at(k_desc, stage * kKBytes + box * kBoxBytes + 32 * kk);
        wgmma_m64n128k16_ss(s, a, bd, (box | kk) != 0);
      }
    wgmma_commit();
  };
  // O = O * correction + P V of ring block n (P in pa), committed as one group.
  auto issue_values = [&](int n) {
    const int stage = n & 1;
    if (__any_sync(0xffffffffu, correction[0] != 1.f || correction[1] != 1.f)) {
#pragma unroll
      for (int j = 0; j < kValue / 8; ++j) {
        o[4 * j] *= correction[0];
        o[4 * j + 1] *= correction[0];
        o[4 * j + 2] *= correction[1];
        o[4 * j + 3] *= correction[1];
      }
    }
    mbarrier_wait(barrier(kVFull + stage), (n >> 1) & 1);
    __syncwarp();
    fence_registers(o);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockK / 16; ++kk)
      wgmma_m64n128k16_rs(o, pa[kk], descriptor_at(v_desc, stage * kVBytes + kk * 16 * kRowBytes));
    wgmma_commit();
  };
  // The online softmax of block b's scores, in place: s becomes P (f32), the running max and sums move,
  // and `correction` is O's rescale for this block.
  auto softmax = [&](int b) {
    const int key0 = b * kBlockK;
    float block_max[2] = {-INFINITY, -INFINITY};
    if (key0 + kBlockK - 1 > block_min_position) {  // (uniform) the block crosses some query's position
#pragma unroll
      for (int j = 0; j < kBlockK / 8; ++j)
#pragma unroll
        for (int half = 0; half < 2; ++half)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& value = s[4 * j + 2 * half + e];
            if (key0 + 8 * j + 2 * c + e > row_position[half]) value = -INFINITY;
            block_max[half] = fmaxf(block_max[half], value);
          }
    } else {  // no mask: the compare and select per score only where a block needs them
#pragma unroll
      for (int i = 0; i < 64; ++i) block_max[(i / 2) % 2] = fmaxf(block_max[(i / 2) % 2], s[i]);
    }
    float base_max[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      block_max[half] = fmaxf(block_max[half], __shfl_xor_sync(0xffffffffu, block_max[half], 1));
      block_max[half] = fmaxf(block_max[half], __shfl_xor_sync(0xffffffffu, block_max[half], 2));
      block_max[half] *= p.scale_log2;  // log2 units (the scale is positive: the max of the scaled scores)
      const float new_max = fmaxf(running_max[half], block_max[half]);
      base_max[half] = new_max == -INFINITY ? 0.f : new_max;  // an all-masked row: no (-inf) - (-inf)
      correction[half] = fast_exp2(running_max[half] - base_max[half]);
      running_max[half] = new_max;
      partial_sum[half] *= correction[half];
    }
    // p = 2^(scale s - max): one FFMA and one MUFU a score.
#pragma unroll
    for (int j = 0; j < kBlockK / 8; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& value = s[4 * j + 2 * half + e];
          value = fast_exp2(fmaf(value, p.scale_log2, -base_max[half]));
          partial_sum[half] += value;
        }
  };
  // P (s) as the A operand of P V: k16 step kk = keys 16 kk ..: a0 / a1 keys 2c, 2c + 1 of rows
  // g / g + 8, a2 / a3 keys 8 + 2c, 9 + 2c.
  auto pack = [&]() {
#pragma unroll
    for (int j = 0; j < kBlockK / 8; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half)
        pa[j / 2][(j & 1) * 2 + half] = pack_bf16(s[4 * j + 2 * half], s[4 * j + 2 * half + 1]);
  };
  auto release = [&](int barrier_index) {  // this warp is done with what the barrier guards
    __syncwarp();
    if (lane == 0) mbarrier_arrive(barrier(barrier_index));
  };

  // The turns run on across the heads: warpgroup 0 goes first, and each warpgroup issues exactly as
  // often as the other, so neither can arrive twice on the other's barrier before it was taken.
  if (num_blocks > 0 && wg == 1) named_barrier_arrive(kTurn + 0, kConsumerThreads);
  for (int hi = 0; hi < block_heads && num_blocks > 0; ++hi) {
    const int h = head0 + hi, n0 = hi * num_blocks;
    mbarrier_wait(barrier(kQFull), hi & 1);
    __syncwarp();
    named_barrier_sync(kTurn + wg, kConsumerThreads);
    issue_scores(n0);
    named_barrier_arrive(kTurn + (wg ^ 1), kConsumerThreads);
    wgmma_wait<0>();
    fence_registers(s);
    release(kKFree + (n0 & 1));
    if (num_blocks == 1) release(kQFree);
    softmax(0);
    pack();
    for (int b = 1; b < num_blocks; ++b) {
      // This block's scores and the previous block's P V, back to back, then the other's turn.
      named_barrier_sync(kTurn + wg, kConsumerThreads);
      issue_scores(n0 + b);
      issue_values(n0 + b - 1);
      named_barrier_arrive(kTurn + (wg ^ 1), kConsumerThreads);
      wgmma_wait<1>();  // the scores
      fence_registers(s);
      release(kKFree + ((n0 + b) & 1));
      if (b == num_blocks - 1) release(kQFree);  // the head's last scores: Q may take the next head
      softmax(b);
      wgmma_wait<0>();  // the previous P V: pa may be overwritten, its V stage released
      fence_registers(o);
      release(kVFree + ((n0 + b - 1) & 1));
      pack();
    }
    issue_values(n0 + num_blocks - 1);
    wgmma_wait<0>();
    fence_registers(o);
    release(kVFree + ((n0 + num_blocks - 1) & 1));

#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float sum = partial_sum[half];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int row = begin + row_in_tile + 8 * half;
      if (row >= end) continue;
      const float inverse = sum > 0.f ? 1.f / sum : 0.f;  // nothing visible (bad position): zeros
      bf16* out = p.out + (static_cast<size_t>(row) * p.heads + h) * kValue + 2 * c;
#pragma unroll
      for (int j = 0; j < kValue / 8; ++j)
        *reinterpret_cast<__nv_bfloat162*>(out + 8 * j) =
            __floats2bfloat162_rn(o[4 * j + 2 * half] * inverse, o[4 * j + 2 * half + 1] * inverse);
    }
    // The next head starts afresh.
    zero_registers(o);
    running_max[0] = running_max[1] = -INFINITY;
    partial_sum[0] = partial_sum[1] = 0.f;
    correction[0] = correction[1] = 1.f;
  }
  // Warpgroup 1's last arrive on warpgroup 0's turn has no step after it: consume it.
  if (num_blocks > 0 && wg == 0) named_barrier_sync(kTurn + 0, kConsumerThreads);
  if (num_blocks <= 0) {  // nothing visible (only a bad position gets here): zeros
    for (int hi = 0; hi < block_heads; ++hi)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = begin + row_in_tile + 8 * half;
        if (row >= end) continue;
        bf16* out = p.out + (static_cast<size_t>(row) * p.heads + head0 + hi) * kValue + 2 * c;
#pragma unroll
        for (int j = 0; j < kValue / 8; ++j)
          *reinterpret_cast<__nv_bfloat162*>(out + 8 * j) = __floats2bfloat162_rn(0.f, 0.f);
      }
  }
}

bool aligned16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

}  // namespace

bool prefill_attention_wgmma_supported(const PrefillAttentionArgs& args) {
  return prefill_attention_fast_widths(args.nope_dim, args.rope_dim, args.value_dim) && args.kv_rows > 0 &&
         aligned16(args.q) && aligned16(args.kv) && aligned16(args.k_rope);
}

void launch_prefill_attention_wgmma(const PrefillAttentionArgs& args, cudaStream_t stream) {
  DSINFER_CHECK(prefill_attention_wgmma_supported(args), "prefill_attention (wgmma): needs DeepSeek's widths, ",
                "kv_rows and 16-byte aligned q, kv and k_rope");
  const uint64_t heads = static_cast<uint64_t>(args.heads);
  const CUtensorMap q_map = make_swizzled_3d_map(
      args.q, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, {uint64_t{kQk}, heads, static_cast<uint64_t>(args.tokens)},
      {uint64_t{kQk} * 2, heads * kQk * 2}, {uint32_t{kBox}, 1u, uint32_t{kBlockQ}}, "q");
  const CUtensorMap kv_map = make_swizzled_3d_map(
      args.kv, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, {uint64_t{kKvRow}, heads, static_cast<uint64_t>(args.kv_rows)},
      {uint64_t{kKvRow} * 2, heads * kKvRow * 2}, {uint32_t{kBox}, 1u, uint32_t{kBlockK}}, "kv");
  const CUtensorMap rope_map =
      make_swizzled_2d_map(args.k_rope, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, kRope, static_cast<uint64_t>(args.kv_rows),
                           uint64_t{kRope} * 2, kBox, kBlockK, "k_rope");
  Params p{};
  p.query_start = args.query_start;
  p.kv_start = args.kv_start;
  p.positions = args.positions;
  p.out = args.out;
  p.heads = args.heads;
  // Heads a block walks in turn (the next head's loads overlap this one's end), as many as leave two
  // blocks an SM: query tiles x ceil(heads / heads_per_block) >= 2 x SMs.
  int device = 0, sms = 0;
  DSINFER_CUDA_CHECK(cudaGetDevice(&device));
  DSINFER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t query_tiles = (int64_t{args.tokens} + kBlockQ - 1) / kBlockQ + args.num_sequences;
  p.heads_per_block = 1;
  for (int per : {4, 2})
    if (query_tiles * ((args.heads + per - 1) / per) >= 2 * int64_t{sms}) {
      p.heads_per_block = per;
      break;
    }
  p.num_sequences = args.num_sequences;
  p.scale_log2 = args.scale * 1.4426950408889634f;
  // A function attribute, not a stream operation: legal (and cheap) during graph capture.
  DSINFER_CUDA_CHECK(
      cudaFuncSetAttribute(prefill_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  const dim3 grid(static_cast<unsigned>(query_tiles),
                  static_cast<unsigned>((args.heads + p.heads_per_block - 1) / p.heads_per_block));
  prefill_wgmma_kernel<<<grid, kThreads, kSmemBytes, stream>>>(q_map, kv_map, rope_map, p);
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
