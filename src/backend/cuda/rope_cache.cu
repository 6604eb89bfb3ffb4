// Rotary embedding in place, MLA's fused latent-cache write (norm + rope + scatter), and the latent
// cache's plain scatter (write_cache) and gather (gather_cache).
//
// rope_inplace: x [T, G, D] bf16 (token rows token_stride apart), dims [begin, begin + rope_dim) of
//   each group rotated by the f32 cos/sin tables [max_positions, rope_dim / 2] at positions [T].
//   Roofline: reads and writes T * G * rope_dim * 2 bytes (+ one table row of each, rope_dim * 2
//   bytes per token, mostly L2 hits), 6 FLOPs per pair: V3's q (G = 128, D = 192, rope 64) is 32 KB
//   per token. Launch, interleaved pairs in 16-byte units (DeepSeek; begin, rope_dim, D and the
//   token stride multiples of 8, x and the tables 16-byte aligned): a unit is 8 elements, 4 pairs,
//   with its 4 cos and 4 sin as two 16-byte loads, read and written by single 16-byte instructions.
//   256-thread blocks, a thread holding units u + 256 j of each token it walks: j < 4 when 256 is a
//   multiple of a group's units (V3: 8), so that they share one cos and one sin load, else j < 2;
//   grid.x covers a token's units (V3's q: 1024, one block), grid.y is one wave of blocks (3 per
//   SM, <= 80 registers; at most the tokens), each walking tokens blockIdx.y, + gridDim.y, ...: the
//   next token's units and their cos and sin load before this token's are rotated and stored, its
//   position taken from a batch that each warp loads 32 tokens at a time (lane i: its i-th next
//   token). (Two units a thread and one step of units a block, each block's loads all in flight at
//   once and none through its stores: 78% / 81% of copy at 4096 / 16384 tokens on an H200.)
//   Otherwise: grid (T, ceil(pairs / threads)), one thread per (group, pair), threads = G *
//   rope_dim / 2 rounded up to a warp, at most 256.
// write_latent_cache: cache[slot[t]] = [rms_norm(kv_a[t, :latent]) * w | rope(kv_a[t, latent:])].
//   Roofline: reads and writes (latent + rope) * 2 bytes per token (V3: 1152 each) + the weight
//   (cached) and one table row. Launch, 16-byte units (interleaved, latent and rope multiples of 8,
//   latent <= 1024, rope <= 256, pointers 16-byte aligned): one warp per token, 4 tokens per
//   128-thread block; lane l holds latent units l + 32 j (V3: 2) and rope unit l (V3: lanes 0..7),
//   all loaded at once with the token's slot and position, single 16-byte accesses; cos and sin
//   follow the position (two round trips in all: the loads used to wait for the slot, and the
//   tables for them, three, with the row read and written 4 bytes at a time: 47% / 63% of copy at
//   4096 / 16384 tokens on an H200); the sum of squares is a warp reduction (no block barrier).
//   Otherwise one 128-thread block per token, element by element.
// The FP8 cache (cache_layout.h, --kv-cache-dtype fp8): write_latent_cache_fp8 is the same kernel
//   rounding each f32 value once to e4m3 (/ kFp8CacheScale, nearest even, saturating) instead of
//   to bf16, 8-byte stores; write_cache_fp8 and gather_cache_fp8 convert bf16 rows to e4m3 and
//   back, 8 values a thread (16 bytes of bf16, 8 of e4m3). Same grids as the bf16 forms.
// write_cache: cache[slot_mapping[t]] = [latent[t] | k_rope[t]], rows of 576 bf16 for V3.
// gather_cache: out[row_start[b] + j] = cache[slot(b, j)] over every sequence's context.
//   Both move rows * width * 2 bytes each way and compute nothing. Launch: 16-byte units (2-byte ones
//   when alignment does not allow), a 256-thread block of tx (units per row, a power of two) x ty
//   rows; grid.x covers a row, grid.y the rows (<= 65535, looping beyond), grid.z the sequences
//   (gather_cache).
#include "backend/cuda/rope_cache.h"

#include <algorithm>

#include "backend/cache_layout.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/vector.cuh"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kRopeMaxThreads = 256;
constexpr int kChunk = 8;  // 8 bf16 = 16 bytes

