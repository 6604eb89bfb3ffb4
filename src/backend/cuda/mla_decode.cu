// Absorbed MLA decode attention over the paged latent cache (see mla_decode.h for the contract).
//
// Shapes: q [T, H, 576] bf16, cache [pages, 64, 576] bf16, out [T, H, 512] bf16; per token a
// sequence index and a position; per sequence a CSR page table. kv_len(t) = positions[t] + 1.
//
// Roofline per token: bytes = kv_len * 576 * 2 (cache rows, read once per head group) + H * 576 * 2
// (q) + H * 512 * 2 (out); FLOPs = 2 * H * kv_len * (576 + 512). At H = 128 that is ~240 FLOP per
// cache byte: compute-bound on CUDA cores, near the ridge with tensor cores, hence kTensorCore.
//
// Launch configuration:
//   kSimple:     grid (ceil(H / 8), splits, T), 256 threads; warp w owns head 8 * blockIdx.x + w and
//                walks its chunk's rows one by one (online softmax, 18 q dims and 16 output dims a lane).
//   kTensorCore: grid (ceil(H / HB), splits, T) with HB = 64, 32 or 16 heads a block (by H), 8, 8 or 4
//                warps, ~160, ~117 or ~96 KB dynamic shared memory; tiles of 32 cache rows (half a
//                page) double-buffered with cp.async. Per tile: S = Q K^T (warp (mt, part) scores
//                heads 16 mt.. of keys part * 32 / D ..), S through shared memory, then every warp
//                runs the same online softmax for its 16 heads and accumulates P V for its 512 / D
//                output dims (D = warps per head tile).
//   kWgmma:      mla_decode_wgmma.cu (Hopper wgmma + TMA; grid (ceil(H / 64), splits, T), 256 threads;
//                fewer than 64 heads pad the MMA rows). Same chunks, scratch and combine.
//   FP8 cache:   mla_decode_fp8.cu (FP8 wgmma for Q K^T and P V; grid and block as kWgmma). Same
//                chunks, scratch and combine.
//   combine:     grid (H, T), 128 threads, 4 output dims a thread; only when splits > 1. Thread s
//                reads chunk s's stats, block reductions give the max and denominator, then each
//                thread sums its float4 of every chunk with 8 coalesced 16-byte loads in flight.
//                Bytes: splits * H * (512 * 4 + 8) read per token, H * 512 * 2 written.
//                Launched programmatically (pdl.cuh), as the WGMMA kernel before it is: each starts
//                while the kernel before drains and waits for it before its first read and write.
//   splits:      min(one wave of the production kernel's blocks (kWgmma: ceil(H / 64) blocks a token
//                and chunk, one a SM), 128); each token uses ceil(its pages / chunk pages) of them,
//                chunks of at least min_split_pages pages (mla_split_rows); see mla_decode_num_splits.
//   generic:     any other widths (L, R): grid (ceil(H / 8), T), 256 threads; warp w owns head
//                8 * blockIdx.x + w of token blockIdx.y and walks all its visible rows (no split);
//                lane l holds q dims l + 32 i (i < 32) and output dims l + 32 i < L in registers.
//                Same roofline as above with 576 / 512 replaced by L + R / L; CUDA cores only. Over
//                an FP8 cache (any widths) it reads e4m3 values and dequantizes each: the reference.
//
// Scratch (splits > 1): partial_out float [T, splits, H, 512] then partial_stats float2 [T, splits, H]
// (running max in log2 units, sum of exponentials). An empty chunk writes stats (-inf, 0) only.
#include "backend/cuda/mla_decode.h"

#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/mla_decode_fp8.h"
#include "backend/cuda/mla_decode_internal.cuh"
#include "backend/cuda/mla_decode_wgmma.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/vector.cuh"
#include "core/error.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kLatent = kMlaLatentDim;
constexpr int kWidth = kMlaCacheWidth;
constexpr int kPage = kMlaPageSize;
constexpr int kChunks16 = kWidth * 2 / 16;  // 16-byte pieces of a cache or q row: 72
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kWidth % 16 == 0 && kLatent % 64 == 0, "MLA widths must tile by the mma shapes");

// The kernel parameters and the split arithmetic live in mla_decode_internal.cuh (shared with
// mla_decode_wgmma.cu).
using Params = MlaDecodeParams;

// ---------------------------------------------------------------------------------------------
// kSimple: one warp per (token, head, chunk). Lane l holds q dims {2i, 2i+1 : i = l + 32k, k < 9}
// and accumulates output dims {2i, 2i+1 : i = l + 32k, k < 8} (the first 512 of the same pairs).

