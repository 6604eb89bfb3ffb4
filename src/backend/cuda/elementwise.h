// Elementwise CUDA ops: embedding lookup, residual add, SiLU gating, strided row copies (slice,
// concat, gather) and dtype conversion. bf16 activations, float32 math inside.
//
// Every launcher takes device pointers, queues one kernel on `stream` and returns: no allocation, no
// synchronisation, no host copies (so the launches can be captured in a CUDA graph). Sizes are in
// elements; an empty problem (any size 0) launches nothing. Bad arguments throw dsinfer::Error; a
// failed launch throws through DSINFER_CUDA_CHECK. Device-side indices (ids, row maps) are trusted:
// the caller validates them on the host, where it has them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace dsinfer::backend::cuda {

// out[t, :] = bf16(table[ids[t], :]).
// table [vocab, dim] f32 or bf16 (table_dtype); ids [tokens] int32, each in [0, vocab);
// out [tokens, dim] bf16.
void embedding(const void* table, DType table_dtype, const int32_t* ids, __nv_bfloat16* out, int64_t tokens,
               int64_t dim, cudaStream_t stream);

// x[i] = bf16(float(x[i]) + float(y[i])) for i < n. x and y must not overlap unless equal.
void add_inplace(__nv_bfloat16* x, const __nv_bfloat16* y, int64_t n, cudaStream_t stream);

// out[t, i] = bf16(silu(x[t, i]) * x[t, inter + i]), silu(g) = g / (1 + exp(-g)), float math.
// x [tokens, 2 * inter] bf16 (gate half then up half), out [tokens, inter] bf16, both contiguous.
void silu_mul(const __nv_bfloat16* x, __nv_bfloat16* out, int64_t tokens, int64_t inter, cudaStream_t stream);

// silu_mul fused with the FP8 quantization of its output for the down projection (GemmRunner's
// activation format, quantize_fp8_per_token_group in fp8_gemm.h), one kernel:
//   h[t, i] = bf16(silu(x[t, i]) * x[t, inter + i]) exactly as silu_mul; out = h when out is not null;
//   scales[g * padded_tokens + t] = amax(|h[t, 128g .. 128g + 127]|) / 448   (1 where that is 0)
//   q[t, i] = e4m3(h[t, i] / scales[i / 128 * padded_tokens + t])   (nearest, saturating)
// so q and scales are the bits quantize_fp8_per_token_group gives for h. Rows in
// [tokens, padded_tokens) of q are zeros with scale 1 (cuBLASLt wants the token count a multiple of 4).
// x [tokens, 2 * inter] bf16 and out [tokens, inter] bf16, contiguous and 16-byte aligned; q
// [padded_tokens, inter] e4m3 contiguous, 8-byte aligned; scales [inter / 128, padded_tokens] f32.
// inter a multiple of 128; padded_tokens >= tokens. Bytes: 4 read, 1 + 1/32 written per output
// element (+ 2 with out).
void silu_mul_quant_fp8(const __nv_bfloat16* x, __nv_bfloat16* out, int64_t tokens, int64_t padded_tokens,
                        int64_t inter, __nv_fp8_e4m3* q, float* scales, cudaStream_t stream);

// A strided copy of a [rows, cols] window between two row-major matrices:
//   dst[r, dst_col + c] = src[src_rows ? src_rows[r] : r, src_col + c],  r < rows, c < cols.
// Strides and columns count elements of element_bytes (2: bf16; 4: f32 or int32). The backend's
// slice_last, concat_last (one copy per side), concat_rows (one copy per input, dst advanced by the
// rows already written) and gather_rows (src_rows set) are all this one kernel. Source and
// destination must not overlap. 16-, 8- or 4-byte accesses are used when every row start allows it.
struct RowCopy {
  const void* src = nullptr;
  int64_t src_row_stride = 0;
  int64_t src_col = 0;
  const int32_t* src_rows = nullptr;  // [rows] device, optional: the source row of each output row
  void* dst = nullptr;
  int64_t dst_row_stride = 0;
  int64_t dst_col = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  int element_bytes = 2;
};
void copy_rows(const RowCopy& copy, cudaStream_t stream);

// out[r] = [a[r, 0..a_cols), b[r, 0..b_cols)] for r < rows: concat_last in one launch (at decode
// its two copies were each a ~2.5 us launch of a few hundred bytes). a, b and out contiguous
// [rows, *] matrices of element_bytes (2 or 4) elements; two copy_rows when a row is not made of
// 16-byte pieces.
void concat_columns(const void* a, int64_t a_cols, const void* b, int64_t b_cols, void* out, int64_t rows,
                    int element_bytes, cudaStream_t stream);

// out[i] = bf16(in[i]) (round to nearest even) and out[i] = float(in[i]), i < n.
void convert_f32_to_bf16(const float* in, __nv_bfloat16* out, int64_t n, cudaStream_t stream);
void convert_bf16_to_f32(const __nv_bfloat16* in, float* out, int64_t n, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