// rope_kernel's arithmetic on the 4 interleaved pairs of a unit, with their cos and sin.
__device__ __forceinline__ void rotate_unit(float (&v)[kChunk], const float4& c, const float4& s) {
  const float cs[4] = {c.x, c.y, c.z, c.w}, sn[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const float x0 = v[2 * m], x1 = v[2 * m + 1];
    v[2 * m] = x0 * cs[m] - x1 * sn[m];
    v[2 * m + 1] = x1 * cs[m] + x0 * sn[m];
  }
}

// ---- rope ----

__global__ void __launch_bounds__(kRopeMaxThreads)
    rope_kernel(bf16* x, int64_t token_stride, int group_dim, int groups, int begin, int half,
                const int32_t* __restrict__ positions, const float* __restrict__ cos_table,
                const float* __restrict__ sin_table, bool interleaved) {
  allow_dependent_launch();
  const int64_t t = blockIdx.x;
  const int p = static_cast<int>(blockIdx.y * blockDim.x + threadIdx.x);
  if (p >= groups * half) return;
  const int64_t table_row = static_cast<int64_t>(positions[t]) * half;
  const float* cos_row = cos_table + table_row;
  const float* sin_row = sin_table + table_row;
  bf16* token = x + t * token_stride + begin;
  // Each (group, pair) belongs to one thread: no two threads touch the same element.
  const int g = p / half, i = p - g * half;
  bf16* v = token + static_cast<int64_t>(g) * group_dim;
  const int a = interleaved ? 2 * i : i;
  const int b = interleaved ? 2 * i + 1 : i + half;
  const float x0 = __bfloat162float(v[a]), x1 = __bfloat162float(v[b]);
  const float c = cos_row[i], s = sin_row[i];
  v[a] = __float2bfloat16(x0 * c - x1 * s);
  v[b] = __float2bfloat16(x1 * c + x0 * s);
}

// Interleaved pairs in 16-byte units: unit k of a group's rope dims holds elements 8k .. 8k + 7, pairs
// 4k .. 4k + 3, whose cos and sin are 16 bytes each. A token's units are numbered [groups,
// units_per_group]; a thread holds units u + 256 j, j < kUnits, of each token it walks (see the top).
// kSharedColumn: 256 is a multiple of units_per_group, so all of them have the same k and share one
// cos and one sin load.
constexpr int kRopeVectorThreads = 256;
constexpr int kRopeBlocksPerSm = 3;  // guaranteed by the launch bounds (<= 80 registers)
constexpr int kRopeBatch = 32;  // tokens whose positions a warp loads at once, one a lane

// A token's loads for a thread: its units and their cos and sin.
template <int kUnits, bool kSharedColumn>
struct RopeLoads {
  static constexpr int kColumns = kSharedColumn ? 1 : kUnits;
  uint4 raw[kUnits];
  float4 cos[kColumns], sin[kColumns];
};