constexpr int kSimpleWarps = 8;
constexpr int kSimplePairs = kWidth / 64;   // 9 bf16 pairs of q/key a lane
constexpr int kSimpleOutPairs = kLatent / 64;  // 8 bf16 pairs of output a lane

__global__ void __launch_bounds__(kSimpleWarps * 32) mla_decode_simple_kernel(Params p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int head = blockIdx.x * kSimpleWarps + warp;
  const int split = blockIdx.y, t = blockIdx.z;
  if (head >= p.heads) return;  // no block-wide barriers in this kernel

  const int sequence = p.token_sequence[t];
  const MlaRowRange rows = mla_split_rows(mla_visible_rows(p, t, sequence), split, p.num_splits, p.min_split_pages);
  if (rows.empty()) {
    mla_finish_empty(p, t, split, head, lane);
    return;
  }
  const __nv_bfloat162* q_row =
      reinterpret_cast<const __nv_bfloat162*>(p.q + (static_cast<size_t>(t) * p.heads + head) * kWidth);
  float2 q[kSimplePairs];
#pragma unroll
  for (int k = 0; k < kSimplePairs; ++k) q[k] = __bfloat1622float2(q_row[lane + 32 * k]);

  const int32_t* pages = p.page_ids + p.page_table_start[sequence];
  float2 acc[kSimpleOutPairs];
#pragma unroll
  for (int k = 0; k < kSimpleOutPairs; ++k) acc[k] = make_float2(0.f, 0.f);
  float running_max = -INFINITY, running_sum = 0.f;

  for (int j = rows.begin; j < rows.end; ++j) {
    const size_t slot = static_cast<size_t>(pages[j / kPage]) * kPage + j % kPage;
    const __nv_bfloat162* row = reinterpret_cast<const __nv_bfloat162*>(p.cache + slot * kWidth);
    float2 key[kSimplePairs];
    float dot = 0.f;
#pragma unroll
    for (int k = 0; k < kSimplePairs; ++k) {
      key[k] = __bfloat1622float2(row[lane + 32 * k]);
      dot = fmaf(q[k].x, key[k].x, fmaf(q[k].y, key[k].y, dot));
    }
    const auto [correction, weight] = online_softmax_step(dot, p.scale_log2, running_max, running_sum);
#pragma unroll
    for (int k = 0; k < kSimpleOutPairs; ++k) {
      acc[k].x = fmaf(weight, key[k].x, acc[k].x * correction);
      acc[k].y = fmaf(weight, key[k].y, acc[k].y * correction);
    }
  }

  const size_t out_row = static_cast<size_t>(t) * p.heads + head;
  if (p.num_splits == 1) {
    const float inverse = 1.f / running_sum;  // >= 1: the max row contributes exp2(0)
    __nv_bfloat162* out = reinterpret_cast<__nv_bfloat162*>(p.out + out_row * kLatent);
#pragma unroll
    for (int k = 0; k < kSimpleOutPairs; ++k)
      out[lane + 32 * k] = __floats2bfloat162_rn(acc[k].x * inverse, acc[k].y * inverse);
  } else {
    const size_t index = mla_partial_index(t, split, head, p);
    float2* out = reinterpret_cast<float2*>(p.partial_out + index * kLatent);
#pragma unroll
    for (int k = 0; k < kSimpleOutPairs; ++k) out[lane + 32 * k] = acc[k];
    if (lane == 0) p.partial_stats[index] = make_float2(running_max, running_sum);
  }
}

// ---------------------------------------------------------------------------------------------
// kTensorCore.

constexpr int kTileKeys = 32;              // cache rows per tile: half a page, so a tile never spans pages
constexpr int kRowStride = kWidth + 8;     // bf16 per shared row: 1168 B, an odd multiple of 16 B, so the
                                           // 8 row addresses of an ldmatrix hit 8 different bank groups
static_assert(kPage % kTileKeys == 0, "a tile must not cross a page");

template <int kMTiles, int kDimSplits>
struct TcShape {
  static constexpr int kWarps = kMTiles * kDimSplits;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kHeads = 16 * kMTiles;                   // heads of a block (M)
  static constexpr int kKeysPerWarp = kTileKeys / kDimSplits;   // QK^T: keys of the tile a warp scores
  static constexpr int kKeyTilesPerWarp = kKeysPerWarp / 8;
  static constexpr int kDimsPerWarp = kLatent / kDimSplits;     // P V: output dims a warp owns
  static constexpr int kDimTilesPerWarp = kDimsPerWarp / 8;
  static constexpr int kScoreStride = kTileKeys + 8;            // floats; conflict-free float2 rows
  static constexpr size_t kQBytes = size_t{kHeads} * kRowStride * sizeof(bf16);
  static constexpr size_t kTileBytes = size_t{kTileKeys} * kRowStride * sizeof(bf16);
  static constexpr size_t kScoreBytes = size_t{kHeads} * kScoreStride * sizeof(float);
  static constexpr size_t kSmemBytes = kQBytes + 2 * kTileBytes + kScoreBytes;
  static_assert(kKeysPerWarp % 8 == 0 && kDimsPerWarp % 16 == 0, "warp tiles must be whole mma tiles");
  static_assert(kQBytes % 16 == 0 && kTileBytes % 16 == 0, "shared buffers must stay 16-byte aligned");
};

