// MLA's fused latent-cache write (write_latent_cache in rope_cache.h): for each token t,
//   cache[slot[t]] = [rms_norm(kv_a[t, :latent]) * w | rope(kv_a[t, latent:], positions[t])]
// kv_a [T, latent + rope] bf16 (rows a stride apart), cache [slots, latent + rope] bf16, w [latent]
// f32, cos / sin [max_positions, rope / 2] f32, slot [T] int64 (negative: skip), positions [T] int32.
//
// Roofline: reads and writes (latent + rope) * 2 bytes per token (V3: 1152 each), + the slot, the
// position and one cos and sin row (mostly L2 hits in a step; from memory in kernels_bench, which
// flushes L2) and the weight (cached). No arithmetic to speak of: the ceiling is the copy
// bandwidth. At V3's widths 4096 tokens are 9.4 MB (2.2 us at an H200's 4.26 TB/s of copy), so a
// launch is over in a few DRAM round trips: what decides its speed is how many bytes each SM has in
// flight from the start (HBM3e wants ~40 KB an SM), and how long each token's chain of round trips
// is (its position, then cos and sin; its row; the reduction; the stores).
//
// The kernels (LatentWriteVariant), V3 shapes (16-byte units: interleaved, latent and rope multiples
// of 8, the row stride too, pointers 16-byte aligned), all 128-thread blocks:
//   kWarpPerToken (v0): a warp a token, 4 tokens a block; lane l holds latent units l + 32 j (V3: 2)
//     and rope unit l (V3: lanes 0..7), loaded at once with the norm weights, the slot and the
//     position; cos and sin follow the position; the sum of squares is a warp reduction. 60
//     registers: 8 blocks, 32 tokens (37 KB) an SM in flight. H200: 54% / 69% of copy at 4096 /
//     16384 tokens (a warp walking tokens in a one-wave grid, 23126ea, had fewer tokens in flight,
//     20 an SM, and was slower: 42% / 58%).
//   kLeanWarpPerToken (v1): v0's lanes in 40 registers (12 blocks: 48 tokens, 55 KB an SM in
//     flight): the norm weights are read after the reduction (L1 hits) instead of being held in 16
//     registers through the loads; rows, cos and sin through the non-allocating L1 path.
//   kEightLanesPerToken (v2): 8 lanes a token, 4 tokens a warp, 16 a block. A lane stands for v0's
//     lanes s, s + 8, s + 16, s + 24 (s = lane % 8): it loads their 8 latent units (V3) and rope unit
//     s, every row load of the warp's 4 tokens issued before any arithmetic; then v0's reduction tree,
//     its stages 16 and 8 inside the lane and 4, 2, 1 as shuffles, for 4 tokens at once. The weights
//     come into shared memory by cp.async (no registers held) and are read after the reduction. 64
//     registers, 8 blocks: 128 tokens (147 KB) an SM in flight, a whole 16K-token step in one wave;
//     every lane rotates a rope unit (v0 leaves 24 lanes idle for it).
//   kBulkRows (v3): v2's lanes over rows that bulk copies (TMA, no tensor map) bring into shared
//     memory: one copy for the block's 16 rows when they are contiguous, a row a lane of warp 0
//     otherwise, completing on an mbarrier while every lane loads its token's slot, position, cos and
//     sin: the rows in flight hold no registers, and one instruction asks for 18 KB. 20 KB of shared
//     memory and 8 blocks an SM.
// Every kernel sums the squares in v0's order (a lane's units in order, then the tree of offsets 16,
// 8, 4, 2, 1; the sum of two partial sums is the same in either order), rounds as v0 does, and so
// writes v0's bits. v1, v2 and v3 take latent 256 or 512 (v2, v3: rope <= 64); for other shapes they
// run v0's launch. Shapes without 16-byte units take one 128-thread block per token, element by
// element.
#include "backend/cuda/rope_cache.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/hopper.cuh"
#include "backend/cuda/mma.cuh"  // smem_address, cp_async_16
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/rope_unit.cuh"
#include "backend/cuda/vector.cuh"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kChunk = 8;  // 8 bf16 = 16 bytes: a unit
constexpr int kLatentThreads = 128;
constexpr int kLatentWarps = kLatentThreads / 32;

