// Private to the CUDA kernels: streamed 16-byte weight loads and packed-word conversions (bf16, e4m3),
// 16-byte bf16/f32 vector loads and stores with their float conversion, the 2D "row grid" launch
// shape of the row kernels (elementwise.cu, rope_cache.cu) with its kernel loop, the FP8 quantization
// of a 128-column group held by 16 or 8 lanes, and the host's 16-byte alignment test. Shared by the
// .cu files of src/backend/cuda; include from .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

namespace dsinfer::backend::cuda {

// ---- streamed weights and packed words ----

// 16 bytes read once (a weight stream): ld.global.nc with L1::no_allocate, so that the weights do not
// evict the activations that the kernel re-reads from L1. volatile: it stays under the bounds check
// that guards it (never hoisted into a speculative load).
__device__ __forceinline__ uint4 load_streaming(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// The two e4m3 values in the low 16 bits as floats (the lower-addressed byte in .x); exact.
__device__ __forceinline__ float2 fp8x2_to_float2(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xffffu), __NV_E4M3);
  return __half22float2(__half2(h));
}

// The bf16 in the low / high half of a 32-bit word (the lower-addressed one is low) as a float; exact.
__device__ __forceinline__ float bf16_low(uint32_t two) { return __uint_as_float(two << 16); }
__device__ __forceinline__ float bf16_high(uint32_t two) { return __uint_as_float(two & 0xffff0000u); }

// ---- 8 bf16 / 8 f32 as 16-byte accesses (addresses must be 16-byte aligned) ----

// 8 bf16 values as one 16-byte access.
struct alignas(16) Bf16x8 {
  __nv_bfloat162 pair[4];
};

__device__ __forceinline__ void unpack_bf16x8(const Bf16x8& in, float (&out)[8]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 two = __bfloat1622float2(in.pair[i]);
    out[2 * i] = two.x;
    out[2 * i + 1] = two.y;
  }
}

// Round to nearest even.
__device__ __forceinline__ Bf16x8 pack_bf16x8(const float (&in)[8]) {
  Bf16x8 out;
#pragma unroll
  for (int i = 0; i < 4; ++i) out.pair[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
  return out;
}

// The same as 16-byte words (uint4, the lower-addressed bf16 in the low half of .x): a Bf16x8 copy
// compiles to four 4-byte loads or stores, a uint4 to one, and each pair's word is taken whole.
__device__ __forceinline__ void unpack_bf16_words(const uint4& raw, float (&out)[8]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = bf16_low(words[i]);
    out[2 * i + 1] = bf16_high(words[i]);
  }
}

__device__ __forceinline__ uint4 pack_bf16_words(const float (&in)[8]) {
  uint32_t words[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 two = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
    words[i] = *reinterpret_cast<const uint32_t*>(&two);
  }
  return make_uint4(words[0], words[1], words[2], words[3]);
}

__device__ __forceinline__ void load_f32x8(const float* p, float (&out)[8]) {
  float4 low = reinterpret_cast<const float4*>(p)[0];
  float4 high = reinterpret_cast<const float4*>(p)[1];
  out[0] = low.x, out[1] = low.y, out[2] = low.z, out[3] = low.w;
  out[4] = high.x, out[5] = high.y, out[6] = high.z, out[7] = high.w;
}