template <int kMTiles, int kDimSplits>
__global__ void __launch_bounds__(kMTiles * kDimSplits * 32, 1) mla_decode_tc_kernel(Params p) {
  using Shape = TcShape<kMTiles, kDimSplits>;
  extern __shared__ __align__(16) unsigned char shared[];
  bf16* q_tile = reinterpret_cast<bf16*>(shared);                         // [kHeads][kRowStride]
  bf16* kv_tiles = reinterpret_cast<bf16*>(shared + Shape::kQBytes);      // [2][kTileKeys][kRowStride]
  float* scores = reinterpret_cast<float*>(shared + Shape::kQBytes + 2 * Shape::kTileBytes);  // [kHeads][kScoreStride]

  const int head0 = blockIdx.x * Shape::kHeads, split = blockIdx.y, t = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, c = lane % 4;
  const int m_tile = warp / kDimSplits, part = warp % kDimSplits;

  const int sequence = p.token_sequence[t];
  const MlaRowRange rows = mla_split_rows(mla_visible_rows(p, t, sequence), split, p.num_splits, p.min_split_pages);
  if (rows.empty()) {  // uniform over the block: nobody reaches a barrier
    for (int h = warp; h < Shape::kHeads && head0 + h < p.heads; h += Shape::kWarps)
      mla_finish_empty(p, t, split, head0 + h, lane);
    return;
  }

  // q rows of this head group; heads past H are zero, so their scores are 0 and nothing is NaN.
  for (int i = threadIdx.x; i < Shape::kHeads * kChunks16; i += Shape::kThreads) {
    const int r = i / kChunks16, piece = i % kChunks16, head = head0 + r;
    const bool valid = head < p.heads;
    const bf16* source = p.q + (static_cast<size_t>(t) * p.heads + (valid ? head : 0)) * kWidth + piece * 8;
    cp_async_16(q_tile + r * kRowStride + piece * 8, source, valid);
  }
  // A tile of 32 rows lies in one page (tiles start at multiples of 32). Rows past the chunk's end
  // (past the context: stale or never written) are zero-filled, so 0-weight x garbage cannot be NaN.
  const int32_t* pages = p.page_ids + p.page_table_start[sequence];
  auto load_tile = [&](int tile, int stage) {
    const int row0 = rows.begin + tile * kTileKeys;
    const bf16* source_rows = p.cache + (static_cast<size_t>(pages[row0 / kPage]) * kPage + row0 % kPage) * kWidth;
    bf16* target = kv_tiles + stage * kTileKeys * kRowStride;
    for (int i = threadIdx.x; i < kTileKeys * kChunks16; i += Shape::kThreads) {
      const int r = i / kChunks16, piece = i % kChunks16;
      cp_async_16(target + r * kRowStride + piece * 8, source_rows + r * kWidth + piece * 8, row0 + r < rows.end);
    }
  };
  load_tile(0, 0);
  cp_async_commit();

  float acc[Shape::kDimTilesPerWarp][4];  // rows g, g + 8 of m_tile; dims part * kDimsPerWarp + 8 j + 2c
#pragma unroll
  for (int j = 0; j < Shape::kDimTilesPerWarp; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
  float running_max[2] = {-INFINITY, -INFINITY};  // rows g, g + 8; identical in every warp of the m-tile
  float partial_sum[2] = {0.f, 0.f};              // this lane's columns only; quad-reduced at the end

  const int num_tiles = (rows.end - rows.begin + kTileKeys - 1) / kTileKeys;
  const bf16* q_warp = q_tile + m_tile * 16 * kRowStride;
  float* score_rows = scores + m_tile * 16 * Shape::kScoreStride;

  for (int tile = 0; tile < num_tiles; ++tile) {
    // After this barrier the tile is visible to all, and every warp has finished the previous tile,
    // so the other stage and the score buffer may be overwritten.
    cp_async_wait_all();
    __syncthreads();
    if (tile + 1 < num_tiles) {
      load_tile(tile + 1, (tile + 1) & 1);
      cp_async_commit();
    }
    const bf16* kv = kv_tiles + (tile & 1) * kTileKeys * kRowStride;
    const int row0 = rows.begin + tile * kTileKeys;

    // S[16 heads, kKeysPerWarp keys] = Q K^T over all 576 dims.
    float s[Shape::kKeyTilesPerWarp][4];
#pragma unroll
    for (int j = 0; j < Shape::kKeyTilesPerWarp; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
    const int key0 = part * Shape::kKeysPerWarp;
#pragma unroll 4
    for (int k0 = 0; k0 < kWidth; k0 += 16) {
      uint32_t a[4];
      ldmatrix_x4(a, q_warp + (lane & 15) * kRowStride + k0 + (lane >> 4) * 8);
#pragma unroll
      for (int j = 0; j < Shape::kKeyTilesPerWarp; ++j) {
        uint32_t b[2];
        ldmatrix_x2(b, kv + (key0 + 8 * j + (lane & 7)) * kRowStride + k0 + ((lane >> 3) & 1) * 8);
        mma_bf16(s[j], a, b[0], b[1]);
      }
    }
#pragma unroll
    for (int j = 0; j < Shape::kKeyTilesPerWarp; ++j) {
      const int key = key0 + 8 * j + 2 * c;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float2 value;
        value.x = row0 + key < rows.end ? s[j][2 * half] * p.scale_log2 : -INFINITY;
        value.y = row0 + key + 1 < rows.end ? s[j][2 * half + 1] * p.scale_log2 : -INFINITY;
        *reinterpret_cast<float2*>(score_rows + (g + 8 * half) * Shape::kScoreStride + key) = value;
      }
    }
    __syncthreads();

    // Online softmax over the tile's 32 keys for rows g, g + 8: sv[k][half][hi] holds keys
    // 16 k + 8 hi + 2c, +1 of row g + 8 half (the A-fragment order of P).
    float2 sv[kTileKeys / 16][2][2];
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int k = 0; k < kTileKeys / 16; ++k)
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          sv[k][half][hi] = *reinterpret_cast<const float2*>(score_rows + (g + 8 * half) * Shape::kScoreStride +
                                                              16 * k + 8 * hi + 2 * c);
          tile_max[half] = fmaxf(tile_max[half], fmaxf(sv[k][half][hi].x, sv[k][half][hi].y));
        }
    float correction[2], base[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(0xffffffffu, tile_max[half], 1));
      tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(0xffffffffu, tile_max[half], 2));
      const float new_max = fmaxf(running_max[half], tile_max[half]);
      base[half] = new_max == -INFINITY ? 0.f : new_max;  // an all-masked row must not give (-inf) - (-inf)
      correction[half] = exp2f(running_max[half] - base[half]);
      running_max[half] = new_max;
    }
    partial_sum[0] *= correction[0];
    partial_sum[1] *= correction[1];
    uint32_t pa[kTileKeys / 16][4];
