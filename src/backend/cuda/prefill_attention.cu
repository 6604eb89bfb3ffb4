// Expanded (prefill) MLA attention, ragged and causal (see prefill_attention.h for the contract).
//
// Shapes: q [T, H, 192], kv [S, H, 256] (k_nope 128 | v 128 per head), k_rope [S, 64] shared by the
// heads, out [T, H, 128]; all bf16. Token t of sequence b sees kv rows kv_start[b] + 0..positions[t].
//
// Roofline (per head, causal prompt of n tokens, no cached prefix): FLOPs = 2 * (192 + 128) * n^2 / 2;
// bytes = n * (192 + 256 + 128) * 2 (+ the shared k_rope) when K/V tiles stay in L2 across query
// tiles. 8 x 2048 tokens at 128 heads is ~1.4 TFLOP against ~80 MB: tensor-core bound.
//
// Launch configuration:
//   kSimple: grid ceil(T * H / 8), 256 threads; warp per (token, head) walks its visible keys one by
//            one with an online softmax. The reference: obviously right, slow.
//   kFlash:  grid (ceil(T / 64) + B, H), 128 threads (4 warps x 16 queries), ~109 KB dynamic shared
//            memory (2 blocks per SM). Block x of head y takes one 64-query tile of one sequence
//            (found by walking query_start; the last tiles of a sequence, which see the most keys,
//            come first); spare blocks exit. Q fragments stay in registers; 64-key K (k_nope | k_rope)
//            and V tiles are double-buffered with cp.async; S = Q K^T and O += P V with
//            mma.sync.m16n8k16 bf16, the online softmax in float32 registers (FlashAttention-2).
//            Key tiles past the block's largest position are skipped; only tiles that cross some
//            query's position are masked.
//   kWgmma:  prefill_attention_wgmma.cu (Hopper wgmma + TMA, 128-query tiles, 128-key steps) when
//            kv_rows is known; otherwise kFlash.
//   generic: any other widths (N, R, V): grid ceil(T * H / 8), 256 threads; warp per (token, head)
//            as kSimple, with runtime widths (lane l holds dims l + 32 i, i < 32, of q and of the
//            output in registers). Same roofline with 192 / 256 / 128 replaced by N + R / N + V / V.
#include "backend/cuda/prefill_attention.h"

#include "backend/cuda/prefill_attention_wgmma.h"

#include <climits>
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/prefill_tile.cuh"
#include "backend/cuda/vector.cuh"
#include "core/error.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr float kLog2e = 1.4426950408889634f;

struct Params {
  const bf16* q;
  const bf16* kv;
  const bf16* k_rope;
  const int32_t* query_start;
  const int32_t* kv_start;
  const int32_t* positions;
  bf16* out;
  int tokens;
  int heads;
  int num_sequences;
  float scale_log2;  // scale * log2(e): scores in log2 units, exp2f throughout
};

template <int kNope, int kRope, int kValue>
struct Dims {
  static constexpr int kQk = kNope + kRope;      // query/key width: 192
  static constexpr int kKvRow = kNope + kValue;  // per-head kv width: 256
  static_assert(kNope % 64 == 0 && kRope % 64 == 0 && kValue % 64 == 0,
                "head dims must be multiples of 64 (the simple kernel gives each lane whole bf16 pairs; "
                "the flash kernel whole mma tiles)");
};

// ---------------------------------------------------------------------------------------------
// kSimple: lane l holds q pairs {l + 32 k} of q_nope and of q_rope and output pairs {l + 32 k}.

constexpr int kSimpleWarps = 8;

__device__ int sequence_of_token(const int32_t* query_start, int num_sequences, int t) {
  // The last b with query_start[b] <= t (empty sequences before it share its start).
  int low = 0, high = num_sequences - 1;
  while (low < high) {
    const int mid = (low + high + 1) / 2;
    if (query_start[mid] <= t)
      low = mid;
    else
      high = mid - 1;
  }
  return low;
}