template <int kUnits, bool kSharedColumn>
__global__ void __launch_bounds__(kRopeVectorThreads, kRopeBlocksPerSm)
    rope_vector_kernel(bf16* x, int64_t tokens, int64_t token_stride, int group_dim, int begin, int units_per_group,
                       int units_per_token, const int32_t* __restrict__ positions,
                       const float* __restrict__ cos_table, const float* __restrict__ sin_table, int half) {
  using Loads = RopeLoads<kUnits, kSharedColumn>;
  allow_dependent_launch();
  const int lane = static_cast<int>(threadIdx.x % 32);
  // This thread's units: their element offsets in a token's row and their table columns (with a
  // shared column, unit j's offset is the first's + j * 256 / units_per_group groups).
  constexpr int kOffsets = kSharedColumn ? 1 : kUnits;
  bool valid[kUnits];
  int64_t offset[kOffsets];
  int table_column[kOffsets];
  const int first_unit = static_cast<int>(blockIdx.x) * (kRopeVectorThreads * kUnits) + static_cast<int>(threadIdx.x);
#pragma unroll
  for (int j = 0; j < kUnits; ++j) {
    const int unit = first_unit + j * kRopeVectorThreads;
    valid[j] = unit < units_per_token;
    if (j < kOffsets) {
      const int g = unit / units_per_group, k = unit - g * units_per_group;
      offset[j] = static_cast<int64_t>(g) * group_dim + begin + k * kChunk;
      table_column[j] = 4 * k;
    }
  }
  const int64_t unit_step = kSharedColumn ? static_cast<int64_t>(kRopeVectorThreads / units_per_group) * group_dim : 0;
  auto unit_offset = [&](int j) { return kSharedColumn ? offset[0] + j * unit_step : offset[j]; };
  const int64_t step = gridDim.y;
  int64_t t = blockIdx.y;  // the token loaded next

  // A token's loads: its units; its position (the first token's with them, later ones' from a batch
  // that the warp loads kRopeBatch tokens at a time, t + i * step on lane i, a token ahead of their
  // units); then the cos and sin at that position.
  int batch_position = 0;
  int n = 0;  // tokens issued from the batches so far
  auto issue = [&](auto first, Loads& loads) {
    const bf16* token = x + t * token_stride;
#pragma unroll
    for (int j = 0; j < kUnits; ++j) {
      if (valid[j]) loads.raw[j] = *reinterpret_cast<const uint4*>(token + unit_offset(j));
    }
    int position;
    if constexpr (decltype(first)::value) {
      position = positions[t];
    } else {
      const int in_batch = n % kRopeBatch;
      if (in_batch == 0) batch_position = positions[min(t + lane * step, tokens - 1)];  // the whole warp
      position = __shfl_sync(0xffffffffu, batch_position, in_batch);
      ++n;
    }
#pragma unroll
    for (int c = 0; c < Loads::kColumns; ++c) {
      if (valid[c]) {
        const int64_t table = static_cast<int64_t>(position) * half + table_column[c];
        loads.cos[c] = *reinterpret_cast<const float4*>(cos_table + table);
        loads.sin[c] = *reinterpret_cast<const float4*>(sin_table + table);
      }
    }
  };
  auto process = [&](int64_t token_index, const Loads& loads) {
    bf16* token = x + token_index * token_stride;
#pragma unroll
    for (int j = 0; j < kUnits; ++j) {
      if (valid[j]) {
        const int c = kSharedColumn ? 0 : j;
        float v[kChunk];
        unpack_bf16_words(loads.raw[j], v);
        rotate_unit(v, loads.cos[c], loads.sin[c]);
        *reinterpret_cast<uint4*>(token + unit_offset(j)) = pack_bf16_words(v);
      }
    }
  };

  // Two sets of loads used in turn (no copy between them): the next token's in flight while this
  // one's are rotated and stored. Each unit is read and then written by its own thread only.
  Loads even, odd;
  issue(std::true_type{}, even);
  auto next_step = [&](const Loads& current, Loads& following) {
    const int64_t current_token = t;
    t += step;
    if (t < tokens) issue(std::false_type{}, following);
    process(current_token, current);
    return t < tokens;
  };
  while (next_step(even, odd) && next_step(odd, even)) {
  }
}

// ---- the FP8 cache's values (cache_layout.h: e4m3 times kFp8CacheScale) ----

// core's f32_to_fp8e4m3 (the CPU's write): round to nearest even, saturating at +-448, NaN kept.
__device__ __forceinline__ uint8_t to_cache_fp8(float value) {
  return __nv_cvt_float_to_fp8(value / kFp8CacheScale, __NV_SATFINITE, __NV_E4M3);
}

// 8 values -> 8 e4m3 bytes (the first value in the lowest byte).
__device__ __forceinline__ uint2 to_cache_fp8x8(const float (&v)[kChunk]) {
  uint32_t word[2];
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    const __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(
        make_float2(v[4 * w] / kFp8CacheScale, v[4 * w + 1] / kFp8CacheScale), __NV_SATFINITE, __NV_E4M3);
    const __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(
        make_float2(v[4 * w + 2] / kFp8CacheScale, v[4 * w + 3] / kFp8CacheScale), __NV_SATFINITE, __NV_E4M3);
    word[w] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
  return make_uint2(word[0], word[1]);
}

__device__ __forceinline__ float from_cache_fp8(uint8_t code) {
  return static_cast<float>(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3))) * kFp8CacheScale;
}

// ---- the fused latent write ----

constexpr int kLatentThreads = 128;

