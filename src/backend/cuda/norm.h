// RMSNorm on the GPU, alone and fused with the residual add that precedes it in every layer.
// bf16 activations, float32 weight and math. Launchers queue one kernel on `stream` and return:
// no allocation, no synchronisation. Sizes in elements; rows == 0 launches nothing.
#pragma once

#include <cuda_bf16.h>
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

// residual = bf16(residual + x); out = rms_norm(residual) as above, computed from the rounded
// residual. residual, x, out [rows, dim] bf16, contiguous; weight [dim] f32. out may be x.
void add_rms_norm_inplace(__nv_bfloat16* residual, const __nv_bfloat16* x, const float* weight,
                          __nv_bfloat16* out, int64_t rows, int64_t dim, float eps, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