// ---- element by element ----

__global__ void __launch_bounds__(kLatentThreads)
    write_latent_cache_kernel(const bf16* __restrict__ kv_a, int64_t kv_a_stride, int latent, int rope,
                              const float* __restrict__ weight, float eps, const int32_t* __restrict__ positions,
                              const float* __restrict__ cos_table, const float* __restrict__ sin_table,
                              bool interleaved, const int64_t* __restrict__ slot_mapping, bf16* __restrict__ cache) {
  __shared__ float warp_sums[kLatentWarps];
  allow_dependent_launch();
  const int64_t t = blockIdx.x;
  const int64_t slot = slot_mapping[t];
  if (slot < 0) return;  // uniform over the block: a skipped (padding) row
  const int width = latent + rope;
  const bf16* row = kv_a + t * kv_a_stride;
  bf16* out = cache + slot * width;
  // rms_norm's arithmetic: the f32 sum of squares over the latent, then w * (x * inv_rms) rounded.
  float sum_squares = 0.0f;
  for (int i = threadIdx.x; i < latent; i += kLatentThreads) {
    const float v = __bfloat162float(row[i]);
    sum_squares += v * v;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum_squares += __shfl_xor_sync(0xffffffffu, sum_squares, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum_squares;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kLatentWarps; ++w) total += warp_sums[w];
  const float inv_rms = 1.0f / sqrtf(total / static_cast<float>(latent) + eps);
  for (int i = threadIdx.x; i < latent; i += kLatentThreads)
    out[i] = __float2bfloat16(weight[i] * (__bfloat162float(row[i]) * inv_rms));
  // rope_kernel's arithmetic on the rope part, one pair a thread.
  const int half = rope / 2;
  const int64_t table_row = static_cast<int64_t>(positions[t]) * half;
  for (int i = threadIdx.x; i < half; i += kLatentThreads) {
    const int a = latent + (interleaved ? 2 * i : i);
    const int b = latent + (interleaved ? 2 * i + 1 : i + half);
    const float x0 = __bfloat162float(row[a]), x1 = __bfloat162float(row[b]);
    const float c = cos_table[table_row + i], s = sin_table[table_row + i];
    out[a] = __float2bfloat16(x0 * c - x1 * s);
    out[b] = __float2bfloat16(x1 * c + x0 * s);
  }
}

// ---- v0: a warp a token ----

// kLatentUnits latent units per lane (latent <= 256 kLatentUnits), rope units on lanes 0 .. rope / 8
// - 1, interleaved pairs. write_latent_cache_kernel's arithmetic; the sum of squares in another order
// (a warp's lanes, then a tree).
template <int kLatentUnits>
__global__ void __launch_bounds__(kLatentThreads)
    write_latent_cache_warp_kernel(const bf16* __restrict__ kv_a, int64_t kv_a_stride, int64_t tokens, int latent,
                                   int rope, const float* __restrict__ weight, float eps,
                                   const int32_t* __restrict__ positions, const float* __restrict__ cos_table,
                                   const float* __restrict__ sin_table, const int64_t* __restrict__ slot_mapping,
                                   bf16* __restrict__ cache) {
  allow_dependent_launch();
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kLatentWarps + threadIdx.x / 32;
  if (t >= tokens) return;  // the whole warp
  const int width = latent + rope, latent_units = latent / kChunk, rope_units = rope / kChunk;
  const uint4* row = reinterpret_cast<const uint4*>(kv_a + t * kv_a_stride);

  // Every load at once: the slot (it decides only the stores, so the row does not wait for it), the
  // row's units, the norm weights (no round trip after the reduction), the rope unit and the
  // position; cos and sin follow the position.
  const int64_t slot = slot_mapping[t];
  uint4 raw[kLatentUnits], raw_rope = make_uint4(0u, 0u, 0u, 0u);
  float w[kLatentUnits][kChunk];
#pragma unroll
  for (int j = 0; j < kLatentUnits; ++j) {
    const int u = lane + 32 * j;
    if (u < latent_units) {
      raw[j] = row[u];
      load_f32x8(weight + u * kChunk, w[j]);
    }
  }
  const bool has_rope = lane < rope_units;
  int position = 0;
  if (has_rope) {
    raw_rope = row[latent_units + lane];
    position = positions[t];
  }
  if (slot < 0) return;  // the whole warp: a skipped (padding) row
  float4 c = make_float4(0.0f, 0.0f, 0.0f, 0.0f), s = c;
  if (has_rope) {
    const int64_t table = static_cast<int64_t>(position) * (rope / 2) + 4 * lane;
    c = *reinterpret_cast<const float4*>(cos_table + table);
    s = *reinterpret_cast<const float4*>(sin_table + table);
  }
  uint4* out = reinterpret_cast<uint4*>(cache + slot * width);

  // rms_norm's arithmetic: the f32 sum of squares over the latent, then w * (x * inv_rms) rounded.
  float held[kLatentUnits][kChunk];
  float sum_squares = 0.0f;
#pragma unroll
  for (int j = 0; j < kLatentUnits; ++j) {
    if (lane + 32 * j < latent_units) {
      unpack_bf16_words(raw[j], held[j]);
#pragma unroll
      for (int e = 0; e < kChunk; ++e) sum_squares += held[j][e] * held[j][e];
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum_squares += __shfl_xor_sync(0xffffffffu, sum_squares, offset);
  const float inv_rms = 1.0f / sqrtf(sum_squares / static_cast<float>(latent) + eps);
#pragma unroll
  for (int j = 0; j < kLatentUnits; ++j) {
    const int u = lane + 32 * j;
    if (u < latent_units) {
#pragma unroll
      for (int e = 0; e < kChunk; ++e) held[j][e] = w[j][e] * (held[j][e] * inv_rms);
      out[u] = pack_bf16_words(held[j]);
    }
  }
  // rope_kernel's arithmetic on the rope part: this lane's 4 interleaved pairs.
  if (has_rope) {
    float v[kChunk];
    unpack_bf16_words(raw_rope, v);
    rotate_unit(v, c, s);
    out[latent_units + lane] = pack_bf16_words(v);
  }
}

// ---- v1, v2, v3: kLanes lanes a token ----

struct LatentWriteArgs {
  const bf16* kv_a;
  int64_t kv_a_stride;  // elements
  int64_t tokens;
  int latent, rope;     // multiples of 8
  const float* weight;
  float eps;
  const int32_t* positions;
  const float* cos_table;
  const float* sin_table;
  const int64_t* slot_mapping;
  bf16* cache;
};

// A lane of a token's kLanes: it stands for v0's lanes sub + kLanes i, i < kVirtual, and holds their
// latent units (sub + kLanes i + 32 j, j < kLatentUnits: latent = 256 kLatentUnits, every unit held)
// and rope unit sub (rope units <= kLanes).
template <int kLanes, int kLatentUnits>
struct LaneRow {
  static constexpr int kVirtual = 32 / kLanes;
  uint4 latent[kVirtual][kLatentUnits];
  uint4 rope;
};

// A lane's token: whether it is written (it exists and its slot is not negative), where, and for a
// rope lane the cos and sin at its position.
struct LaneToken {
  bool write = false;
  int64_t slot = -1;
  int position = 0;
  float4 cos = make_float4(0.0f, 0.0f, 0.0f, 0.0f), sin = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
};

// The position first (cos and sin wait for it), then the slot (only the stores wait for it).
__device__ __forceinline__ LaneToken load_position_and_slot(const LatentWriteArgs& a, int64_t t, bool valid,
                                                            bool has_rope) {
  LaneToken token;
  if (valid) {
    if (has_rope) token.position = a.positions[t];
    token.slot = a.slot_mapping[t];
  }
  return token;
}

// Issued after the rows' loads: a warp issues in order, and this load waits for the position.
__device__ __forceinline__ void load_cos_sin(const LatentWriteArgs& a, int sub, bool has_rope, LaneToken& token) {
  token.write = token.slot >= 0;
  if (token.write && has_rope) {
    const int64_t table = static_cast<int64_t>(token.position) * (a.rope / 2) + 4 * sub;
    const uint4 c = load_streaming(a.cos_table + table), s = load_streaming(a.sin_table + table);
    token.cos = make_float4(__uint_as_float(c.x), __uint_as_float(c.y), __uint_as_float(c.z), __uint_as_float(c.w));
    token.sin = make_float4(__uint_as_float(s.x), __uint_as_float(s.y), __uint_as_float(s.z), __uint_as_float(s.w));
  }
}

// The norm weights of unit u (8 floats) as two float4s, lo[u * pitch] and hi[u * pitch]: global
// memory (pitch 2), or the block's copy in shared memory split in halves (pitch 1: the 8 lanes of a
// token reading 8 consecutive units touch 128 consecutive bytes of each half, no bank conflict).
struct UnitWeights {
  const float4* lo;
  const float4* hi;
  int pitch;
};

__device__ __forceinline__ UnitWeights global_weights(const LatentWriteArgs& a) {
  const float4* w = reinterpret_cast<const float4*>(a.weight);
  return {w, w + 1, 2};
}

// The block's copy of the weights, by cp.async (no register waits for them): cp_async_wait_all and a
// barrier before they are read.
template <int kUnits>
__device__ __forceinline__ UnitWeights copy_weights(const LatentWriteArgs& a, float4 (&lo)[kUnits],
                                                    float4 (&hi)[kUnits]) {
  for (int c = static_cast<int>(threadIdx.x); c < a.latent / 4; c += kLatentThreads)
    cp_async_16(c % 2 == 0 ? &lo[c / 2] : &hi[c / 2], a.weight + 4 * c, true);
  cp_async_commit();
  return {lo, hi, 1};
}

// v0's sum of squares over the token of this lane's group, and 1 / rms from it; every lane of the warp
// calls it (the shuffles), those of tokens not written with zeros.
template <int kLanes, int kLatentUnits>
__device__ __forceinline__ float inverse_rms(const LaneRow<kLanes, kLatentUnits>& in, const LatentWriteArgs& a) {
  constexpr int kVirtual = LaneRow<kLanes, kLatentUnits>::kVirtual;
  // Each of v0's lanes' sums, in its order.
  float sums[kVirtual];
#pragma unroll
  for (int i = 0; i < kVirtual; ++i) {
    sums[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < kLatentUnits; ++j) {
      float held[kChunk];
      unpack_bf16_words(in.latent[i][j], held);
#pragma unroll
      for (int e = 0; e < kChunk; ++e) sums[i] += held[e] * held[e];
    }
  }
  // v0's tree: its stages 16 .. kLanes pair lanes this lane stands for (i and i + step), the rest
  // are shuffles inside the token's kLanes lanes.
#pragma unroll
  for (int offset = 16; offset >= kLanes; offset /= 2) {
    const int step = offset / kLanes;
#pragma unroll
    for (int i = 0; i < kVirtual; ++i)
      if ((i & step) == 0) sums[i] = sums[i] + sums[i + step];
  }
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) sums[0] += __shfl_xor_sync(0xffffffffu, sums[0], offset);
  return 1.0f / sqrtf(sums[0] / static_cast<float>(a.latent) + a.eps);
}

// unpack_bf16_words by byte permutes: the same floats, computed in a way the compiler does not
// recognise as the sums' unpacking, so that it keeps the 36 packed words through the reduction and
// unpacks them again rather than keeping their 64 floats (and spilling).
__device__ __forceinline__ void unpack_bf16_words_again(const uint4& raw, float (&out)[8]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(__byte_perm(words[i], 0u, 0x1044));      // bytes 1, 0 high, zeros low
    out[2 * i + 1] = __uint_as_float(__byte_perm(words[i], 0u, 0x3244));  // bytes 3, 2 high, zeros low
  }
}

// v0's rounding of w * (x * inv_rms) and rope_kernel's rotation, stored to the token's slot.
template <int kLanes, int kLatentUnits>
__device__ __forceinline__ void normalize_rotate_store(const LaneRow<kLanes, kLatentUnits>& in, const LaneToken& token,
                                                       float inv_rms, UnitWeights weights, const LatentWriteArgs& a,
                                                       int sub) {
  constexpr int kVirtual = LaneRow<kLanes, kLatentUnits>::kVirtual;
  if (!token.write) return;
  const int latent_units = a.latent / kChunk;  // 32 kLatentUnits
  // The weights' addresses wait for inv_rms (the mask is all ones but for a NaN, whose outputs are
  // NaN whatever the weight), so that the compiler does not load them ahead, into registers that the
  // row's loads need.
  const int weight_mask = inv_rms == inv_rms ? -1 : 0;
  uint4* out = reinterpret_cast<uint4*>(a.cache + token.slot * (a.latent + a.rope));
#pragma unroll
  for (int i = 0; i < kVirtual; ++i) {
#pragma unroll
    for (int j = 0; j < kLatentUnits; ++j) {
      const int u = sub + kLanes * i + 32 * j;
      const int at = (u & weight_mask) * weights.pitch;
      const float4 lo = weights.lo[at], hi = weights.hi[at];
      const float w[kChunk] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      float held[kChunk];
      unpack_bf16_words_again(in.latent[i][j], held);
#pragma unroll
      for (int e = 0; e < kChunk; ++e) held[e] = w[e] * (held[e] * inv_rms);
      out[u] = pack_bf16_words(held);
    }
  }
  // rope_kernel's arithmetic on the rope part: this lane's 4 interleaved pairs.
  if (sub < a.rope / kChunk) {
    float v[kChunk];
    unpack_bf16_words(in.rope, v);
    rotate_unit(v, token.cos, token.sin);
    out[latent_units + sub] = pack_bf16_words(v);
  }
}

// v1 (kLanes 32, weights from L1) and v2 (kLanes 8, weights from shared memory): 32 / kLanes tokens
// a warp, each warp's loads all issued before its arithmetic.
template <int kLanes, int kLatentUnits, int kMinBlocks, bool kSharedWeights>
__global__ void __launch_bounds__(kLatentThreads, kMinBlocks) write_latent_cache_lanes_kernel(LatentWriteArgs a) {
  using Row = LaneRow<kLanes, kLatentUnits>;
  constexpr int kTokensPerWarp = 32 / kLanes, kWeightUnits = kSharedWeights ? 32 * kLatentUnits : 1;
  __shared__ float4 weight_lo[kWeightUnits], weight_hi[kWeightUnits];
  allow_dependent_launch();
  const int lane = static_cast<int>(threadIdx.x % 32), sub = lane % kLanes;
  // No early exit: with shared weights every thread reaches the barrier.
  const int64_t t =
      (static_cast<int64_t>(blockIdx.x) * kLatentWarps + threadIdx.x / 32) * kTokensPerWarp + lane / kLanes;
  const bool valid = t < a.tokens, has_rope = sub < a.rope / kChunk;
  LaneToken token = load_position_and_slot(a, t, valid, has_rope);
  Row in = {};
  if (valid) {
    const bf16* row = a.kv_a + t * a.kv_a_stride;
#pragma unroll
    for (int i = 0; i < Row::kVirtual; ++i) {
#pragma unroll
      for (int j = 0; j < kLatentUnits; ++j)
        in.latent[i][j] = load_streaming(row + (sub + kLanes * i + 32 * j) * kChunk);
    }
    if (has_rope) in.rope = load_streaming(row + a.latent + sub * kChunk);
  }
  UnitWeights weights = global_weights(a);
  if constexpr (kSharedWeights) weights = copy_weights(a, weight_lo, weight_hi);
  load_cos_sin(a, sub, has_rope, token);
  const float inv_rms = inverse_rms(in, a);
  if constexpr (kSharedWeights) {
    cp_async_wait_all();
    __syncthreads();
  }
  normalize_rotate_store(in, token, inv_rms, weights, a, sub);
}

// v3: v2's lanes over rows that bulk copies brought into shared memory.
constexpr int kBulkLanes = 8;
constexpr int kBulkTokens = kLatentWarps * 32 / kBulkLanes;  // a block's
constexpr int kBulkMinBlocks = 8;

template <int kLatentUnits>
__global__ void __launch_bounds__(kLatentThreads, kBulkMinBlocks) write_latent_cache_bulk_kernel(LatentWriteArgs a) {
  using Row = LaneRow<kBulkLanes, kLatentUnits>;
  constexpr int kRowCapacity = 32 * kLatentUnits + kBulkLanes;  // units: latent 256 kLatentUnits, rope <= 64
  __shared__ alignas(128) uint4 rows[kBulkTokens * kRowCapacity];
  __shared__ float4 weight_lo[32 * kLatentUnits], weight_hi[32 * kLatentUnits];
  __shared__ alignas(8) uint64_t landed;
  allow_dependent_launch();
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kBulkTokens;
  const int count = static_cast<int>(min(static_cast<int64_t>(kBulkTokens), a.tokens - first));
  const int lane = static_cast<int>(threadIdx.x % 32), sub = lane % kBulkLanes;
  const int local = static_cast<int>(threadIdx.x / 32) * (32 / kBulkLanes) + lane / kBulkLanes;  // the block's token
  const bool valid = local < count, has_rope = sub < a.rope / kChunk;
  const int latent_units = a.latent / kChunk;
  LaneToken token = load_position_and_slot(a, first + local, valid, has_rope);
  const int width = a.latent + a.rope, row_units = width / kChunk;
  const uint32_t row_bytes = static_cast<uint32_t>(width) * 2, bar = smem_address(&landed);
  if (threadIdx.x == 0) {
    mbarrier_init(bar, 1);
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x < 32) {  // warp 0 issues the copies: the barrier's one arrival carries their bytes
    if (threadIdx.x == 0) mbarrier_arrive_expect_tx(bar, static_cast<uint32_t>(count) * row_bytes);
    __syncwarp();
    if (a.kv_a_stride == width) {
      if (threadIdx.x == 0)
        bulk_load(smem_address(rows), a.kv_a + first * width, static_cast<uint32_t>(count) * row_bytes, bar);
    } else if (static_cast<int>(threadIdx.x) < count) {
      bulk_load(smem_address(rows + threadIdx.x * row_units), a.kv_a + (first + threadIdx.x) * a.kv_a_stride,
                row_bytes, bar);
    }
  }
  const UnitWeights weights = copy_weights(a, weight_lo, weight_hi);
  load_cos_sin(a, sub, has_rope, token);
  mbarrier_wait(bar, 0);
  Row in = {};
  if (valid) {
    const uint4* row = rows + local * row_units;
#pragma unroll
    for (int i = 0; i < Row::kVirtual; ++i) {
#pragma unroll
      for (int j = 0; j < kLatentUnits; ++j) in.latent[i][j] = row[sub + kBulkLanes * i + 32 * j];
    }
    if (has_rope) in.rope = row[latent_units + sub];
  }
  const float inv_rms = inverse_rms(in, a);
  cp_async_wait_all();
  __syncthreads();
  normalize_rotate_store(in, token, inv_rms, weights, a, sub);
}

unsigned blocks_for(int64_t tokens, int64_t tokens_per_block) {
  return static_cast<unsigned>((tokens + tokens_per_block - 1) / tokens_per_block);
}

}  // namespace