// kFp8: the cache is e4m3 (each value rounded once, from f32); else bf16.
template <bool kFp8>
__global__ void __launch_bounds__(kLatentThreads)
    write_latent_cache_kernel(const bf16* __restrict__ kv_a, int latent, int rope, const float* __restrict__ weight,
                              float eps, const int32_t* __restrict__ positions, const float* __restrict__ cos_table,
                              const float* __restrict__ sin_table, bool interleaved,
                              const int64_t* __restrict__ slot_mapping, void* __restrict__ cache_out) {
  __shared__ float warp_sums[kLatentThreads / 32];
  allow_dependent_launch();
  const int64_t t = blockIdx.x;
  const int64_t slot = slot_mapping[t];
  if (slot < 0) return;  // uniform over the block: a skipped (padding) row
  const int width = latent + rope;
  const bf16* row = kv_a + t * width;
  bf16* out = static_cast<bf16*>(cache_out) + slot * width;
  uint8_t* out_fp8 = static_cast<uint8_t*>(cache_out) + slot * width;
  auto store = [&](int i, float value) {
    if constexpr (kFp8)
      out_fp8[i] = to_cache_fp8(value);
    else
      out[i] = __float2bfloat16(value);
  };
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
  for (int w = 0; w < kLatentThreads / 32; ++w) total += warp_sums[w];
  const float inv_rms = 1.0f / sqrtf(total / static_cast<float>(latent) + eps);
  for (int i = threadIdx.x; i < latent; i += kLatentThreads) store(i, weight[i] * (__bfloat162float(row[i]) * inv_rms));
  // rope_kernel's arithmetic on the rope part, one pair a thread.
  const int half = rope / 2;
  const int64_t table_row = static_cast<int64_t>(positions[t]) * half;
  for (int i = threadIdx.x; i < half; i += kLatentThreads) {
    const int a = latent + (interleaved ? 2 * i : i);
    const int b = latent + (interleaved ? 2 * i + 1 : i + half);
    const float x0 = __bfloat162float(row[a]), x1 = __bfloat162float(row[b]);
    const float c = cos_table[table_row + i], s = sin_table[table_row + i];
    store(a, x0 * c - x1 * s);
    store(b, x1 * c + x0 * s);
  }
}

// One warp per token, 16-byte units (see the top); kLatentUnits latent units per lane (latent <=
// 256 kLatentUnits), rope units on lanes 0 .. rope / 8 - 1, interleaved pairs. write_latent_cache_kernel's
// arithmetic; the sum of squares in another order (a warp's lanes, then a tree).
constexpr int kLatentWarps = 4;  // tokens per block

template <int kLatentUnits, bool kFp8>
__global__ void __launch_bounds__(kLatentWarps * 32)
    write_latent_cache_warp_kernel(const bf16* __restrict__ kv_a, int64_t tokens, int latent, int rope,
                                   const float* __restrict__ weight, float eps, const int32_t* __restrict__ positions,
                                   const float* __restrict__ cos_table, const float* __restrict__ sin_table,
                                   const int64_t* __restrict__ slot_mapping, void* __restrict__ cache_out) {
  allow_dependent_launch();
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kLatentWarps + threadIdx.x / 32;
  if (t >= tokens) return;  // the whole warp
  const int width = latent + rope, latent_units = latent / kChunk, rope_units = rope / kChunk;
  const uint4* row = reinterpret_cast<const uint4*>(kv_a + t * width);

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
  uint4* out = reinterpret_cast<uint4*>(static_cast<bf16*>(cache_out) + slot * width);
  uint2* out_fp8 = reinterpret_cast<uint2*>(static_cast<uint8_t*>(cache_out) + slot * width);  // 8 e4m3 a unit
  auto store = [&](int unit, const float (&v)[kChunk]) {
    if constexpr (kFp8)
      out_fp8[unit] = to_cache_fp8x8(v);
    else
      out[unit] = pack_bf16_words(v);
  };

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
      store(u, held[j]);
    }
  }
  // rope_kernel's arithmetic on the rope part: this lane's 4 interleaved pairs.
  if (has_rope) {
    float v[kChunk];
    unpack_bf16_words(raw_rope, v);
    rotate_unit(v, c, s);
    store(latent_units + lane, v);
  }
}

// ---- cache rows ----

// Unit: uint4 (8 bf16) or uint16_t (1 bf16). Widths and strides count units.
template <typename Unit>
__global__ void write_cache_kernel(const Unit* __restrict__ latent, int64_t latent_stride, int64_t latent_units,
                                   const Unit* __restrict__ k_rope, int64_t k_rope_stride, int64_t rope_units,
                                   const int64_t* __restrict__ slot_mapping, Unit* __restrict__ cache,
                                   int64_t tokens) {
  const int64_t row_units = latent_units + rope_units;
  auto body = [&](int64_t unit, int64_t t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) return;  // padding row
    cache[slot * row_units + unit] = unit < latent_units ? latent[t * latent_stride + unit]
                                                         : k_rope[t * k_rope_stride + (unit - latent_units)];
  };
  for_each_row_unit(row_units, tokens, body);
}