__device__ __forceinline__ void store_f32x8(float* p, const float (&in)[8]) {
  reinterpret_cast<float4*>(p)[0] = make_float4(in[0], in[1], in[2], in[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(in[4], in[5], in[6], in[7]);
}

// kWidth consecutive elements as floats and back: 1, or 8 from a 16-byte aligned address (for
// kernels templated on whether the vector path applies).
template <int kWidth>
__device__ __forceinline__ void load_bf16(const __nv_bfloat16* p, float (&out)[kWidth]) {
  static_assert(kWidth == 1 || kWidth == 8);
  if constexpr (kWidth == 1) {
    out[0] = __bfloat162float(*p);
  } else {
    const Bf16x8 in = *reinterpret_cast<const Bf16x8*>(p);  // one 16-byte load, then convert
    unpack_bf16x8(in, out);
  }
}

template <int kWidth>
__device__ __forceinline__ void store_bf16(__nv_bfloat16* p, const float (&in)[kWidth]) {
  static_assert(kWidth == 1 || kWidth == 8);
  if constexpr (kWidth == 1) {
    *p = __float2bfloat16(in[0]);
  } else {
    *reinterpret_cast<Bf16x8*>(p) = pack_bf16x8(in);
  }
}

template <int kWidth>
__device__ __forceinline__ void load_f32(const float* p, float (&out)[kWidth]) {
  static_assert(kWidth == 1 || kWidth == 8);
  if constexpr (kWidth == 1) {
    out[0] = *p;
  } else {
    load_f32x8(p, out);
  }
}

// ---- row grid: rows of `units` independent units (elements or wider accesses) ----
//
// A 256-thread block is tx x ty: tx threads (the smallest power of two >= units, at most 256) along
// a row, ty = 256 / tx rows. grid.x covers a row's units, grid.y the rows (at most 65535 blocks; the
// kernel loops over the rest), grid.z is `depth` (e.g. one layer per sequence, at most 65535).

constexpr int kRowGridThreads = 256;
constexpr int64_t kRowGridMaxBlocks = 65535;  // grid.y and grid.z

struct RowGrid {
  dim3 grid;
  dim3 block;
};

inline RowGrid row_grid(int64_t rows, int64_t units, int64_t depth = 1) {
  int tx = 1;
  while (tx < units && tx < kRowGridThreads) tx *= 2;
  int ty = kRowGridThreads / tx;
  int64_t blocks_x = (units + tx - 1) / tx;
  int64_t blocks_y = std::max<int64_t>(1, std::min((rows + ty - 1) / ty, kRowGridMaxBlocks));
  DSINFER_CHECK(blocks_x <= INT32_MAX && depth <= kRowGridMaxBlocks, "CUDA row kernel: ", units,
                " units per row (or a depth of ", depth, ") exceed the grid");
  return {dim3(static_cast<unsigned>(blocks_x), static_cast<unsigned>(blocks_y), static_cast<unsigned>(depth)),
          dim3(tx, ty)};
}

// The loop of a row-grid kernel: body(unit, row) for each unit < units of each row < rows this
// thread owns (its unit along blockIdx.x/threadIdx.x, its rows along blockIdx.y/threadIdx.y).
template <typename Body>
__device__ __forceinline__ void for_each_row_unit(int64_t units, int64_t rows, Body body) {
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (unit >= units) return;
  const int64_t row_step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t row = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; row < rows; row += row_step)
    body(unit, row);
}

// The FP8 quantization of one 128-column group held by the 16 lanes of a half-warp, 8 bf16 values a
// lane (or by 8 lanes, 16 values a lane), with quantize_fp8_per_token_group's bits (fp8_gemm.h):
//   scale = amax / 448 (1 where that is not > 0), q = e4m3(v / scale), round to nearest, saturating.
// quantize_fp8_per_token_group's kernel (fp8_gemm.cu) and the fused kernels that end in it (norm.cu,
// elementwise.cu) all call it.
//
// Cost: ~10 instructions an element on the fast path (~20 as divisions). It runs inside memory-bound
// kernels whose issue budget at the copy rate is ~24 instructions an element (quantization alone)
// to ~40 (silu_mul_quant_fp8, which spends ~20 on SiLU itself), so it avoids what plain division
// costs, the range check (FCHK) and branch of every quotient, without changing a bit:
//   - amax is found on the bf16 bits (16-bit integer max of the magnitudes, two to an instruction):
//     magnitudes order as their bits do, and a NaN's bits exceed every number's, so a group holding
//     a NaN or an inf never takes the fast path;
//   - when amax is 0 or in [448 * 2^-40, 448 * 2^40] (the fast path, uniform over the half-warp):
//     scale = amax / 448 as e = amax * RN(1/448) corrected once by the exact remainder (Markstein's
//     theorem: the correctly rounded quotient; checked against the division for every float in that
//     range), so scale is in [2^-40, 2^40] (1 for a zero group);
//   - v / scale as the division's own fast path (nvcc's div.rn for sm_90: y = 1 / scale by MUFU.RCP and
//     one Newton step, q0 = v y, the exact remainder by FMA, one correction) with the remainder's sign
//     flipped: r = scale q0 - v, q = q0 - y r. For |v| >= 2^-60 that is the same sum, so the
//     division's bits (checked on the CPU for every bf16 amax in range, every bf16 |v| <= amax and y
//     within 2 ulps of 1 / scale); for smaller |v| (zeros included) q keeps v's sign and stays below
//     2^-12, so both convert to the same e4m3 zero. The flipped remainder is what keeps a zero's sign
//     (v - scale q0 would turn -0 into +0), so no per-element test is needed;
//   - otherwise (a NaN, an inf, a tiny or a huge group: rare) amax again as floats (fmaxf skips a
//     NaN, as quantize_fp8_per_token_group's does) and the divisions themselves.
// The fast path's amax range as bf16 bits (1.75 * 2^-32 and 1.75 * 2^48, both bf16 values): scale =
// amax / 448 in [2^-40, 2^40].
inline constexpr uint32_t kFp8FastAmaxMinBits = 0x2fe0u;  // 448 * 2^-40
inline constexpr uint32_t kFp8FastAmaxMaxBits = 0x57e0u;  // 448 * 2^40
inline constexpr float kFp8InverseMax = 1.0f / kFp8E4M3Max;  // RN(1 / 448)

// Held as 2 units a lane by 8 lanes (silu_mul_quant_fp8), a group takes 3 shuffle steps instead of 4
// and one scale computation per 16 elements instead of per 8: the same bits, ~1 instruction an
// element fewer.
//
// `words`: this lane's kUnits x 8 bf16 values of the group (16 bytes each in memory order), held by
// 16 / kUnits consecutive lanes, aligned to their count. Every lane of the warp must call it (lanes
// past the row with zero words). Returns the group's scale; `packed` gets each unit's 8 e4m3 bytes in
// memory order.
template <int kUnits>
__device__ __forceinline__ float quantize_fp8_lane_group(const uint4 (&words)[kUnits], uint2 (&packed)[kUnits]) {
  static_assert(kUnits == 1 || kUnits == 2, "a group is 16 units over 16 or 8 lanes");
  constexpr int kLanes = 16 / kUnits;
  constexpr uint32_t kMagnitudes = 0x7fff7fffu;
  auto unit_pairs = [](const uint4& w) {
    return __vmaxu2(__vmaxu2(w.x & kMagnitudes, w.y & kMagnitudes), __vmaxu2(w.z & kMagnitudes, w.w & kMagnitudes));
  };
  uint32_t pairs = unit_pairs(words[0]);
  if constexpr (kUnits == 2) pairs = __vmaxu2(pairs, unit_pairs(words[1]));
  uint32_t amax_bits = max(pairs & 0xffffu, pairs >> 16);
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) {
    amax_bits = max(amax_bits, __shfl_xor_sync(0xffffffffu, amax_bits, offset));
  }
  float v[kUnits][8];
#pragma unroll
  for (int u = 0; u < kUnits; ++u) {
    const uint32_t word[4] = {words[u].x, words[u].y, words[u].z, words[u].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[u][2 * i] = bf16_low(word[i]);
      v[u][2 * i + 1] = bf16_high(word[i]);
    }
  }
  float scale;
  float quotient[kUnits][8];
  if (amax_bits <= kFp8FastAmaxMaxBits && (amax_bits >= kFp8FastAmaxMinBits || amax_bits == 0)) {
    const float amax = __uint_as_float(amax_bits << 16);
    const float estimate = __fmul_rn(amax, kFp8InverseMax);
    scale = __fmaf_rn(__fmaf_rn(-kFp8E4M3Max, estimate, amax), kFp8InverseMax, estimate);
    if (!(scale > 0.0f)) scale = 1.0f;  // a zero group: any scale gives zeros
    float approximate;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(approximate) : "f"(scale));
    const float y = __fmaf_rn(approximate, __fmaf_rn(-scale, approximate, 1.0f), approximate);
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float q0 = __fmul_rn(v[u][e], y);
        quotient[u][e] = __fmaf_rn(-y, __fmaf_rn(scale, q0, -v[u][e]), q0);
      }
    }
  } else {
    // Uniform over the group's lanes (amax_bits is the group's), not the warp: shuffle within them.
    uint32_t lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    const unsigned group_lanes = ((1u << kLanes) - 1u) << (lane & (32u - kLanes));
    float amax = 0.0f;
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
#pragma unroll
      for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(v[u][e]));
    }
