// Activation quantization for the block-scaled FP8 GEMM, and the fallback GEMM (see fp8_gemm.h).
//
// quantize_fp8_per_token_group: x [rows, cols] bf16 -> q [padded_rows, cols] e4m3 and scales
//   [cols / 128, padded_rows] f32. Roofline: reads 2 bytes and writes 1 byte per element, +4 bytes per
//   128 elements (memory bound; 7168 x 4096 tokens is ~88 MB, ~21 us at 4.2 TB/s; at decode, 256 x
//   7168 is 5.5 MB, ~1.3 us plus one memory round trip: latency bound).
//   Launch (x 16-byte aligned, row stride a multiple of 8): 16-byte units, a 128-column group on the
//   16 lanes of a half-warp (vector.cuh: amax by 4 shuffle steps, the division's fast path
//   without its per-element check). A 128-thread block is tx x ty, tx (128, 64, 32 or 16) the widest
//   that divides a row's units, so no lane idles (7168 columns: 7 blocks across a row); each thread
//   takes one unit of kQuantRowsPerThread rows ty apart, its loads issued before any is used. grid.y
//   covers the padded rows (<= 65535, looping beyond); padding rows quantize zeros (scale 1). At 256
//   rows x 7168 that is 896 blocks, all resident at once (12 a SM fit), so every load is issued at
//   the start: one memory round trip. (The form below, with one 8-byte load a lane, launched four
//   times the threads, 1792 blocks of 256 at 256 rows, more than fit at once, and a division with
//   its check per element: ~6 us there, ~2.4 us at 64 rows, on an H200.) Otherwise (x only 8-byte
//   aligned): one warp per (token, group), 8 warps per block; lane l takes columns 4l .. 4l + 3 of
//   its group (one 8-byte load, one 4-byte store), a warp max gives amax, plain divisions the
//   quotients.
//
// gemm_fallback: y[b, t, n] = sum_k x[b, t, k] * w(b, n, k), float32 FMAs on the CUDA cores.
//   Roofline: the weight is read once per block of up to 16 token rows, so at decode (rows <= 16) the
//   kernel streams n * k * sizeof(W) bytes (DeepSeek's 7168 x 18432 FP8 MLP: 132 MB, ~40 us at
//   3.35 TB/s); FLOPs are 2 * rows * n * k, compute bound past ~8 rows for FP8 weights (the FP32 pipe
//   gives ~16 FMAs per weight byte at 16 rows), so it is a fallback, not the fast path for prefill.
//   Launch: grid (ceil(n / 4), ceil(rows / R), batch), 128 threads. A block computes a tile of
//   R x 4 outputs (R = 1, 2, 4, 8 or 16 token rows, picked from rows; 4 weight rows). Its 128 threads
//   split K: thread i takes the 16-byte weight chunks i, i + 128, ... of each of the 4 weight rows
//   (consecutive threads read consecutive chunks: coalesced). A thread loads U chunks of each row
//   (U = 4 at R <= 2, 2 at R = 4, 1 from R = 8 on: 4U independent 16-byte loads, L1::no_allocate)
//   before converting any, so a DeepSeek row of K = 7168 FP8 weights is one round trip per block.
//   The chunks are dequantized to float (a 16-element chunk never straddles a 128-column block) and
//   FMAd against the same columns of the R token rows (bf16 16-byte loads through L1: x is small and
//   re-read by every block); for FP8 at R <= 4 the block scale multiplies each chunk's partial sum
//   (one FMA per chunk and row), from R = 8 on it multiplies the weights. At the end a warp shuffle
//   and a shared-memory sum over the 4 warps (fixed order) give each output. Rows and columns past
//   the edge read the last valid row and are not written. Unaligned shapes take a scalar path (one
//   element per thread and step).
#include "backend/cuda/fp8_gemm.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/vector.cuh"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;
using fp8 = __nv_fp8_e4m3;

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

constexpr int kQuantThreads = 256;
constexpr int kQuantWarps = kQuantThreads / kWarpSize;
constexpr int kQuantVectorThreads = 128;
constexpr int kQuantRowsPerThread = 2;
constexpr int kQuantUnit = 8;  // bf16 per 16-byte unit
constexpr int kQuantGroupUnits = kFp8Block / kQuantUnit;  // 16: a half-warp

constexpr int kGemmWarps = 4;
constexpr int kGemmThreads = kGemmWarps * kWarpSize;
constexpr int kGemmCols = 4;  // weight rows (output features) per block
constexpr int kMaxGridYZ = 65535;