template <int kNope, int kRope, int kValue>
__global__ void __launch_bounds__(kSimpleWarps * 32) prefill_simple_kernel(Params p) {
  using D = Dims<kNope, kRope, kValue>;
  constexpr int kNopePairs = kNope / 64, kRopePairs = kRope / 64, kValuePairs = kValue / 64;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t item = int64_t{blockIdx.x} * kSimpleWarps + warp;
  if (item >= int64_t{p.tokens} * p.heads) return;  // no block-wide barriers in this kernel
  const int t = static_cast<int>(item / p.heads), h = static_cast<int>(item % p.heads);
  const int b = sequence_of_token(p.query_start, p.num_sequences, t);
  const int kv0 = p.kv_start[b], kv_len = p.kv_start[b + 1] - kv0;
  const int visible = min(p.positions[t] + 1, kv_len);

  const __nv_bfloat162* q_row = reinterpret_cast<const __nv_bfloat162*>(p.q + (static_cast<size_t>(t) * p.heads + h) * D::kQk);
  float2 q_nope[kNopePairs], q_rope[kRopePairs];
#pragma unroll
  for (int k = 0; k < kNopePairs; ++k) q_nope[k] = __bfloat1622float2(q_row[lane + 32 * k]);
#pragma unroll
  for (int k = 0; k < kRopePairs; ++k) q_rope[k] = __bfloat1622float2(q_row[kNope / 2 + lane + 32 * k]);

  float2 acc[kValuePairs];
#pragma unroll
  for (int k = 0; k < kValuePairs; ++k) acc[k] = make_float2(0.f, 0.f);
  float running_max = -INFINITY, running_sum = 0.f;
  for (int j = 0; j < visible; ++j) {
    const size_t row = static_cast<size_t>(kv0) + j;
    const __nv_bfloat162* key = reinterpret_cast<const __nv_bfloat162*>(p.kv + (row * p.heads + h) * D::kKvRow);
    const __nv_bfloat162* rope = reinterpret_cast<const __nv_bfloat162*>(p.k_rope + row * kRope);
    float dot = 0.f;
#pragma unroll
    for (int k = 0; k < kNopePairs; ++k) {
      const float2 x = __bfloat1622float2(key[lane + 32 * k]);
      dot = fmaf(q_nope[k].x, x.x, fmaf(q_nope[k].y, x.y, dot));
    }
#pragma unroll
    for (int k = 0; k < kRopePairs; ++k) {
      const float2 x = __bfloat1622float2(rope[lane + 32 * k]);
      dot = fmaf(q_rope[k].x, x.x, fmaf(q_rope[k].y, x.y, dot));
    }
    const auto [correction, weight] = online_softmax_step(dot, p.scale_log2, running_max, running_sum);
#pragma unroll
    for (int k = 0; k < kValuePairs; ++k) {
      const float2 v = __bfloat1622float2(key[kNope / 2 + lane + 32 * k]);
      acc[k].x = fmaf(weight, v.x, acc[k].x * correction);
      acc[k].y = fmaf(weight, v.y, acc[k].y * correction);
    }
  }
  const float inverse = running_sum > 0.f ? 1.f / running_sum : 0.f;  // 0 keys (bad position): zeros
  __nv_bfloat162* out = reinterpret_cast<__nv_bfloat162*>(p.out + (static_cast<size_t>(t) * p.heads + h) * kValue);
#pragma unroll
  for (int k = 0; k < kValuePairs; ++k) out[lane + 32 * k] = __floats2bfloat162_rn(acc[k].x * inverse, acc[k].y * inverse);
}

// ---------------------------------------------------------------------------------------------
// Generic widths: kSimple with runtime N, R, V. Lane l owns dims l + 32 i (i < kGenericDimsPerLane)
// of q (those < N + R: nope then rope) and of the output (those < V); the loops are unrolled so both
// arrays stay in registers. Elements are read one bf16 a lane (2-byte alignment only), so any widths
// work. The reference for the widths kSimple and kFlash do not cover (the small test models).

constexpr int kGenericDimsPerLane = kPrefillGenericMaxWidth / 32;

struct GenericParams {
  Params base;
  int nope_dim;   // N
  int rope_dim;   // R
  int value_dim;  // V
};