template <typename Unit>
__global__ void gather_cache_kernel(const Unit* __restrict__ cache, int64_t row_units,
                                    const int32_t* __restrict__ page_table_start, const int32_t* __restrict__ page_ids,
                                    const int32_t* __restrict__ context_lens, const int32_t* __restrict__ out_row_start,
                                    int page_size, Unit* __restrict__ out) {
  const int b = blockIdx.z;
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (unit >= row_units) return;
  const int32_t* pages = page_ids + page_table_start[b];
  const int length = context_lens[b];
  const int64_t first_row = out_row_start[b];
  const int step = static_cast<int>(gridDim.y * blockDim.y);
  for (int j = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y); j < length; j += step) {
    const int64_t slot = cache_slot(pages, page_size, j);
    out[(first_row + j) * row_units + unit] = cache[slot * row_units + unit];
  }
}

// The FP8 cache's scatter and gather: bf16 rows in, e4m3 rows out (and back), 8 values a unit
// (16 bytes of bf16, 8 of e4m3) when kVector, else one. The row grid's units are those.
template <bool kVector>
__global__ void write_cache_fp8_kernel(const bf16* __restrict__ latent, int64_t latent_stride, int64_t width,
                                       const int64_t* __restrict__ slot_mapping, uint8_t* __restrict__ cache,
                                       int64_t tokens) {
  const int64_t units = kVector ? width / kChunk : width;
  for_each_row_unit(units, tokens, [&](int64_t unit, int64_t t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) return;  // padding row
    if constexpr (kVector) {
      float v[kChunk];
      unpack_bf16_words(reinterpret_cast<const uint4*>(latent + t * latent_stride)[unit], v);
      reinterpret_cast<uint2*>(cache + slot * width)[unit] = to_cache_fp8x8(v);
    } else {
      cache[slot * width + unit] = to_cache_fp8(__bfloat162float(latent[t * latent_stride + unit]));
    }
  });
}

template <bool kVector>
__global__ void gather_cache_fp8_kernel(const uint8_t* __restrict__ cache, int64_t width,
                                        const int32_t* __restrict__ page_table_start,
                                        const int32_t* __restrict__ page_ids, const int32_t* __restrict__ context_lens,
                                        const int32_t* __restrict__ out_row_start, int page_size,
                                        bf16* __restrict__ out) {
  const int b = blockIdx.z;
  const int64_t units = kVector ? width / kChunk : width;
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (unit >= units) return;
  const int32_t* pages = page_ids + page_table_start[b];
  const int length = context_lens[b];
  const int64_t first_row = out_row_start[b];
  const int step = static_cast<int>(gridDim.y * blockDim.y);
  for (int j = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y); j < length; j += step) {
    const int64_t slot = cache_slot(pages, page_size, j);
    if constexpr (kVector) {
      const uint2 codes = reinterpret_cast<const uint2*>(cache + slot * width)[unit];
      float v[kChunk];
#pragma unroll
      for (int e = 0; e < kChunk; ++e) v[e] = from_cache_fp8(static_cast<uint8_t>((e < 4 ? codes.x : codes.y) >> (8 * (e % 4))));
      reinterpret_cast<uint4*>(out + (first_row + j) * width)[unit] = pack_bf16_words(v);
    } else {
      out[(first_row + j) * width + unit] = __float2bfloat16(from_cache_fp8(cache[slot * width + unit]));
    }
  }
}

template <typename Unit>
void launch_write_cache(const bf16* latent, int64_t latent_row_stride, int64_t latent_width, const bf16* k_rope,
                        int64_t k_rope_row_stride, int64_t rope_width, const int64_t* slot_mapping, bf16* cache,
                        int64_t tokens, cudaStream_t stream) {
  constexpr int64_t kPerUnit = sizeof(Unit) / sizeof(bf16);
  RowGrid launch = row_grid(tokens, (latent_width + rope_width) / kPerUnit, 1);
  write_cache_kernel<Unit><<<launch.grid, launch.block, 0, stream>>>(
      reinterpret_cast<const Unit*>(latent), latent_row_stride / kPerUnit, latent_width / kPerUnit,
      reinterpret_cast<const Unit*>(k_rope), k_rope_row_stride / kPerUnit, rope_width / kPerUnit, slot_mapping,
      reinterpret_cast<Unit*>(cache), tokens);
  DSINFER_CUDA_CHECK_LAUNCH();
}

