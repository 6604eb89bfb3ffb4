// The GEMM kernels of our own: per-token activation quantization for cuBLASLt's block-scaled FP8
// products, and a simple fallback GEMM for every weight format (FP8 128x128 blocks, bf16, f32).
//
// The fallback is used where cuBLASLt refuses a shape (K not a multiple of 128, small test models,
// poorly aligned pointers) and is the reference the cuBLASLt paths are tested against. It computes
//   y[b, t, n] = sum_k float(x[b, t, k]) * w(b, n, k)      (float32 accumulation)
//   w(b, n, k) = fp8(W[b, n, k]) * scale[b, n / 128, k / 128]  (FP8 block)  or  float(W[b, n, k])
// with x in bf16 as it is: no activation quantization. The cuBLASLt FP8 path quantizes x to e4m3
// per token and 128 columns (what DeepSeek does), so the two differ by that rounding (~2^-4 relative
// per element, averaging out over K); both are within the model's bf16 tolerance.
//
// Launchers queue kernels on `stream` and return: no allocation, no synchronisation, no host copy
// (graph-capturable). Sizes and strides are in elements. Bad arguments throw dsinfer::Error.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace dsinfer::backend::cuda {

inline constexpr int64_t kFp8Block = 128;  // DeepSeek's block edge (= backend::kWeightBlock)

// Quantizes activations per token and 128-column group, in the layout cuBLASLt's
// CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F expects for operand B (see gemm.cc):
//   scale[g, t] = amax(|x[t, 128g .. 128g + 127]|) / 448   (1 where that amax is 0)
//   q[t, k]     = e4m3(x[t, k] / scale[k / 128, t])         (round to nearest, saturating)
// x [rows, cols] bf16, rows x_row_stride apart; q [padded_rows, cols] e4m3, contiguous;
// scales [cols / 128, padded_rows] f32, token-contiguous (scales[g * padded_rows + t]).
// Rows in [rows, padded_rows) are written as zeros with scale 1 (cuBLASLt wants the token count a
// multiple of 4). Requires cols % 128 == 0, x_row_stride % 4 == 0, x 8-byte aligned, q 4-byte
// aligned, padded_rows >= rows.
void quantize_fp8_per_token_group(const __nv_bfloat16* x, int64_t x_row_stride, int64_t rows, int64_t padded_rows,
                                  int64_t cols, __nv_fp8_e4m3* q, float* scales, cudaStream_t stream);

// One fallback product (or a batch of them, one per blockIdx.z).
struct FallbackGemm {
  const __nv_bfloat16* x = nullptr;  // [batch][rows, k], rows x_row_stride apart
  int64_t x_row_stride = 0;
  int64_t x_batch_stride = 0;
  const void* w = nullptr;  // [batch][n, k] contiguous rows; bf16, f32 or f8e4m3 (w_dtype)
  DType w_dtype = DType::kBF16;
  int64_t w_batch_stride = 0;  // elements between consecutive batch matrices
  // kF8E4M3 only: [batch][ceil(n / 128), scale_row_stride] f32, scale[nb, kb] for the 128 x 128 block
  // (DeepSeek's weight_scale_inv is [ceil(n / 128), ceil(k / 128)] row-major: stride ceil(k / 128)).
  const float* w_scale = nullptr;
  int64_t scale_row_stride = 0;
  int64_t scale_batch_stride = 0;
  void* y = nullptr;  // [batch][rows, n] bf16 or f32 (y_dtype), rows y_row_stride apart
  DType y_dtype = DType::kBF16;
  int64_t y_row_stride = 0;
  int64_t y_batch_stride = 0;
  int64_t rows = 0;   // T
  int64_t n = 0;      // output features
  int64_t k = 0;      // input features
  int64_t batch = 1;  // <= 65535
};

// Roofline: memory bound for rows <= 16 (reads every weight element once per 16 rows:
// n * k * sizeof(W) bytes per 16-row block; 2 * rows * n * k FLOPs on the CUDA cores). Uses 16-byte
// weight loads when k, the strides and the pointers allow (k and strides multiples of 16 / sizeof(W),
// pointers 16-byte aligned), else element loads. y must not overlap x or w.
void gemm_fallback(const FallbackGemm& gemm, cudaStream_t stream);

// The FP8 form under the name the backend's tests use: y[T, N] = x[T, K] . dequant(W[N, K])^T.
// x [T, K] bf16 (rows x_row_stride apart); w [N, K] e4m3; scale [ceil(N/128), ceil(K/128)] f32;
// y [T, N] bf16 or f32 (rows y_row_stride apart).
void fp8_block_gemm_fallback(const __nv_bfloat16* x, int64_t x_row_stride, const __nv_fp8_e4m3* w,
                             const float* scale, void* y, DType y_dtype, int64_t y_row_stride, int64_t tokens,
                             int64_t out_features, int64_t in_features, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
