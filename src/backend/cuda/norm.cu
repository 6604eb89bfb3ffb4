// RMSNorm kernels, plain and fused with the residual add.
//
//   rms_norm:             out[t] = weight * (x[t] * inv_rms(x[t]))
//   add_rms_norm_inplace: residual[t] = bf16(residual[t] + x[t]); out[t] = rms_norm(residual[t])
// x, residual, out [rows, dim] bf16; weight [dim] f32; float32 sum of squares and scaling.
//
// Roofline (memory bound, ~4 FLOPs per element): rms_norm reads 2 * rows * dim bytes and writes as
// many; the fused form reads 4 and writes 4 bytes per element (+ the weight, 4 * dim, cached). At
// dim 7168 and 4096 rows that is ~117 MB for the fused form, ~35 us at H100's ~3.35 TB/s.
//
// Launch: one block per row, threads = the units per row rounded up to a warp (from 1024 rows on, a
// quarter of them; 32 to 1024 threads; a unit is 8 elements, one 16-byte access, when alignment
// allows, else 1 element). Two passes
// over the row: the first loads each thread's units (up to 4, all loads in flight at once) and sums
// squares (and, fused, writes the rounded residual), a block reduction gives inv_rms, the second
// scales the units still held in registers and writes out (wider rows re-read the rest). Each thread
// touches the same units in both passes, so out may alias the row it reads.
#include "backend/cuda/norm.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/vector.cuh"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kMaxThreads = 1024;
constexpr int kChunk = 8;  // 8 bf16 = 16 bytes
constexpr int kUnitsPerThread = 4;
constexpr int64_t kManyRows = 1024;

// Sum over the block; every thread gets the total. blockDim.x must be a multiple of 32. Call once per
// kernel: the partials array is not reused safely by a second call.
__device__ __forceinline__ float block_sum(float value) {
  __shared__ float warp_sums[32];
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = value;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += warp_sums[w];
  return total;
}

// kAddResidual: residual (contiguous, row stride dim) += x first and the norm reads the result.
// A thread holds up to kUnitsPerThread units of the row in registers between the two passes: all
// its loads are issued before the first store (x and residual may not alias, but the compiler must
// assume they do, so loads interleaved with stores would be serialized), and pass 2 reads them from
// registers. Rows wider than kUnitsPerThread * blockDim.x units take the loop after it.
template <bool kVector, bool kAddResidual>
__global__ void __launch_bounds__(kMaxThreads)
    rms_norm_kernel(const bf16* x, int64_t x_row_stride, bf16* residual, const float* __restrict__ weight,
                    bf16* out, int64_t out_row_stride, int dim, float eps) {
  allow_dependent_launch();  // the product after a norm (gemv.h) starts streaming its weights
  constexpr int kWidth = kVector ? kChunk : 1;
  const int64_t row = blockIdx.x;
  const int units = dim / kWidth;
  const bf16* x_row = x + row * x_row_stride;
  bf16* residual_row = kAddResidual ? residual + row * dim : nullptr;
  bf16* out_row = out + row * out_row_stride;

  float sum_squares = 0.0f;
  // Unit u of x, plus the residual's when fused (rounded to bf16: the residual it is stored as).
  auto load_unit = [&](int u, float (&v)[kWidth]) {
    load_bf16<kWidth>(x_row + u * kWidth, v);
    if constexpr (kAddResidual) {
      float r[kWidth];
      load_bf16<kWidth>(residual_row + u * kWidth, r);
#pragma unroll
      for (int e = 0; e < kWidth; ++e) v[e] = __bfloat162float(__float2bfloat16(r[e] + v[e]));
    }
  };
  auto add_squares = [&](const float (&v)[kWidth]) {
#pragma unroll
    for (int e = 0; e < kWidth; ++e) sum_squares += v[e] * v[e];
  };

  float held[kUnitsPerThread][kWidth];
#pragma unroll
  for (int i = 0; i < kUnitsPerThread; ++i) {
    const int u = threadIdx.x + i * blockDim.x;
    if (u < units) {
      load_unit(u, held[i]);
      add_squares(held[i]);
    }
  }
  if constexpr (kAddResidual) {
#pragma unroll
    for (int i = 0; i < kUnitsPerThread; ++i) {
      const int u = threadIdx.x + i * blockDim.x;
      if (u < units) store_bf16<kWidth>(residual_row + u * kWidth, held[i]);  // exact: bf16 values
    }
  }
  for (int u = threadIdx.x + kUnitsPerThread * blockDim.x; u < units; u += blockDim.x) {
    float v[kWidth];
    load_unit(u, v);
    if constexpr (kAddResidual) store_bf16<kWidth>(residual_row + u * kWidth, v);
    add_squares(v);
  }
  // block_sum's barrier also orders pass 1's reads of x before pass 2's writes when out == x.
  sum_squares = block_sum(sum_squares);
  const float inv_rms = 1.0f / sqrtf(sum_squares / static_cast<float>(dim) + eps);

  // out's unit u from the row's values v of that unit.
  auto write_out = [&](int u, float (&v)[kWidth]) {
    float w[kWidth];
    load_f32<kWidth>(weight + u * kWidth, w);
#pragma unroll
    for (int e = 0; e < kWidth; ++e) v[e] = w[e] * (v[e] * inv_rms);
    store_bf16<kWidth>(out_row + u * kWidth, v);
  };
#pragma unroll
  for (int i = 0; i < kUnitsPerThread; ++i) {
    const int u = threadIdx.x + i * blockDim.x;
    if (u < units) write_out(u, held[i]);
  }
  const bf16* source = kAddResidual ? residual_row : x_row;
  for (int u = threadIdx.x + kUnitsPerThread * blockDim.x; u < units; u += blockDim.x) {
    float v[kWidth];
    load_bf16<kWidth>(source + u * kWidth, v);
    write_out(u, v);
  }
}