__global__ void __launch_bounds__(kSimpleWarps * 32) prefill_generic_kernel(GenericParams g) {
  const Params& p = g.base;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t item = int64_t{blockIdx.x} * kSimpleWarps + warp;
  if (item >= int64_t{p.tokens} * p.heads) return;  // no block-wide barriers in this kernel
  const int t = static_cast<int>(item / p.heads), h = static_cast<int>(item % p.heads);
  const int b = sequence_of_token(p.query_start, p.num_sequences, t);
  const int kv0 = p.kv_start[b], kv_len = p.kv_start[b + 1] - kv0;
  const int visible = min(p.positions[t] + 1, kv_len);  // <= 0 (bad position): nothing, zero output
  const int qk_dim = g.nope_dim + g.rope_dim, kv_row = g.nope_dim + g.value_dim;

  const bf16* q_row = p.q + (static_cast<size_t>(t) * p.heads + h) * qk_dim;
  float q[kGenericDimsPerLane], acc[kGenericDimsPerLane];
#pragma unroll
  for (int i = 0; i < kGenericDimsPerLane; ++i) {
    const int d = lane + 32 * i;
    q[i] = d < qk_dim ? __bfloat162float(q_row[d]) : 0.f;
    acc[i] = 0.f;
  }
  float running_max = -INFINITY, running_sum = 0.f;
  for (int j = 0; j < visible; ++j) {
    const size_t row = static_cast<size_t>(kv0) + j;
    const bf16* key = p.kv + (row * p.heads + h) * kv_row;  // k_nope (N) then v (V)
    const bf16* rope = p.k_rope + row * g.rope_dim;
    float dot = 0.f;
#pragma unroll
    for (int i = 0; i < kGenericDimsPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < qk_dim) dot = fmaf(q[i], __bfloat162float(d < g.nope_dim ? key[d] : rope[d - g.nope_dim]), dot);
    }
    const auto [correction, weight] = online_softmax_step(dot, p.scale_log2, running_max, running_sum);
#pragma unroll
    for (int i = 0; i < kGenericDimsPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < g.value_dim) acc[i] = fmaf(weight, __bfloat162float(key[g.nope_dim + d]), acc[i] * correction);
    }
  }
  const float inverse = running_sum > 0.f ? 1.f / running_sum : 0.f;  // 0 keys (bad position): zeros
  bf16* out = p.out + (static_cast<size_t>(t) * p.heads + h) * g.value_dim;
#pragma unroll
  for (int i = 0; i < kGenericDimsPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < g.value_dim) out[d] = __float2bfloat16_rn(acc[i] * inverse);
  }
}

// ---------------------------------------------------------------------------------------------
// kFlash.

constexpr int kBlockQueries = 64;  // 4 warps x 16 query rows
constexpr int kBlockKeys = 64;
constexpr int kFlashWarps = 4;
constexpr int kFlashThreads = kFlashWarps * 32;

template <int kNope, int kRope, int kValue>
struct FlashShape : Dims<kNope, kRope, kValue> {
  using D = Dims<kNope, kRope, kValue>;
  // Shared rows padded by 16 B: with kQk and kValue multiples of 16 the strides are odd multiples of
  // 16 B, so the 8 row addresses of an ldmatrix fall in 8 different bank groups.
  static constexpr int kQkStride = D::kQk + 8;   // bf16
  static constexpr int kVStride = kValue + 8;    // bf16
  static constexpr int kQkPieces = D::kQk / 8;   // 16-byte pieces of a q or key row
  static constexpr int kRowPieces = (kNope + kRope + kValue) / 8;  // pieces of a key row + value row
  static constexpr size_t kQBytes = size_t{kBlockQueries} * kQkStride * sizeof(bf16);
  static constexpr size_t kKBytes = size_t{kBlockKeys} * kQkStride * sizeof(bf16);  // per stage
  static constexpr size_t kVBytes = size_t{kBlockKeys} * kVStride * sizeof(bf16);   // per stage
  static constexpr size_t kSmemBytes = kQBytes + 2 * kKBytes + 2 * kVBytes;
  static_assert(D::kQk % 16 == 0 && kValue % 16 == 0, "mma k and n tiles");
  static_assert(kQBytes % 16 == 0 && kKBytes % 16 == 0 && kVBytes % 16 == 0, "16-byte aligned buffers");
};