#pragma unroll
    for (int k = 0; k < kTileKeys / 16; ++k) {
      float2 w[2][2];
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          w[half][hi].x = exp2f(sv[k][half][hi].x - base[half]);
          w[half][hi].y = exp2f(sv[k][half][hi].y - base[half]);
        }
      pa[k][0] = pack_bf16(w[0][0].x, w[0][0].y);
      pa[k][1] = pack_bf16(w[1][0].x, w[1][0].y);
      pa[k][2] = pack_bf16(w[0][1].x, w[0][1].y);
      pa[k][3] = pack_bf16(w[1][1].x, w[1][1].y);
      partial_sum[0] += w[0][0].x + w[0][0].y + w[0][1].x + w[0][1].y;
      partial_sum[1] += w[1][0].x + w[1][0].y + w[1][1].x + w[1][1].y;
    }
#pragma unroll
    for (int j = 0; j < Shape::kDimTilesPerWarp; ++j) {
      acc[j][0] *= correction[0];
      acc[j][1] *= correction[0];
      acc[j][2] *= correction[1];
      acc[j][3] *= correction[1];
    }

    // O[16 heads, kDimsPerWarp] += P[16, 32] V[32, kDimsPerWarp]; V = the first 512 of each row.
    const int dim0 = part * Shape::kDimsPerWarp;