#pragma unroll
    for (int offset = kLanes / 2; offset > 0; offset /= 2) {
      amax = fmaxf(amax, __shfl_xor_sync(group_lanes, amax, offset));
    }
    scale = amax / kFp8E4M3Max;
    if (!(scale > 0.0f)) scale = 1.0f;  // an underflow, or only NaNs: as quantize_fp8_per_token_group
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
#pragma unroll
      for (int e = 0; e < 8; ++e) quotient[u][e] = v[u][e] / scale;
    }
  }
#pragma unroll
  for (int u = 0; u < kUnits; ++u) {
    uint32_t bytes[2];
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      const __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(make_float2(quotient[u][4 * w], quotient[u][4 * w + 1]),
                                                               __NV_SATFINITE, __NV_E4M3);
      const __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(
          make_float2(quotient[u][4 * w + 2], quotient[u][4 * w + 3]), __NV_SATFINITE, __NV_E4M3);
      bytes[w] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
    }
    packed[u] = make_uint2(bytes[0], bytes[1]);
  }
  return scale;
}

// The 16-lane form: 8 bf16 values a lane, the group on the 16 lanes of a half-warp.
__device__ __forceinline__ float quantize_fp8_half_warp_group(const uint4& words, uint2& packed) {
  const uint4 held[1] = {words};
  uint2 out[1];
  const float scale = quantize_fp8_lane_group<1>(held, out);
  packed = out[0];
  return scale;
}

// ---- host ----

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace dsinfer::backend::cuda