template <int kNope, int kRope, int kValue>
__global__ void __launch_bounds__(kFlashThreads) prefill_flash_kernel(Params p) {
  using Shape = FlashShape<kNope, kRope, kValue>;
  constexpr int kQk = Shape::kQk, kKvRow = Shape::kKvRow;
  extern __shared__ __align__(16) unsigned char shared[];
  bf16* q_tile = reinterpret_cast<bf16*>(shared);                                    // [64][kQkStride]
  bf16* k_tiles = reinterpret_cast<bf16*>(shared + Shape::kQBytes);                  // [2][64][kQkStride]
  bf16* v_tiles = reinterpret_cast<bf16*>(shared + Shape::kQBytes + 2 * Shape::kKBytes);  // [2][64][kVStride]
  __shared__ int tile_sequence, tile_begin, tile_end, min_position, max_position;

  const int h = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, c = lane % 4;

  if (threadIdx.x == 0) {
    const PrefillTile tile = find_prefill_tile<kBlockQueries>(p.query_start, p.num_sequences, blockIdx.x);
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
  __syncthreads();
  const int block_min_position = min_position;
  const int num_tiles = (min(max_position + 1, kv_len) + kBlockKeys - 1) / kBlockKeys;  // <= 0: nothing visible

  // Rows g and g + 8 of this warp's 16 queries; a row past the tile's end is padding (never written).
  int row_position[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = begin + warp * 16 + g + 8 * half;
    row_position[half] = row < end ? min(p.positions[row], kv_len - 1) : -1;
  }

  uint32_t q_fragments[kQk / 16][4];
  float o[kValue / 8][4];  // rows g, g + 8; dims 8 j + 2c, +1
#pragma unroll
  for (int j = 0; j < kValue / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float running_max[2] = {-INFINITY, -INFINITY};
  float partial_sum[2] = {0.f, 0.f};  // this lane's columns; quad-reduced at the end

  if (num_tiles > 0) {
    // Padding query rows are zero-filled: their scores are finite and never stored.
    for (int i = threadIdx.x; i < kBlockQueries * Shape::kQkPieces; i += kFlashThreads) {
      const int r = i / Shape::kQkPieces, piece = i % Shape::kQkPieces, row = begin + r;
      const bool valid = row < end;
      cp_async_16(q_tile + r * Shape::kQkStride + piece * 8,
                  p.q + (static_cast<size_t>(valid ? row : begin) * p.heads + h) * kQk + piece * 8, valid);
    }
  }
  // Key tile `tile` into `stage`: K row = k_nope | k_rope, V row = v. Keys past the context are
  // zero-filled, so their 0 weights never meet NaN garbage.
  auto load_tile = [&](int tile, int stage) {
    bf16* k_tile = k_tiles + stage * kBlockKeys * Shape::kQkStride;
    bf16* v_tile = v_tiles + stage * kBlockKeys * Shape::kVStride;
    for (int i = threadIdx.x; i < kBlockKeys * Shape::kRowPieces; i += kFlashThreads) {
      const int r = i / Shape::kRowPieces, piece = i % Shape::kRowPieces;
      const int key = tile * kBlockKeys + r;
      const bool valid = key < kv_len;
      const size_t row = static_cast<size_t>(kv0) + (valid ? key : 0);
      const bf16* head_row = p.kv + (row * p.heads + h) * kKvRow;
      if (piece < kNope / 8) {
        cp_async_16(k_tile + r * Shape::kQkStride + piece * 8, head_row + piece * 8, valid);
      } else if (piece < kQk / 8) {
        cp_async_16(k_tile + r * Shape::kQkStride + piece * 8, p.k_rope + row * kRope + (piece - kNope / 8) * 8, valid);
      } else {
        const int v_piece = piece - kQk / 8;
        cp_async_16(v_tile + r * Shape::kVStride + v_piece * 8, head_row + kNope + v_piece * 8, valid);
      }
    }
  };
  if (num_tiles > 0) {
    load_tile(0, 0);
    cp_async_commit();
  }

  for (int tile = 0; tile < num_tiles; ++tile) {
    // After this barrier the tile is visible to all and every warp is done with the previous one,
    // so its stage may be refilled.
    cp_async_wait_all();
    __syncthreads();
    if (tile + 1 < num_tiles) {
      load_tile(tile + 1, (tile + 1) & 1);
      cp_async_commit();
    }
    if (tile == 0) {
#pragma unroll
      for (int k = 0; k < kQk / 16; ++k)
        ldmatrix_x4(q_fragments[k], q_tile + (warp * 16 + (lane & 15)) * Shape::kQkStride + 16 * k + (lane >> 4) * 8);
    }
    const bf16* k_tile = k_tiles + (tile & 1) * kBlockKeys * Shape::kQkStride;
    const bf16* v_tile = v_tiles + (tile & 1) * kBlockKeys * Shape::kVStride;

    // S[16 queries, 64 keys] = Q K^T over the 192 dims.
    float s[kBlockKeys / 8][4];
#pragma unroll
    for (int j = 0; j < kBlockKeys / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int k = 0; k < kQk / 16; ++k) {
#pragma unroll
      for (int j = 0; j < kBlockKeys / 8; j += 2) {
        uint32_t b[4];
        ldmatrix_x4(b, k_tile + (8 * j + (lane & 7) + (lane >> 4) * 8) * Shape::kQkStride + 16 * k +
                           ((lane >> 3) & 1) * 8);
        mma_bf16(s[j], q_fragments[k], b[0], b[1]);
        mma_bf16(s[j + 1], q_fragments[k], b[2], b[3]);
      }
    }

    // Scale; mask keys past each row's position when the tile reaches past the smallest one.
    const int key0 = tile * kBlockKeys;
    const bool masked = key0 + kBlockKeys - 1 > block_min_position;
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kBlockKeys / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int half = e / 2, key = key0 + 8 * j + 2 * c + (e & 1);
        float value = s[j][e] * p.scale_log2;
        if (masked && key > row_position[half]) value = -INFINITY;
        s[j][e] = value;
        tile_max[half] = fmaxf(tile_max[half], value);
      }
    float base[2], correction[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(0xffffffffu, tile_max[half], 1));
      tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(0xffffffffu, tile_max[half], 2));
      const float new_max = fmaxf(running_max[half], tile_max[half]);
      base[half] = new_max == -INFINITY ? 0.f : new_max;  // an all-masked row must not give (-inf) - (-inf)
      correction[half] = exp2f(running_max[half] - base[half]);
      running_max[half] = new_max;
      partial_sum[half] *= correction[half];
    }
#pragma unroll
    for (int j = 0; j < kBlockKeys / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = exp2f(s[j][e] - base[e / 2]);
        partial_sum[e / 2] += s[j][e];
      }
#pragma unroll
    for (int j = 0; j < kValue / 8; ++j) {
      o[j][0] *= correction[0];
      o[j][1] *= correction[0];
      o[j][2] *= correction[1];
      o[j][3] *= correction[1];
    }

    // O[16, kValue] += P[16, 64] V[64, kValue].
#pragma unroll
    for (int k = 0; k < kBlockKeys / 16; ++k) {
      const uint32_t pa[4] = {pack_bf16(s[2 * k][0], s[2 * k][1]), pack_bf16(s[2 * k][2], s[2 * k][3]),
                              pack_bf16(s[2 * k + 1][0], s[2 * k + 1][1]), pack_bf16(s[2 * k + 1][2], s[2 * k + 1][3])};
      const bf16* v_rows = v_tile + (16 * k + (lane & 7) + ((lane >> 3) & 1) * 8) * Shape::kVStride + (lane >> 4) * 8;
#pragma unroll
      for (int j = 0; j < kValue / 8; j += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, v_rows + 8 * j);
        mma_bf16(o[j], pa, b[0], b[1]);
        mma_bf16(o[j + 1], pa, b[2], b[3]);
      }
    }
  }

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = partial_sum[half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = begin + warp * 16 + g + 8 * half;
    if (row >= end) continue;
    const float inverse = sum > 0.f ? 1.f / sum : 0.f;  // nothing visible (bad position): zeros
    bf16* out = p.out + (static_cast<size_t>(row) * p.heads + h) * kValue + 2 * c;
#pragma unroll
    for (int j = 0; j < kValue / 8; ++j)
      *reinterpret_cast<__nv_bfloat162*>(out + 8 * j) = __floats2bfloat162_rn(o[j][2 * half] * inverse, o[j][2 * half + 1] * inverse);
  }
}

}  // namespace