#pragma unroll
    for (int k = 0; k < kTileKeys / 16; ++k) {
      const bf16* v_rows = kv + (16 * k + (lane & 7) + ((lane >> 3) & 1) * 8) * kRowStride + dim0 + (lane >> 4) * 8;
#pragma unroll
      for (int j = 0; j < Shape::kDimTilesPerWarp; j += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, v_rows + 8 * j);
        mma_bf16(acc[j], pa[k], b[0], b[1]);
        mma_bf16(acc[j + 1], pa[k], b[2], b[3]);
      }
    }
  }

  // Sum each row's exponentials over the quad (the 4 lanes holding its columns).
  float sum[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    sum[half] = partial_sum[half];
    sum[half] += __shfl_xor_sync(0xffffffffu, sum[half], 1);
    sum[half] += __shfl_xor_sync(0xffffffffu, sum[half], 2);
  }
  const int dim0 = part * Shape::kDimsPerWarp;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int head = head0 + m_tile * 16 + g + 8 * half;
    if (head >= p.heads) continue;
    if (p.num_splits == 1) {
      const float inverse = sum[half] > 0.f ? 1.f / sum[half] : 0.f;
      bf16* out = p.out + (static_cast<size_t>(t) * p.heads + head) * kLatent + dim0 + 2 * c;
#pragma unroll
      for (int j = 0; j < Shape::kDimTilesPerWarp; ++j)
        *reinterpret_cast<__nv_bfloat162*>(out + 8 * j) =
            __floats2bfloat162_rn(acc[j][2 * half] * inverse, acc[j][2 * half + 1] * inverse);
    } else {
      const size_t index = mla_partial_index(t, split, head, p);
      float* out = p.partial_out + index * kLatent + dim0 + 2 * c;
#pragma unroll
      for (int j = 0; j < Shape::kDimTilesPerWarp; ++j)
        *reinterpret_cast<float2*>(out + 8 * j) = make_float2(acc[j][2 * half], acc[j][2 * half + 1]);
      if (part == 0 && c == 0) p.partial_stats[index] = make_float2(running_max[half], sum[half]);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Merge of the chunks: out = sum_s 2^(m_s - M) o_s / sum_s 2^(m_s - M) l_s over non-empty chunks.

constexpr int kCombineThreads = kLatent / 4;  // 128: one float4 of the 512 output dims a thread
constexpr int kCombineWarps = kCombineThreads / 32;
constexpr int kCombineUnroll = 8;  // partial loads in flight per thread (latency, not bandwidth, bounds it)
static_assert(kMlaDecodeMaxSplits <= kCombineThreads, "the combine reads one chunk's stats a thread");

// Block-wide max or sum over the 128 threads (all threads call it; returns the result to all).
template <bool kMax>
__device__ float combine_block_reduce(float value, float* scratch /* [kCombineWarps] */) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = kMax ? fmaxf(value, other) : value + other;
  }
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) scratch[warp] = value;
  __syncthreads();
  float result = scratch[0];
#pragma unroll
  for (int w = 1; w < kCombineWarps; ++w) result = kMax ? fmaxf(result, scratch[w]) : result + scratch[w];
  __syncthreads();  // scratch is reused by the next call
  return result;
}

// One block per (head, token). Thread s < splits first reads chunk s's stats (one parallel load
// instead of every thread walking them twice), the block reduces the max and the denominator and
// leaves the chunk weights in shared memory; then thread i sums the float4 at dims 4i.. of every
// chunk's partial, kCombineUnroll independent 16-byte loads at a time (a warp reads 512 contiguous
// bytes of one chunk: coalesced). An empty chunk (stats.y == 0) has weight 0 and its partial, never
// written, is not read (it may hold NaN from earlier use of the scratch).
__global__ void __launch_bounds__(kCombineThreads) mla_decode_combine_kernel(Params p) {
  __shared__ float weights[kMlaDecodeMaxSplits];
  __shared__ float reduce_scratch[kCombineWarps];
  wait_for_previous_kernel();  // launched programmatically: the partials are the kernel before's
  allow_dependent_launch();    // the value up-projection after it (gemv.h)
  const int head = blockIdx.x, t = blockIdx.y, dim = threadIdx.x * 4;
  const size_t first = mla_partial_index(t, 0, head, p);
  const size_t stride = p.heads;  // between consecutive splits of one (token, head)
  const int splits = p.num_splits;

  float2 stats = make_float2(-INFINITY, 0.f);
  if (static_cast<int>(threadIdx.x) < splits) stats = p.partial_stats[first + threadIdx.x * stride];
  const bool live = stats.y > 0.f;
  const float global_max = combine_block_reduce<true>(live ? stats.x : -INFINITY, reduce_scratch);
  // global_max is finite whenever some chunk is live; with none, every weight is 0 (no inf - inf).
  const float weight = live ? exp2f(stats.x - global_max) : 0.f;
  if (static_cast<int>(threadIdx.x) < splits) weights[threadIdx.x] = weight;
  const float denominator = combine_block_reduce<false>(weight * stats.y, reduce_scratch);  // syncs weights too

  // Chunks past the token's context are empty and come last (mla_split_rows is monotone), so only
  // chunks 0..live_end-1 are read. Inside that range the loads are unconditional (so all
  // kCombineUnroll are in flight at once) and a weight-0 chunk's value is discarded by a select,
  // never multiplied (it may be NaN); indices past live_end are clamped to live_end - 1.
  const int live_end =
      static_cast<int>(combine_block_reduce<true>(live ? static_cast<float>(threadIdx.x + 1) : 0.f, reduce_scratch));
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  const float* base = p.partial_out + first * kLatent + dim;
  for (int s0 = 0; s0 < live_end; s0 += kCombineUnroll) {
    float4 part[kCombineUnroll];
#pragma unroll
    for (int u = 0; u < kCombineUnroll; ++u) {
      const int s = min(s0 + u, live_end - 1);
      part[u] = *reinterpret_cast<const float4*>(base + s * stride * kLatent);
    }
#pragma unroll
    for (int u = 0; u < kCombineUnroll; ++u) {
      const int s = s0 + u;
      const float w = s < live_end ? weights[s] : 0.f;
      if (w > 0.f) {
        acc.x = fmaf(w, part[u].x, acc.x);
        acc.y = fmaf(w, part[u].y, acc.y);
        acc.z = fmaf(w, part[u].z, acc.z);
        acc.w = fmaf(w, part[u].w, acc.w);
      }
    }
  }
  const float inverse = denominator > 0.f ? 1.f / denominator : 0.f;
  __nv_bfloat162* out =
      reinterpret_cast<__nv_bfloat162*>(p.out + (static_cast<size_t>(t) * p.heads + head) * kLatent + dim);
  out[0] = __floats2bfloat162_rn(acc.x * inverse, acc.y * inverse);
  out[1] = __floats2bfloat162_rn(acc.z * inverse, acc.w * inverse);
}