bool aligned(const void* p, int64_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

struct alignas(8) Bf16x4 {
  __nv_bfloat162 pair[2];
};

// A pair of bf16 (low half: the element at the lower address) as floats; exact.
__device__ __forceinline__ void unpack_bf16x2(uint32_t two, float& first, float& second) {
  first = __uint_as_float(two << 16);
  second = __uint_as_float(two & 0xffff0000u);
}

// ---------------------------------------------------------------------------------------------
// Activation quantization.

__global__ void __launch_bounds__(kQuantThreads)
    quantize_kernel(const bf16* __restrict__ x, int64_t x_row_stride, int64_t rows, int64_t padded_rows,
                    int64_t cols, fp8* __restrict__ q, float* __restrict__ scales) {
  const int64_t groups = cols / kFp8Block;
  const int64_t item = (static_cast<int64_t>(blockIdx.x) * kQuantThreads + threadIdx.x) / kWarpSize;
  if (item >= padded_rows * groups) return;  // the same for all lanes of a warp
  const int lane = threadIdx.x % kWarpSize;
  const int64_t t = item / groups;
  const int64_t g = item % groups;
  const int64_t col = g * kFp8Block + 4 * lane;

  float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (t < rows) {
    Bf16x4 in = *reinterpret_cast<const Bf16x4*>(x + t * x_row_stride + col);
    float2 lo = __bfloat1622float2(in.pair[0]);
    float2 hi = __bfloat1622float2(in.pair[1]);
    v[0] = lo.x, v[1] = lo.y, v[2] = hi.x, v[3] = hi.y;
  }
  float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, offset));
  // amax == 0 (a zero group or a padding row), or a scale that underflows: any scale quantizes the
  // group to zeros; 1 keeps the product finite.
  float scale = amax / kFp8E4M3Max;
  if (!(scale > 0.0f)) scale = 1.0f;

  // The first element of each pair lands in the low byte (memory order).
  __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(make_float2(v[0] / scale, v[1] / scale), __NV_SATFINITE, __NV_E4M3);
  __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(make_float2(v[2] / scale, v[3] / scale), __NV_SATFINITE, __NV_E4M3);
  *reinterpret_cast<uint32_t*>(q + t * cols + col) = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  if (lane == 0) scales[g * padded_rows + t] = scale;
}

// 16-byte units (see the top): unit blockIdx.x * blockDim.x + threadIdx.x of rows base + threadIdx.y
// + j * blockDim.y (j < kQuantRowsPerThread), base stepping by the rows of the whole grid.
__global__ void __launch_bounds__(kQuantVectorThreads)
    quantize_vector_kernel(const bf16* __restrict__ x, int64_t x_row_stride, int64_t rows, int64_t padded_rows,
                           int64_t cols, fp8* __restrict__ q, float* __restrict__ scales) {
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t rows_per_step = static_cast<int64_t>(blockDim.y) * kQuantRowsPerThread;
  // The loop and the quantization are uniform over a warp (it may span two rows when blockDim.x is
  // 16): rows past padded_rows quantize zeros and store nothing.
  for (int64_t base = blockIdx.y * rows_per_step; base < padded_rows; base += gridDim.y * rows_per_step) {
    uint4 raw[kQuantRowsPerThread];
#pragma unroll
    for (int j = 0; j < kQuantRowsPerThread; ++j) {
      const int64_t row = base + threadIdx.y + j * blockDim.y;
      raw[j] = make_uint4(0u, 0u, 0u, 0u);  // padding rows: zeros, scale 1
      if (row < rows) raw[j] = load_streaming(x + row * x_row_stride + unit * kQuantUnit);
    }
#pragma unroll
    for (int j = 0; j < kQuantRowsPerThread; ++j) {
      const int64_t row = base + threadIdx.y + j * blockDim.y;
      uint2 packed;
      const float scale = quantize_fp8_half_warp_group(raw[j], packed);
      if (row < padded_rows) {
        *reinterpret_cast<uint2*>(q + row * cols + unit * kQuantUnit) = packed;
        if (unit % kQuantGroupUnits == 0) scales[unit / kQuantGroupUnits * padded_rows + row] = scale;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Fallback GEMM.

// Weight loads. The vector path loads raw 16-byte chunks first (all of a thread's chunks of one round,
// so that several loads are in flight before any is used) and converts them afterwards.

// The weights are read with vector.cuh's load_streaming (L1::no_allocate: they do not evict the
// activations, re-read by every block, from L1).

// One raw 16-byte chunk as kVec = 16 / sizeof(W) floats (unscaled for FP8).
template <typename W, int kVec>
__device__ __forceinline__ void convert_weights(const uint4& raw, float (&out)[kVec]);

template <>
__device__ __forceinline__ void convert_weights<fp8, 16>(const uint4& raw, float (&out)[16]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    // e4m3 -> f16 is exact (e4m3's range and precision fit in f16), f16 -> f32 too. The first
    // element (lowest address) is the low byte.
    __half2 lo = __half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(words[i] & 0xffffu), __NV_E4M3));
    __half2 hi = __half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(words[i] >> 16), __NV_E4M3));
    float2 a = __half22float2(lo);
    float2 b = __half22float2(hi);
    out[4 * i + 0] = a.x, out[4 * i + 1] = a.y, out[4 * i + 2] = b.x, out[4 * i + 3] = b.y;
  }
}