void write_cache_rows(const bf16* latent, int64_t latent_row_stride, int64_t latent_width, const bf16* k_rope,
                      int64_t k_rope_row_stride, int64_t rope_width, const int64_t* slot_mapping, bf16* cache,
                      int64_t tokens, cudaStream_t stream) {
  // 16-byte units when every row start on both sides is 16-byte aligned and both parts are whole units.
  bool vector = aligned16(latent) && aligned16(cache) && latent_width % 8 == 0 && latent_row_stride % 8 == 0 &&
                rope_width % 8 == 0 && (rope_width == 0 || (aligned16(k_rope) && k_rope_row_stride % 8 == 0));
  if (vector) {
    launch_write_cache<uint4>(latent, latent_row_stride, latent_width, k_rope, k_rope_row_stride, rope_width,
                              slot_mapping, cache, tokens, stream);
  } else {
    launch_write_cache<uint16_t>(latent, latent_row_stride, latent_width, k_rope, k_rope_row_stride, rope_width,
                                 slot_mapping, cache, tokens, stream);
  }
}

}  // namespace

void rope_inplace(__nv_bfloat16* x, int64_t tokens, int64_t groups, int64_t group_dim, int64_t token_stride,
                  int64_t begin, int64_t rope_dim, const int32_t* positions, const float* cos_table,
                  const float* sin_table, bool interleaved, cudaStream_t stream) {
  DSINFER_CHECK(tokens >= 0 && tokens <= INT32_MAX && groups >= 0 && rope_dim >= 0 && rope_dim % 2 == 0,
                "rope: unsupported shape (", tokens, " tokens, ", groups, " groups, rope_dim ", rope_dim, ")");
  DSINFER_CHECK(begin >= 0 && begin + rope_dim <= group_dim, "rope: dims [", begin, ", ", begin + rope_dim,
                ") outside a group of ", group_dim);
  DSINFER_CHECK(token_stride >= groups * group_dim, "rope: token stride ", token_stride, " is narrower than ",
                groups, " groups of ", group_dim);
  const int64_t pairs = groups * (rope_dim / 2);
  DSINFER_CHECK(pairs <= INT32_MAX && group_dim <= INT32_MAX, "rope: ", pairs, " pairs per token is too many");
  if (tokens == 0 || pairs == 0) return;
  const int64_t units_per_group = rope_dim / kChunk, units_per_token = groups * units_per_group;
  if (interleaved && rope_dim % kChunk == 0 && begin % kChunk == 0 && group_dim % kChunk == 0 &&
      token_stride % kChunk == 0 && aligned16(x) && aligned16(cos_table) && aligned16(sin_table)) {
    // One wave of blocks, as many on every SM: grid.x covers a token's units, grid.y the tokens.
    int device = 0, sms = 0;
    DSINFER_CUDA_CHECK(cudaGetDevice(&device));
    DSINFER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const auto launch = [&](auto kernel, int64_t units_per_thread) {
      const int64_t per_block = kRopeVectorThreads * units_per_thread;
      const int64_t blocks_x = (units_per_token + per_block - 1) / per_block;
      const int64_t blocks_y = std::min(tokens, std::max<int64_t>(1, int64_t{sms} * kRopeBlocksPerSm / blocks_x));
      kernel<<<dim3(static_cast<unsigned>(blocks_x), static_cast<unsigned>(blocks_y)), kRopeVectorThreads, 0, stream>>>(
          x, tokens, token_stride, static_cast<int>(group_dim), static_cast<int>(begin),
          static_cast<int>(units_per_group), static_cast<int>(units_per_token), positions, cos_table, sin_table,
          static_cast<int>(rope_dim / 2));
    };
    if (kRopeVectorThreads % units_per_group == 0) {
      launch(rope_vector_kernel<4, true>, 4);  // V3's q: a token a block
    } else {
      launch(rope_vector_kernel<2, false>, 2);
    }
    DSINFER_CUDA_CHECK_LAUNCH();
    return;
  }
  const int threads = static_cast<int>(std::min<int64_t>(kRopeMaxThreads, (pairs + 31) / 32 * 32));
  const int64_t chunks = (pairs + threads - 1) / threads;
  DSINFER_CHECK(chunks <= 65535, "rope: ", pairs, " pairs per token is too many");
  rope_kernel<<<dim3(static_cast<unsigned>(tokens), static_cast<unsigned>(chunks)), threads, 0, stream>>>(
      x, token_stride, static_cast<int>(group_dim), static_cast<int>(groups), static_cast<int>(begin),
      static_cast<int>(rope_dim / 2), positions, cos_table, sin_table, interleaved);
  DSINFER_CUDA_CHECK_LAUNCH();
}