// ---------------------------------------------------------------------------------------------
// Generic widths: one warp per (token, head), CUDA cores, runtime L and R, no split. Lane l owns
// dims l + 32 i (i < kGenericDimsPerLane) of q (those < L + R) and of the output (those < L); the
// loops are unrolled so both arrays stay in registers. Rows are read one bf16 a lane (2-byte
// alignment only), so any widths and page sizes work. The reference for the widths the fast kernels
// do not cover (the small test models), so plainness over speed.

constexpr int kGenericWarps = 8;
constexpr int kGenericDimsPerLane = kMlaGenericMaxWidth / 32;

struct GenericParams {
  const bf16* q;       // [T, H, L + R]
  const bf16* cache;   // [pages, page_size, L + R] bf16, or null and:
  const uint8_t* cache_fp8;  // [pages, page_size, L + R] e4m3 (times kFp8CacheScale)
  const int32_t* token_sequence;
  const int32_t* positions;
  const int32_t* page_table_start;
  const int32_t* page_ids;
  bf16* out;           // [T, H, L]
  int heads;
  int latent_dim;      // L
  int width;           // L + R: q and cache rows
  int page_size;
  float scale_log2;
};

// A cache value as a float: bf16, or e4m3 times the cache's scale.
__device__ __forceinline__ float cache_value(const bf16* row, int d) { return __bfloat162float(row[d]); }
__device__ __forceinline__ float cache_value(const uint8_t* row, int d) {
  return static_cast<float>(__half(__nv_cvt_fp8_to_halfraw(row[d], __NV_E4M3))) * kFp8CacheScale;
}

template <typename CacheT>
__global__ void __launch_bounds__(kGenericWarps * 32) mla_decode_generic_kernel(GenericParams p, const CacheT* cache) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int head = blockIdx.x * kGenericWarps + warp, t = blockIdx.y;
  if (head >= p.heads) return;  // no block-wide barriers in this kernel

  const int sequence = p.token_sequence[t];
  const int first_page = p.page_table_start[sequence];
  const int64_t table_rows = int64_t{p.page_table_start[sequence + 1] - first_page} * p.page_size;
  // Rows 0..position, never past the sequence's page table; a negative position sees nothing.
  const int visible = static_cast<int>(min(int64_t{p.positions[t]} + 1, table_rows));

  const bf16* q_row = p.q + (static_cast<size_t>(t) * p.heads + head) * p.width;
  float q[kGenericDimsPerLane], acc[kGenericDimsPerLane];
#pragma unroll
  for (int i = 0; i < kGenericDimsPerLane; ++i) {
    const int d = lane + 32 * i;
    q[i] = d < p.width ? __bfloat162float(q_row[d]) : 0.f;
    acc[i] = 0.f;
  }
  float running_max = -INFINITY, running_sum = 0.f;
  for (int j = 0; j < visible; ++j) {
    const auto slot = static_cast<size_t>(cache_slot(p.page_ids + first_page, p.page_size, j));
    const CacheT* row = cache + slot * p.width;
    float dot = 0.f;
#pragma unroll
    for (int i = 0; i < kGenericDimsPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < p.width) dot = fmaf(q[i], cache_value(row, d), dot);
    }
    const auto [correction, weight] = online_softmax_step(dot, p.scale_log2, running_max, running_sum);