template <>
__device__ __forceinline__ void convert_weights<bf16, 8>(const uint4& raw, float (&out)[8]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) unpack_bf16x2(words[i], out[2 * i], out[2 * i + 1]);
}

template <>
__device__ __forceinline__ void convert_weights<float, 4>(const uint4& raw, float (&out)[4]) {
  out[0] = __uint_as_float(raw.x), out[1] = __uint_as_float(raw.y);
  out[2] = __uint_as_float(raw.z), out[3] = __uint_as_float(raw.w);
}

// One weight as a float (unscaled for FP8): the scalar path for unaligned or odd shapes.
template <typename W>
__device__ __forceinline__ float load_weight(const W* p) {
  if constexpr (std::is_same_v<W, bf16>) {
    return __bfloat162float(*p);
  } else {
    return static_cast<float>(*p);
  }
}

// kVec consecutive bf16 activations as floats (kVec = 16, 8, 4 or 1; aligned to min(16, 2 kVec)
// bytes): whole 16- or 8-byte loads (x is re-read by every block, so it goes through L1).
template <int kVec>
__device__ __forceinline__ void load_activations(const bf16* p, float (&out)[kVec]) {
  if constexpr (kVec >= 8) {
#pragma unroll
    for (int part = 0; part < kVec / 8; ++part) {
      const uint4 in = reinterpret_cast<const uint4*>(p)[part];
      const uint32_t words[4] = {in.x, in.y, in.z, in.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) unpack_bf16x2(words[i], out[8 * part + 2 * i], out[8 * part + 2 * i + 1]);
    }
  } else if constexpr (kVec == 4) {
    const uint2 in = *reinterpret_cast<const uint2*>(p);
    unpack_bf16x2(in.x, out[0], out[1]);
    unpack_bf16x2(in.y, out[2], out[3]);
  } else {
    static_assert(kVec == 1);
    out[0] = __bfloat162float(*p);
  }
}

template <typename Out>
__device__ __forceinline__ void store_output(Out* p, float value) {
  if constexpr (std::is_same_v<Out, float>) {
    *p = value;
  } else {
    *p = __float2bfloat16_rn(value);
  }
}

// 16-byte chunks per weight row that a thread loads before using any (vector path): 4 x 4 rows x
// 16 B = 256 B in flight per thread at 1-2 token rows, where the kernel is bound by memory latency
// and bandwidth; fewer at 4 rows (registers); 1 from 8 rows on, where the FP32 FMAs bound it.
template <int kRows, int kVec>
__host__ __device__ constexpr int gemm_unroll() {
  if constexpr (kVec == 1) {
    return 1;
  } else if constexpr (kRows <= 2) {
    return 4;
  } else if constexpr (kRows <= 4) {
    return 2;
  } else {
    return 1;
  }
}