void write_cache(const __nv_bfloat16* latent, int64_t latent_row_stride, const int64_t* slot_mapping,
                 __nv_bfloat16* cache, int64_t tokens, int64_t width, cudaStream_t stream) {
  DSINFER_CHECK(tokens >= 0 && width >= 0 && latent_row_stride >= width, "write_cache: ", tokens, " rows of ",
                width, " with row stride ", latent_row_stride);
  if (tokens == 0 || width == 0) return;
  write_cache_rows(latent, latent_row_stride, width, nullptr, 0, 0, slot_mapping, cache, tokens, stream);
}

void write_cache_split(const __nv_bfloat16* latent, int64_t latent_row_stride, int64_t latent_width,
                       const __nv_bfloat16* k_rope, int64_t k_rope_row_stride, int64_t rope_width,
                       const int64_t* slot_mapping, __nv_bfloat16* cache, int64_t tokens, cudaStream_t stream) {
  DSINFER_CHECK(tokens >= 0 && latent_width >= 0 && rope_width >= 0 && latent_row_stride >= latent_width &&
                    k_rope_row_stride >= rope_width,
                "write_cache_split: ", tokens, " rows of latent ", latent_width, " (stride ", latent_row_stride,
                ") and k_rope ", rope_width, " (stride ", k_rope_row_stride, ")");
  if (tokens == 0 || latent_width + rope_width == 0) return;
  write_cache_rows(latent, latent_row_stride, latent_width, k_rope, k_rope_row_stride, rope_width, slot_mapping,
                   cache, tokens, stream);
}