template <bool kAddResidual>
void launch_rms_norm(const bf16* x, int64_t x_row_stride, bf16* residual, const float* weight, bf16* out,
                     int64_t out_row_stride, int64_t rows, int64_t dim, float eps, bool vector, cudaStream_t stream) {
  int64_t units = vector ? dim / kChunk : dim;
  // Many rows: kUnitsPerThread units per thread, so that blocks are short and many fit an SM, each
  // thread with its loads in flight together (hidden 7168: 224 threads of 4 units). Few rows (decode):
  // one unit per thread, the row's latency spread over as many threads as it has units. H200,
  // kernels_bench, add + RMSNorm at hidden 7168, us, one unit / four: 1 row 6.1 / 8.4, 256 rows
  // 9.7 / 10.1, 4096 rows 79.6 / 71.9 (69% / 77% of copy), 16384 rows 301.5 / 275.2.
  int64_t per_thread = rows >= kManyRows ? (units + kUnitsPerThread - 1) / kUnitsPerThread : units;
  int threads = static_cast<int>(std::min<int64_t>(kMaxThreads, std::max<int64_t>(32, (per_thread + 31) / 32 * 32)));
  dim3 grid(static_cast<unsigned>(rows));
  if (vector) {
    rms_norm_kernel<true, kAddResidual><<<grid, threads, 0, stream>>>(x, x_row_stride, residual, weight, out,
                                                                      out_row_stride, static_cast<int>(dim), eps);
  } else {
    rms_norm_kernel<false, kAddResidual><<<grid, threads, 0, stream>>>(x, x_row_stride, residual, weight, out,
                                                                       out_row_stride, static_cast<int>(dim), eps);
  }
  DSINFER_CUDA_CHECK_LAUNCH();
}

void check_sizes(const char* op, int64_t rows, int64_t dim) {
  DSINFER_CHECK(rows >= 0 && rows <= INT32_MAX && dim >= 1 && dim <= INT32_MAX, op, ": unsupported size (",
                rows, " rows of ", dim, ")");
}

}  // namespace

void rms_norm(const __nv_bfloat16* x, int64_t x_row_stride, const float* weight, __nv_bfloat16* out,
              int64_t out_row_stride, int64_t rows, int64_t dim, float eps, cudaStream_t stream) {
  check_sizes("rms_norm", rows, dim);
  DSINFER_CHECK(x_row_stride >= dim && out_row_stride >= dim, "rms_norm: row strides (", x_row_stride, ", ",
                out_row_stride, ") narrower than the row (", dim, ")");
  if (rows == 0) return;
  bool vector = dim % kChunk == 0 && x_row_stride % kChunk == 0 && out_row_stride % kChunk == 0 && aligned16(x) &&
                aligned16(out) && aligned16(weight);
  launch_rms_norm<false>(x, x_row_stride, nullptr, weight, out, out_row_stride, rows, dim, eps, vector, stream);
}

void add_rms_norm_inplace(__nv_bfloat16* residual, const __nv_bfloat16* x, const float* weight,
                          __nv_bfloat16* out, int64_t rows, int64_t dim, float eps, cudaStream_t stream) {
  check_sizes("add_rms_norm_inplace", rows, dim);
  if (rows == 0) return;
  bool vector = dim % kChunk == 0 && aligned16(residual) && aligned16(x) && aligned16(out) && aligned16(weight);
  launch_rms_norm<true>(x, dim, residual, weight, out, dim, rows, dim, eps, vector, stream);
}

}  // namespace dsinfer::backend::cuda