template <typename W, typename Out, int kRows, int kVec>
__global__ void __launch_bounds__(kGemmThreads) gemm_fallback_kernel(FallbackGemm g) {
  constexpr bool kFp8 = std::is_same_v<W, fp8>;
  constexpr int kUnroll = gemm_unroll<kRows, kVec>();
  // FP8 from 8 token rows on: scale the 16 weights of a chunk once (16 multiplies) rather than each
  // row's partial sum (kRows FMAs), which also needs fewer registers.
  constexpr bool kScaleWeights = kFp8 && kRows >= 8;
  static_assert(kVec == 1 || kVec * sizeof(W) == 16, "the vector path loads 16-byte chunks");
  static_assert(kVec == 1 || kFp8Block % kVec == 0, "a chunk must not straddle a 128-column scale block");
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kGemmCols;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kRows;
  const int64_t b = blockIdx.z;

  const W* w_rows[kGemmCols];
#pragma unroll
  for (int c = 0; c < kGemmCols; ++c) {
    const int64_t n = n0 + c < g.n ? n0 + c : g.n - 1;
    w_rows[c] = static_cast<const W*>(g.w) + b * g.w_batch_stride + n * g.k;
  }
  // The block's kGemmCols weight rows n0 .. n0 + 3 share one 128-row scale block (n0 is a multiple
  // of 4, which divides 128); rows past g.n read another row's data and are not written.
  const float* scale_row = nullptr;
  if constexpr (kFp8) scale_row = g.w_scale + b * g.scale_batch_stride + (n0 / kFp8Block) * g.scale_row_stride;
  const bf16* x0 = g.x + b * g.x_batch_stride + t0 * g.x_row_stride;
  const int last_row = static_cast<int>(g.rows - t0 < kRows ? g.rows - t0 : kRows) - 1;  // later rows re-read it

  float acc[kRows][kGemmCols];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < kGemmCols; ++c) acc[r][c] = 0.0f;

  const int64_t chunks = g.k / kVec;
  if constexpr (kVec == 1) {
    // Scalar path (unaligned pointers or strides, k not a multiple of kVec): one element at a time.
    for (int64_t k = threadIdx.x; k < g.k; k += kGemmThreads) {
      float scale = 1.0f;
      if constexpr (kFp8) scale = scale_row[k / kFp8Block];
      float w[kGemmCols];
#pragma unroll
      for (int c = 0; c < kGemmCols; ++c) w[c] = load_weight(w_rows[c] + k) * scale;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float xv = __bfloat162float(x0[min(r, last_row) * g.x_row_stride + k]);
#pragma unroll
        for (int c = 0; c < kGemmCols; ++c) acc[r][c] = fmaf(xv, w[c], acc[r][c]);
      }
    }
  } else {
    // Vector path. A round covers kUnroll * 128 chunks of each weight row: thread i takes chunks
    // base + u * 128 (u < kUnroll), so each load instruction of a warp reads 512 consecutive bytes.
    // All of a round's loads are issued before any is used; chunks past the end of the row (the
    // last round of a row whose chunk count is not a multiple of kUnroll * 128) are not loaded
    // and not used.
    for (int64_t base = threadIdx.x; base < chunks; base += static_cast<int64_t>(kGemmThreads) * kUnroll) {
      uint4 raw[kUnroll][kGemmCols];
      float scale[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t chunk = base + static_cast<int64_t>(u) * kGemmThreads;
        scale[u] = 1.0f;
        if (chunk < chunks) {
#pragma unroll
          for (int c = 0; c < kGemmCols; ++c) raw[u][c] = load_streaming(w_rows[c] + chunk * kVec);
          if constexpr (kFp8) scale[u] = __ldg(scale_row + chunk * kVec / kFp8Block);
        } else {
#pragma unroll
          for (int c = 0; c < kGemmCols; ++c) raw[u][c] = make_uint4(0u, 0u, 0u, 0u);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t chunk = base + static_cast<int64_t>(u) * kGemmThreads;
        if (chunk >= chunks) break;  // chunk grows with u: the rest of the round is past the end too
        const int64_t k = chunk * kVec;
        float w[kGemmCols][kVec];
#pragma unroll
        for (int c = 0; c < kGemmCols; ++c) {
          convert_weights<W, kVec>(raw[u][c], w[c]);
          if constexpr (kScaleWeights) {
#pragma unroll
            for (int i = 0; i < kVec; ++i) w[c][i] *= scale[u];
          }
        }
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float xv[kVec];
          load_activations<kVec>(x0 + min(r, last_row) * g.x_row_stride + k, xv);
#pragma unroll
          for (int c = 0; c < kGemmCols; ++c) {
            if constexpr (kFp8 && !kScaleWeights) {
              // The chunk lies in one 128-column block: sum x * fp8 over it, then apply the block
              // scale once (one multiply per chunk and row rather than one per weight).
              float part = 0.0f;
#pragma unroll
              for (int i = 0; i < kVec; ++i) part = fmaf(xv[i], w[c][i], part);
              acc[r][c] = fmaf(part, scale[u], acc[r][c]);
            } else {
#pragma unroll
              for (int i = 0; i < kVec; ++i) acc[r][c] = fmaf(xv[i], w[c][i], acc[r][c]);
            }
          }
        }
      }
    }
  }

  __shared__ float partial[kGemmWarps][kRows][kGemmCols];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int c = 0; c < kGemmCols; ++c) {
      float v = acc[r][c];
#pragma unroll
      for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
      if (lane == 0) partial[warp][r][c] = v;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kRows * kGemmCols; i += kGemmThreads) {
    const int r = i / kGemmCols;
    const int c = i % kGemmCols;
    const int64_t t = t0 + r;
    const int64_t n = n0 + c;
    if (t >= g.rows || n >= g.n) continue;
    float sum = 0.0f;
#pragma unroll
    for (int wi = 0; wi < kGemmWarps; ++wi) sum += partial[wi][r][c];
    store_output(static_cast<Out*>(g.y) + b * g.y_batch_stride + t * g.y_row_stride + n, sum);
  }
}