const char* latent_write_variant_name(LatentWriteVariant variant) {
  switch (variant) {
    case LatentWriteVariant::kAuto: return "auto";
    case LatentWriteVariant::kWarpPerToken: return "warp per token";
    case LatentWriteVariant::kLeanWarpPerToken: return "lean warp per token";
    case LatentWriteVariant::kEightLanesPerToken: return "8 lanes per token";
    case LatentWriteVariant::kBulkRows: return "bulk rows";
  }
  return "?";
}

void write_latent_cache(const __nv_bfloat16* kv_a, int64_t kv_a_row_stride, int64_t tokens, int64_t latent,
                        int64_t rope, const float* norm_weight, float eps, const int32_t* positions,
                        const float* cos_table, const float* sin_table, bool interleaved,
                        const int64_t* slot_mapping, __nv_bfloat16* cache, cudaStream_t stream,
                        LatentWriteVariant variant) {
  DSINFER_CHECK(tokens >= 0 && tokens <= INT32_MAX && latent >= 1 && rope >= 0 && rope % 2 == 0 &&
                    latent + rope <= INT32_MAX && kv_a_row_stride >= latent + rope,
                "write_latent_cache: ", tokens, " rows of latent ", latent, " and rope ", rope, " (row stride ",
                kv_a_row_stride, ")");
  if (tokens == 0) return;
  const int64_t latent_units = latent / kChunk, rope_units = rope / kChunk;
  if (!(interleaved && latent % kChunk == 0 && rope % kChunk == 0 && kv_a_row_stride % kChunk == 0 &&
        latent_units <= 4 * 32 && rope_units <= 32 && aligned16(kv_a) && aligned16(cache) && aligned16(norm_weight) &&
        aligned16(cos_table) && aligned16(sin_table))) {
    write_latent_cache_kernel<<<static_cast<unsigned>(tokens), kLatentThreads, 0, stream>>>(
        kv_a, kv_a_row_stride, static_cast<int>(latent), static_cast<int>(rope), norm_weight, eps, positions,
        cos_table, sin_table, interleaved, slot_mapping, cache);
    DSINFER_CUDA_CHECK_LAUNCH();
    return;
  }
  if (variant == LatentWriteVariant::kAuto) variant = LatentWriteVariant::kWarpPerToken;
  const LatentWriteArgs args{kv_a,        kv_a_row_stride, tokens,    static_cast<int>(latent),
                             static_cast<int>(rope), norm_weight, eps, positions, cos_table,
                             sin_table,   slot_mapping,    cache};
  const auto launch = [&](auto kernel, int64_t tokens_per_block) {
    kernel<<<blocks_for(tokens, tokens_per_block), kLatentThreads, 0, stream>>>(args);
    DSINFER_CUDA_CHECK_LAUNCH();
  };
  // The new kernels hold all of 1 or 2 of v0's latent units a lane (latent 256 or 512); v2 and v3 one
  // rope unit a lane of 8 (rope <= 64).
  if (latent_units == 32 || latent_units == 64) {
    const bool one = latent_units == 32, eight_lanes = rope_units <= 8;
    switch (variant) {
      case LatentWriteVariant::kLeanWarpPerToken:
        if (one) launch(write_latent_cache_lanes_kernel<32, 1, 12, false>, kLatentWarps);
        else launch(write_latent_cache_lanes_kernel<32, 2, 12, false>, kLatentWarps);
        return;
      case LatentWriteVariant::kEightLanesPerToken:
        if (!eight_lanes) break;
        if (one) launch(write_latent_cache_lanes_kernel<8, 1, 8, true>, 4 * kLatentWarps);
        else launch(write_latent_cache_lanes_kernel<8, 2, 8, true>, 4 * kLatentWarps);
        return;
      case LatentWriteVariant::kBulkRows:
        if (!eight_lanes) break;
        if (one) launch(write_latent_cache_bulk_kernel<1>, kBulkTokens);
        else launch(write_latent_cache_bulk_kernel<2>, kBulkTokens);
        return;
      default:
        break;
    }
  }
  const auto launch_v0 = [&](auto kernel) {
    kernel<<<blocks_for(tokens, kLatentWarps), kLatentThreads, 0, stream>>>(
        kv_a, kv_a_row_stride, tokens, static_cast<int>(latent), static_cast<int>(rope), norm_weight, eps, positions,
        cos_table, sin_table, slot_mapping, cache);
    DSINFER_CUDA_CHECK_LAUNCH();
  };
  if (latent_units <= 32) {
    launch_v0(write_latent_cache_warp_kernel<1>);
  } else if (latent_units <= 64) {
    launch_v0(write_latent_cache_warp_kernel<2>);
  } else {
    launch_v0(write_latent_cache_warp_kernel<4>);
  }
}

}  // namespace dsinfer::backend::cuda