#pragma unroll
    for (int i = 0; i < kGenericDimsPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < p.latent_dim) acc[i] = fmaf(weight, cache_value(row, d), acc[i] * correction);
    }
  }

  const float inverse = running_sum > 0.f ? 1.f / running_sum : 0.f;  // no visible row: zeros
  bf16* out = p.out + (static_cast<size_t>(t) * p.heads + head) * p.latent_dim;
#pragma unroll
  for (int i = 0; i < kGenericDimsPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < p.latent_dim) out[d] = __float2bfloat16_rn(acc[i] * inverse);
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

// The tensor-core block shape for H heads: 64 heads (4 m-tiles x 2 dim halves, 8 warps) when H > 32,
// 32 heads (2 x 4, 8 warps) when H > 16, else 16 heads (1 x 4, 4 warps).
int tc_heads_per_block(int heads) {
  if (heads > 32) return 64;
  if (heads > 16) return 32;
  return 16;
}

size_t scratch_for(int tokens, int heads, int splits) {
  if (splits <= 1) return 0;
  const size_t rows = static_cast<size_t>(tokens) * splits * heads;
  return rows * kLatent * sizeof(float) + rows * sizeof(float2);
}

template <int kMTiles, int kDimSplits>
void launch_tc(const Params& p, int tokens, cudaStream_t stream) {
  using Shape = TcShape<kMTiles, kDimSplits>;
  auto kernel = mla_decode_tc_kernel<kMTiles, kDimSplits>;
  // A function attribute, not a stream operation: legal (and cheap) during graph capture.
  DSINFER_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Shape::kSmemBytes)));
  const dim3 grid((p.heads + Shape::kHeads - 1) / Shape::kHeads, p.num_splits, tokens);
  kernel<<<grid, Shape::kThreads, Shape::kSmemBytes, stream>>>(p);
  DSINFER_CUDA_CHECK_LAUNCH();
}