template <typename W, typename Out, int kRows, int kVec>
void launch_tile(const FallbackGemm& g, cudaStream_t stream) {
  const int64_t row_blocks = (g.rows + kRows - 1) / kRows;
  DSINFER_CHECK(row_blocks <= kMaxGridYZ, "gemm_fallback: ", g.rows, " rows exceed the grid limit");
  const dim3 grid(static_cast<unsigned>((g.n + kGemmCols - 1) / kGemmCols), static_cast<unsigned>(row_blocks),
                  static_cast<unsigned>(g.batch));
  gemm_fallback_kernel<W, Out, kRows, kVec><<<grid, kGemmThreads, 0, stream>>>(g);
  DSINFER_CUDA_CHECK_LAUNCH();
}

template <typename W, typename Out, int kVec>
void launch_rows(const FallbackGemm& g, cudaStream_t stream) {
  if (g.rows <= 1) {
    launch_tile<W, Out, 1, kVec>(g, stream);
  } else if (g.rows <= 2) {
    launch_tile<W, Out, 2, kVec>(g, stream);
  } else if (g.rows <= 4) {
    launch_tile<W, Out, 4, kVec>(g, stream);
  } else if (g.rows <= 8) {
    launch_tile<W, Out, 8, kVec>(g, stream);
  } else {
    launch_tile<W, Out, 16, kVec>(g, stream);
  }
}

// 16-byte weight loads and min(16, 2 kVec)-byte activation loads need every row and batch start
// aligned to them.
template <typename W>
bool vector_loads_ok(const FallbackGemm& g) {
  constexpr int64_t kVec = 16 / sizeof(W);
  constexpr int64_t kXAlign = std::min<int64_t>(16, 2 * kVec);
  const int64_t x_bytes = sizeof(bf16);
  return g.k % kVec == 0 && aligned(g.w, 16) && (g.w_batch_stride * static_cast<int64_t>(sizeof(W))) % 16 == 0 &&
         aligned(g.x, kXAlign) && (g.x_row_stride * x_bytes) % kXAlign == 0 && (g.x_batch_stride * x_bytes) % kXAlign == 0;
}

template <typename W, typename Out>
void launch_vector_or_scalar(const FallbackGemm& g, cudaStream_t stream) {
  if (vector_loads_ok<W>(g)) {
    launch_rows<W, Out, 16 / sizeof(W)>(g, stream);
  } else {
    launch_rows<W, Out, 1>(g, stream);
  }
}

template <typename W>
void launch_weight(const FallbackGemm& g, cudaStream_t stream) {
  if (g.y_dtype == DType::kF32) {
    launch_vector_or_scalar<W, float>(g, stream);
  } else {
    launch_vector_or_scalar<W, bf16>(g, stream);
  }
}

}  // namespace