void prefill_attention(const PrefillAttentionArgs& args, PrefillAttentionKernel kernel, cudaStream_t stream) {
  constexpr int kNope = kPrefillNopeDim, kRope = kPrefillRopeDim, kValue = kPrefillValueDim;
  DSINFER_CHECK(args.tokens >= 0 && args.heads >= 1 && args.num_sequences >= 0, "prefill_attention: ", args.tokens,
                " tokens, ", args.heads, " heads, ", args.num_sequences, " sequences (need heads >= 1)");
  if (args.tokens == 0) return;
  DSINFER_CHECK(args.num_sequences >= 1, "prefill_attention: ", args.tokens, " tokens but no sequences");
  DSINFER_CHECK(args.q && args.kv && args.k_rope && args.query_start && args.kv_start && args.positions && args.out,
                "prefill_attention: a required device pointer is null");
  const bool fast = prefill_attention_fast_widths(args.nope_dim, args.rope_dim, args.value_dim);
  if (fast) {
    DSINFER_CHECK(aligned16(args.q) && aligned16(args.kv) && aligned16(args.k_rope) && aligned16(args.out),
                  "prefill_attention: q, kv, k_rope and out must be 16-byte aligned");
    DSINFER_CHECK(args.heads <= 65535, "prefill_attention: ", args.heads, " heads exceed the grid limit of 65535");
  } else {
    DSINFER_CHECK(args.nope_dim >= 1 && args.rope_dim >= 0 && args.value_dim >= 1 &&
                      args.nope_dim + args.rope_dim <= kPrefillGenericMaxWidth &&
                      args.value_dim <= kPrefillGenericMaxWidth,
                  "prefill_attention: head widths nope ", args.nope_dim, ", rope ", args.rope_dim, ", value ",
                  args.value_dim, " are not supported (need N, V >= 1, R >= 0, N + R <= ", kPrefillGenericMaxWidth,
                  ", V <= ", kPrefillGenericMaxWidth, ")");
  }

  Params p{};
  p.q = args.q;
  p.kv = args.kv;
  p.k_rope = args.k_rope;
  p.query_start = args.query_start;
  p.kv_start = args.kv_start;
  p.positions = args.positions;
  p.out = args.out;
  p.tokens = args.tokens;
  p.heads = args.heads;
  p.num_sequences = args.num_sequences;
  p.scale_log2 = args.scale * kLog2e;

  if (!fast) {
    const int64_t blocks = (int64_t{args.tokens} * args.heads + kSimpleWarps - 1) / kSimpleWarps;
    DSINFER_CHECK(blocks <= INT_MAX, "prefill_attention: ", args.tokens, " x ", args.heads, " is too large a grid");
    prefill_generic_kernel<<<static_cast<unsigned>(blocks), kSimpleWarps * 32, 0, stream>>>(
        GenericParams{p, args.nope_dim, args.rope_dim, args.value_dim});
    DSINFER_CUDA_CHECK_LAUNCH();
    return;
  }
  if (kernel == PrefillAttentionKernel::kSimple) {
    const int64_t blocks = (int64_t{args.tokens} * args.heads + kSimpleWarps - 1) / kSimpleWarps;
    DSINFER_CHECK(blocks <= INT_MAX, "prefill_attention: ", args.tokens, " x ", args.heads, " is too large a grid");
    prefill_simple_kernel<kNope, kRope, kValue><<<static_cast<unsigned>(blocks), kSimpleWarps * 32, 0, stream>>>(p);
    DSINFER_CUDA_CHECK_LAUNCH();
    return;
  }
  if (kernel == PrefillAttentionKernel::kWgmma && prefill_attention_wgmma_supported(args)) {
    launch_prefill_attention_wgmma(args, stream);
    return;
  }
  using Shape = FlashShape<kNope, kRope, kValue>;
  auto flash = prefill_flash_kernel<kNope, kRope, kValue>;
  // A function attribute, not a stream operation: cheap, and legal during graph capture.
  DSINFER_CUDA_CHECK(
      cudaFuncSetAttribute(flash, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Shape::kSmemBytes)));
  // Sum over sequences of ceil(len / 64) <= ceil(T / 64) + B; spare blocks exit at once.
  const int64_t query_tiles = (int64_t{args.tokens} + kBlockQueries - 1) / kBlockQueries + args.num_sequences;
  DSINFER_CHECK(query_tiles <= INT_MAX, "prefill_attention: too many query tiles");
  flash<<<dim3(static_cast<unsigned>(query_tiles), args.heads), kFlashThreads, Shape::kSmemBytes, stream>>>(p);
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