namespace {

template <bool kFp8>
void launch_write_latent_cache(const __nv_bfloat16* kv_a, int64_t tokens, int64_t latent, int64_t rope,
                               const float* norm_weight, float eps, const int32_t* positions, const float* cos_table,
                               const float* sin_table, bool interleaved, const int64_t* slot_mapping, void* cache,
                               cudaStream_t stream) {
  DSINFER_CHECK(tokens >= 0 && tokens <= INT32_MAX && latent >= 1 && rope >= 0 && rope % 2 == 0 &&
                    latent + rope <= INT32_MAX,
                "write_latent_cache: ", tokens, " rows of latent ", latent, " and rope ", rope);
  if (tokens == 0) return;
  const int64_t latent_units = latent / kChunk;
  if (interleaved && latent % kChunk == 0 && rope % kChunk == 0 && latent_units <= 4 * 32 && rope / kChunk <= 32 &&
      aligned16(kv_a) && aligned16(cache) && aligned16(norm_weight) && aligned16(cos_table) && aligned16(sin_table)) {
    const auto blocks = static_cast<unsigned>((tokens + kLatentWarps - 1) / kLatentWarps);
    const auto launch = [&](auto kernel) {
      kernel<<<blocks, kLatentWarps * 32, 0, stream>>>(kv_a, tokens, static_cast<int>(latent), static_cast<int>(rope),
                                                       norm_weight, eps, positions, cos_table, sin_table, slot_mapping,
                                                       cache);
    };
    if (latent_units <= 32) {
      launch(write_latent_cache_warp_kernel<1, kFp8>);
    } else if (latent_units <= 64) {
      launch(write_latent_cache_warp_kernel<2, kFp8>);
    } else {
      launch(write_latent_cache_warp_kernel<4, kFp8>);
    }
    DSINFER_CUDA_CHECK_LAUNCH();
    return;
  }
  write_latent_cache_kernel<kFp8><<<static_cast<unsigned>(tokens), kLatentThreads, 0, stream>>>(
      kv_a, static_cast<int>(latent), static_cast<int>(rope), norm_weight, eps, positions, cos_table, sin_table,
      interleaved, slot_mapping, cache);
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

void write_latent_cache(const __nv_bfloat16* kv_a, int64_t tokens, int64_t latent, int64_t rope,
                        const float* norm_weight, float eps, const int32_t* positions, const float* cos_table,
                        const float* sin_table, bool interleaved, const int64_t* slot_mapping, __nv_bfloat16* cache,
                        cudaStream_t stream) {
  launch_write_latent_cache<false>(kv_a, tokens, latent, rope, norm_weight, eps, positions, cos_table, sin_table,
                                   interleaved, slot_mapping, cache, stream);
}

void write_latent_cache_fp8(const __nv_bfloat16* kv_a, int64_t tokens, int64_t latent, int64_t rope,
                            const float* norm_weight, float eps, const int32_t* positions, const float* cos_table,
                            const float* sin_table, bool interleaved, const int64_t* slot_mapping, uint8_t* cache,
                            cudaStream_t stream) {
  launch_write_latent_cache<true>(kv_a, tokens, latent, rope, norm_weight, eps, positions, cos_table, sin_table,
                                  interleaved, slot_mapping, cache, stream);
}

void write_cache_fp8(const __nv_bfloat16* latent, int64_t latent_row_stride, const int64_t* slot_mapping,
                     uint8_t* cache, int64_t tokens, int64_t width, cudaStream_t stream) {
  DSINFER_CHECK(tokens >= 0 && width >= 0 && latent_row_stride >= width, "write_cache (fp8): ", tokens, " rows of ",
                width, " with row stride ", latent_row_stride);
  if (tokens == 0 || width == 0) return;
  if (width % kChunk == 0 && latent_row_stride % kChunk == 0 && aligned16(latent) && reinterpret_cast<uintptr_t>(cache) % 8 == 0) {
    RowGrid launch = row_grid(tokens, width / kChunk, 1);
    write_cache_fp8_kernel<true><<<launch.grid, launch.block, 0, stream>>>(latent, latent_row_stride, width,
                                                                             slot_mapping, cache, tokens);
  } else {
    RowGrid launch = row_grid(tokens, width, 1);
    write_cache_fp8_kernel<false><<<launch.grid, launch.block, 0, stream>>>(latent, latent_row_stride, width,
                                                                              slot_mapping, cache, tokens);
  }
  DSINFER_CUDA_CHECK_LAUNCH();
}

void gather_cache(const __nv_bfloat16* cache, const int32_t* page_table_start, const int32_t* page_ids,
                  const int32_t* context_lens, const int32_t* out_row_start, __nv_bfloat16* out, int num_sequences,
                  int max_context_len, int page_size, int64_t width, cudaStream_t stream) {
  DSINFER_CHECK(num_sequences >= 0 && num_sequences <= kRowGridMaxBlocks && max_context_len >= 0 && page_size >= 1 &&
                    width >= 0,
                "gather_cache: unsupported batch (", num_sequences, " sequences, longest ", max_context_len,
                ", page size ", page_size, ", width ", width, ")");
  if (num_sequences == 0 || max_context_len == 0 || width == 0) return;
  if (width % 8 == 0 && aligned16(cache) && aligned16(out)) {
    RowGrid launch = row_grid(max_context_len, width / 8, num_sequences);
    gather_cache_kernel<uint4><<<launch.grid, launch.block, 0, stream>>>(
        reinterpret_cast<const uint4*>(cache), width / 8, page_table_start, page_ids, context_lens, out_row_start,
        page_size, reinterpret_cast<uint4*>(out));
  } else {
    RowGrid launch = row_grid(max_context_len, width, num_sequences);
    gather_cache_kernel<uint16_t><<<launch.grid, launch.block, 0, stream>>>(
        reinterpret_cast<const uint16_t*>(cache), width, page_table_start, page_ids, context_lens, out_row_start,
        page_size, reinterpret_cast<uint16_t*>(out));
  }
  DSINFER_CUDA_CHECK_LAUNCH();
}

void gather_cache_fp8(const uint8_t* cache, const int32_t* page_table_start, const int32_t* page_ids,
                      const int32_t* context_lens, const int32_t* out_row_start, __nv_bfloat16* out, int num_sequences,
                      int max_context_len, int page_size, int64_t width, cudaStream_t stream) {
  DSINFER_CHECK(num_sequences >= 0 && num_sequences <= kRowGridMaxBlocks && max_context_len >= 0 && page_size >= 1 &&
                    width >= 0,
                "gather_cache (fp8): unsupported batch (", num_sequences, " sequences, longest ", max_context_len,
                ", page size ", page_size, ", width ", width, ")");
  if (num_sequences == 0 || max_context_len == 0 || width == 0) return;
  if (width % kChunk == 0 && reinterpret_cast<uintptr_t>(cache) % 8 == 0 && aligned16(out)) {
    RowGrid launch = row_grid(max_context_len, width / kChunk, num_sequences);
    gather_cache_fp8_kernel<true><<<launch.grid, launch.block, 0, stream>>>(
        cache, width, page_table_start, page_ids, context_lens, out_row_start, page_size, out);
  } else {
    RowGrid launch = row_grid(max_context_len, width, num_sequences);
    gather_cache_fp8_kernel<false><<<launch.grid, launch.block, 0, stream>>>(
        cache, width, page_table_start, page_ids, context_lens, out_row_start, page_size, out);
  }
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