void quantize_fp8_per_token_group(const bf16* x, int64_t x_row_stride, int64_t rows, int64_t padded_rows,
                                  int64_t cols, fp8* q, float* scales, cudaStream_t stream) {
  DSINFER_CHECK(rows >= 0 && padded_rows >= rows && cols > 0 && cols % kFp8Block == 0,
                "quantize_fp8_per_token_group: bad shape rows ", rows, ", padded_rows ", padded_rows, ", cols ", cols,
                " (cols must be a positive multiple of 128)");
  DSINFER_CHECK(x_row_stride >= cols && x_row_stride % 4 == 0 && aligned(x, 8) && aligned(q, 4) && aligned(scales, 4),
                "quantize_fp8_per_token_group: x needs 8-byte alignment and a row stride that is a multiple of 4 "
                ">= cols (got ",
                x_row_stride, ")");
  if (padded_rows == 0) return;
  if (aligned(x, 16) && x_row_stride % kQuantUnit == 0 && aligned(q, 8)) {
    const int64_t units = cols / kQuantUnit;  // a multiple of 16
    int tx = kQuantVectorThreads;
    while (units % tx != 0) tx /= 2;
    const int ty = kQuantVectorThreads / tx;
    const int64_t row_blocks = (padded_rows + ty * kQuantRowsPerThread - 1) / (ty * kQuantRowsPerThread);
    DSINFER_CHECK(units / tx <= INT32_MAX, "quantize_fp8_per_token_group: ", cols, " columns exceed the grid");
    const dim3 grid(static_cast<unsigned>(units / tx),
                    static_cast<unsigned>(std::min<int64_t>(row_blocks, kMaxGridYZ)));
    quantize_vector_kernel<<<grid, dim3(tx, ty), 0, stream>>>(x, x_row_stride, rows, padded_rows, cols, q, scales);
    DSINFER_CUDA_CHECK_LAUNCH();
    return;
  }
  const int64_t warps = padded_rows * (cols / kFp8Block);
  const int64_t blocks = (warps + kQuantWarps - 1) / kQuantWarps;
  quantize_kernel<<<static_cast<unsigned>(blocks), kQuantThreads, 0, stream>>>(x, x_row_stride, rows, padded_rows,
                                                                              cols, q, scales);
  DSINFER_CUDA_CHECK_LAUNCH();
}

void gemm_fallback(const FallbackGemm& g, cudaStream_t stream) {
  DSINFER_CHECK(g.rows >= 0 && g.n > 0 && g.k > 0 && g.batch >= 1 && g.batch <= kMaxGridYZ,
                "gemm_fallback: bad shape rows ", g.rows, ", n ", g.n, ", k ", g.k, ", batch ", g.batch);
  DSINFER_CHECK(g.x != nullptr && g.w != nullptr && g.y != nullptr, "gemm_fallback: null x, w or y");
  DSINFER_CHECK(g.x_row_stride >= g.k && g.y_row_stride >= g.n, "gemm_fallback: row strides (x ", g.x_row_stride,
                ", y ", g.y_row_stride, ") must be at least k ", g.k, " and n ", g.n);
  DSINFER_CHECK(g.y_dtype == DType::kBF16 || g.y_dtype == DType::kF32, "gemm_fallback: output must be bf16 or f32, got ",
                dtype_name(g.y_dtype));
  if (g.w_dtype == DType::kF8E4M3) {
    DSINFER_CHECK(g.w_scale != nullptr && g.scale_row_stride >= (g.k + kFp8Block - 1) / kFp8Block,
                  "gemm_fallback: an FP8 weight needs its block scales with a row stride >= ceil(k / 128)");
  }
  if (g.rows == 0) return;
  switch (g.w_dtype) {
    case DType::kF8E4M3:
      launch_weight<fp8>(g, stream);
      break;
    case DType::kBF16:
      launch_weight<bf16>(g, stream);
      break;
    case DType::kF32:
      launch_weight<float>(g, stream);
      break;
    default:
      throw Error(str_cat("gemm_fallback: weights must be f8e4m3, bf16 or f32, got ", dtype_name(g.w_dtype)));
  }
}

void fp8_block_gemm_fallback(const bf16* x, int64_t x_row_stride, const fp8* w, const float* scale, void* y,
                             DType y_dtype, int64_t y_row_stride, int64_t tokens, int64_t out_features,
                             int64_t in_features, cudaStream_t stream) {
  FallbackGemm g;
  g.x = x;
  g.x_row_stride = x_row_stride;
  g.w = w;
  g.w_dtype = DType::kF8E4M3;
  g.w_scale = scale;
  g.scale_row_stride = (in_features + kFp8Block - 1) / kFp8Block;
  g.y = y;
  g.y_dtype = y_dtype;
  g.y_row_stride = y_row_stride;
  g.rows = tokens;
  g.n = out_features;
  g.k = in_features;
  gemm_fallback(g, stream);
}

}  // namespace dsinfer::backend::cuda
