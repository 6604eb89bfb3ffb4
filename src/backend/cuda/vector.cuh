// Private to the CUDA kernels: streamed 16-byte weight loads and packed-word conversions (bf16, e4m3),
// 16-byte bf16/f32 vector loads and stores with their float conversion, the 2D "row grid" launch
// shape of the row kernels (elementwise.cu, rope_cache.cu) with its kernel loop, the FP8 quantization
// of a half-warp's 128-column group, and the host's 16-byte alignment test. Shared by the .cu files of
// src/backend/cuda; include from .cu files only.
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

// quantize_fp8_per_token_group's arithmetic (fp8_gemm.h) for the 8 values of this lane, one sixteenth
// of a 128-column group held by the 16 lanes of its half-warp (the fused quantizing kernels of norm.cu
// and elementwise.cu). Every lane of the warp must call it (lanes past the row with zeros). Returns
// the group's scale; `packed` gets the 8 e4m3 bytes in memory order.
// The quotients v / scale: the division's own fast path (nvcc's div.rn for sm_90: y = 1 / scale by
// MUFU.RCP and one Newton step, q0 = v y, the remainder v - scale q0 exact by FMA, one correction),
// its reciprocal shared by the 8, without the per-element range check (FCHK) and branch that the
// division adds. Taken when scale is in [2^-40, 2^40] and no v is NaN or inf, for |v| >= 2^-60:
// every operand, the remainder and the quotient (>= 2^-100) are then normal, where that check
// passes, so the bits are the division's. A |v| < 2^-60 stands for its own quotient: both are below
// 2^-20 with v's sign, so both convert to the same e4m3 zero. Otherwise (rare: a huge or tiny group,
// inf, NaN) the divisions themselves.
__device__ __forceinline__ float quantize_fp8_half_warp_group(const float (&v)[8], uint2& packed) {
  float amax = 0.0f;
  float nan_probe = 0.0f;  // stays zero unless some v is NaN or inf (v * 0)
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    amax = fmaxf(amax, fabsf(v[e]));
    nan_probe = __fmaf_rn(v[e], 0.0f, nan_probe);
  }
#pragma unroll
  for (int offset = 8; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  float scale = amax / kFp8E4M3Max;
  if (!(scale > 0.0f)) scale = 1.0f;  // a zero group (or an underflow): any scale gives zeros
  float quotient[8];
  if (scale >= 0x1p-40f && scale <= 0x1p40f && nan_probe == 0.0f) {
    float approximate;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(approximate) : "f"(scale));
    const float y = __fmaf_rn(approximate, __fmaf_rn(-scale, approximate, 1.0f), approximate);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float q0 = __fmaf_rn(v[e], y, 0.0f);
      quotient[e] = fabsf(v[e]) >= 0x1p-60f ? __fmaf_rn(y, __fmaf_rn(-scale, q0, v[e]), q0) : v[e];
    }
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) quotient[e] = v[e] / scale;
  }
  uint32_t words[2];
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    const __nv_fp8x2_storage_t lo =
        __nv_cvt_float2_to_fp8x2(make_float2(quotient[4 * w], quotient[4 * w + 1]), __NV_SATFINITE, __NV_E4M3);
    const __nv_fp8x2_storage_t hi =
        __nv_cvt_float2_to_fp8x2(make_float2(quotient[4 * w + 2], quotient[4 * w + 3]), __NV_SATFINITE, __NV_E4M3);
    words[w] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
  packed = make_uint2(words[0], words[1]);
  return scale;
}

// ---- host ----

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace dsinfer::backend::cuda