// Widths other than DeepSeek's (args already checked for tokens and null pointers).
void mla_decode_generic(const MlaDecodeArgs& args, cudaStream_t stream) {
  DSINFER_CHECK(args.latent_dim >= 1 && args.rope_dim >= 0 && args.latent_dim + args.rope_dim <= kMlaGenericMaxWidth,
                "mla_decode: latent width ", args.latent_dim, " and rope width ", args.rope_dim,
                " are not supported (need L >= 1, R >= 0, L + R <= ", kMlaGenericMaxWidth, ")");
  DSINFER_CHECK(args.page_size >= 1, "mla_decode: page size ", args.page_size, " must be positive");
  GenericParams p{};
  p.q = args.q;
  p.cache = args.cache;
  p.cache_fp8 = args.cache_fp8;
  p.token_sequence = args.token_sequence;
  p.positions = args.positions;
  p.page_table_start = args.page_table_start;
  p.page_ids = args.page_ids;
  p.out = args.out;
  p.heads = args.heads;
  p.latent_dim = args.latent_dim;
  p.width = args.latent_dim + args.rope_dim;
  p.page_size = args.page_size;
  p.scale_log2 = args.scale * kLog2e;
  const dim3 grid((args.heads + kGenericWarps - 1) / kGenericWarps, args.tokens);
  if (p.cache_fp8)
    mla_decode_generic_kernel<uint8_t><<<grid, kGenericWarps * 32, 0, stream>>>(p, p.cache_fp8);
  else
    mla_decode_generic_kernel<bf16><<<grid, kGenericWarps * 32, 0, stream>>>(p, p.cache);
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

int mla_decode_num_splits(int tokens, int heads, int sm_count) {
  DSINFER_CHECK(tokens >= 1 && heads >= 1 && sm_count >= 1, "mla_decode_num_splits: tokens (", tokens,
                "), heads (", heads, ") and sm_count (", sm_count, ") must be positive");
  // One wave of kWgmma's blocks (one per SM, 64 heads each, padded below 64 heads): the production
  // kernel's. kTensorCore takes the same count, so that every kernel cuts the same chunks.
  const int64_t groups = (heads + kMlaWgmmaHeads - 1) / kMlaWgmmaHeads;
  const int64_t resident = sm_count;
  const int64_t one_wave = std::max<int64_t>(1, resident / (int64_t{tokens} * groups));  // one wave, not two
  return static_cast<int>(std::min<int64_t>(one_wave, kMlaDecodeMaxSplits));
}

size_t mla_decode_scratch_bytes(int max_tokens, int heads, int sm_count, int latent_dim, int rope_dim) {
  if (!mla_decode_fast_widths(latent_dim, rope_dim)) return 0;  // the generic path never splits
  size_t bytes = 0;
  for (int tokens = 1; tokens <= max_tokens; ++tokens)
    bytes = std::max(bytes, scratch_for(tokens, heads, mla_decode_num_splits(tokens, heads, sm_count)));
  return bytes;
}

void mla_decode(const MlaDecodeArgs& args, MlaDecodeKernel kernel, cudaStream_t stream) {
  DSINFER_CHECK(args.tokens >= 0 && args.heads >= 1, "mla_decode: ", args.tokens, " tokens and ", args.heads,
                " heads (need tokens >= 0, heads >= 1)");
  if (args.tokens == 0) return;
  DSINFER_CHECK(args.tokens <= 65535, "mla_decode: ", args.tokens, " tokens exceed the grid limit of 65535");
  DSINFER_CHECK(args.q && (args.cache != nullptr) != (args.cache_fp8 != nullptr) && args.token_sequence &&
                    args.positions && args.page_table_start && args.page_ids && args.out,
                "mla_decode: a required device pointer is null (or both a bf16 and an FP8 cache are given)");
  // The FP8 cache's reference: the generic kernel, dequantizing, at any widths.
  if (!mla_decode_fast_widths(args.latent_dim, args.rope_dim) || (args.cache_fp8 && kernel == MlaDecodeKernel::kSimple)) {
    mla_decode_generic(args, stream);
    return;
  }
  DSINFER_CHECK(args.min_split_pages >= 1, "mla_decode: min_split_pages must be at least 1, got ",
                args.min_split_pages);
  DSINFER_CHECK(args.page_size == kPage, "mla_decode: the kernels for DeepSeek's widths are built for pages of ",
                kPage, " tokens, the cache has ", args.page_size);
  DSINFER_CHECK(aligned16(args.q) && aligned16(args.cache ? static_cast<const void*>(args.cache) : args.cache_fp8) &&
                    aligned16(args.out),
                "mla_decode: q, cache and out must be 16-byte aligned");
  const int splits = mla_decode_num_splits(args.tokens, args.heads, args.sm_count);
  const size_t needed = scratch_for(args.tokens, args.heads, splits);
  DSINFER_CHECK(args.scratch_bytes >= needed && (needed == 0 || (args.scratch && aligned16(args.scratch))),
                "mla_decode: ", args.tokens, " tokens x ", args.heads, " heads in ", splits, " splits need ", needed,
                " bytes of 16-byte aligned scratch, got ", args.scratch_bytes,
                " (size it with mla_decode_scratch_bytes)");

  Params p{};
  p.q = args.q;
  p.cache = args.cache;
  p.cache_fp8 = args.cache_fp8;
  p.token_sequence = args.token_sequence;
  p.positions = args.positions;
  p.page_table_start = args.page_table_start;
  p.page_ids = args.page_ids;
  p.out = args.out;
  const size_t partial_rows = static_cast<size_t>(args.tokens) * splits * args.heads;
  p.partial_out = splits > 1 ? static_cast<float*>(args.scratch) : nullptr;
  p.partial_stats =
      splits > 1 ? reinterpret_cast<float2*>(static_cast<char*>(args.scratch) + partial_rows * kLatent * sizeof(float))
                 : nullptr;
  p.heads = args.heads;
  p.num_splits = splits;
  p.min_split_pages = args.min_split_pages;
  p.scale_log2 = args.scale * kLog2e;

  if (p.cache_fp8) {
    launch_mla_decode_fp8(p, args.tokens, stream);
  } else if (kernel == MlaDecodeKernel::kSimple) {
    const dim3 grid((args.heads + kSimpleWarps - 1) / kSimpleWarps, splits, args.tokens);
    mla_decode_simple_kernel<<<grid, kSimpleWarps * 32, 0, stream>>>(p);
    DSINFER_CUDA_CHECK_LAUNCH();
  } else if (kernel == MlaDecodeKernel::kWgmma) {
    launch_mla_decode_wgmma(p, args.tokens, stream);
  } else {
    const int heads_per_block = tc_heads_per_block(args.heads);
    if (heads_per_block == 64)
      launch_tc<4, 2>(p, args.tokens, stream);
    else if (heads_per_block == 32)
      launch_tc<2, 4>(p, args.tokens, stream);
    else
      launch_tc<1, 4>(p, args.tokens, stream);
  }
  if (splits > 1) {
    ProgrammaticLaunch launch(dim3(args.heads, args.tokens), dim3(kCombineThreads), 0, stream);
    DSINFER_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, mla_decode_combine_kernel, p));
  }
}

}  // namespace dsinfer::backend::cuda
