// RMSNorm on the GPU, alone and fused with the residual add that precedes it in every layer, and
// that add + norm fused with the FP8 quantization of the product after it.
// bf16 activations, float32 weight and math. Launchers queue one kernel on `stream` and return:
// no allocation, no synchronisation. Sizes in elements; rows == 0 launches nothing.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace dsinfer::backend::cuda {

// out[t, :] = bf16(weight * (x[t, :] * inv_rms)), inv_rms = 1 / sqrt(sum(x[t, :]^2) / dim + eps),
// the sum in float32 (the CPU reference's order: Hugging Face's).
// x [rows, dim] bf16 with rows x_row_stride elements apart (a column slice of a wider matrix is
// normed in place of a copy); weight [dim] f32; out [rows, dim] bf16, rows out_row_stride apart.
// out may be x itself (same stride). Strides >= dim. 16-byte accesses when dim, the strides and the
// pointers allow (dim % 8 == 0, strides % 8 == 0, 16-byte aligned), else 2-byte ones.
void rms_norm(const __nv_bfloat16* x, int64_t x_row_stride, const float* weight, __nv_bfloat16* out,
              int64_t out_row_stride, int64_t rows, int64_t dim, float eps, cudaStream_t stream);

// How the add + norm kernels walk the rows (tuning, not semantics: every schedule gives the same
// bits). kBlockPerRow: one block per row. kPersistent: one wave of blocks, each looping over rows
// and loading its next row while it normalizes the current one (from 1024 rows, on the 16-byte path
// with dim <= 8192; other steps take kBlockPerRow). kAuto: kBlockPerRow, the measured choice (H200,
// hidden 7168, kernels_bench: 21.3 / 70.2 / 260 us at 1K / 4K / 16K rows against the persistent
// schedule's 25.1 / 82.4 / 305).
enum class NormSchedule : uint8_t { kAuto, kBlockPerRow, kPersistent };

// residual = bf16(residual + x); out = rms_norm(residual) as above, computed from the rounded
// residual. residual, x, out [rows, dim] bf16, contiguous; weight [dim] f32. out may be x.
void add_rms_norm_inplace(__nv_bfloat16* residual, const __nv_bfloat16* x, const float* weight,
                          __nv_bfloat16* out, int64_t rows, int64_t dim, float eps, cudaStream_t stream,
                          NormSchedule schedule = NormSchedule::kAuto);

// add_rms_norm_inplace fused with the FP8 quantization of its output for the FP8 product after it
// (GemmRunner's activation format, quantize_fp8_per_token_group in fp8_gemm.h), one kernel:
//   residual = bf16(residual + x); normed = bf16(rms_norm(residual)) exactly as add_rms_norm_inplace;
//   out = normed when out is not null (the bf16 copy other consumers read, e.g. the MoE router);
//   scales[g * padded_rows + t] = amax(|normed[t, 128g .. 128g + 127]|) / 448   (1 where that is 0)
//   q[t, c] = e4m3(normed[t, c] / scales[c / 128 * padded_rows + t])    (nearest, saturating)
// so q and scales are the bits quantize_fp8_per_token_group gives for `normed`. Rows in
// [rows, padded_rows) of q are zeros with scale 1 (cuBLASLt wants the token count a multiple of 4).
// residual, x, out [rows, dim] bf16 contiguous, weight [dim] f32, all 16-byte aligned; q
// [padded_rows, dim] e4m3 contiguous, 8-byte aligned; scales [dim / 128, padded_rows] f32.
// dim a multiple of 128, at most 32768; padded_rows >= rows. out may be x; q and scales overlap
// nothing else. Bytes: 4 read and 3 + 1/32 written per element (+ 2 with out).
void add_rms_norm_quant_fp8(__nv_bfloat16* residual, const __nv_bfloat16* x, const float* weight,
                            __nv_bfloat16* out, int64_t rows, int64_t padded_rows, int64_t dim, float eps,
                            __nv_fp8_e4m3* q, float* scales, cudaStream_t stream,
                            NormSchedule schedule = NormSchedule::kAuto);

}  // namespace dsinfer::backend::cuda
