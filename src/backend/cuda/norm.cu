// RMSNorm kernels, plain, fused with the residual add, and add + norm fused with FP8 quantization.
//
//   rms_norm:               out[t] = weight * (x[t] * inv_rms(x[t]))
//   add_rms_norm_inplace:   residual[t] = bf16(residual[t] + x[t]); out[t] = rms_norm(residual[t])
//   add_rms_norm_quant_fp8: the same, then q[t], scales[., t] = e4m3 per 128 columns of bf16(out[t])
//                           (quantize_fp8_per_token_group's bits), out optional
// x, residual, out [rows, dim] bf16; weight [dim] f32; q [padded_rows, dim] e4m3; scales
// [dim / 128, padded_rows] f32; float32 sum of squares and scaling.
//
// Roofline (memory bound, ~4 FLOPs per element): rms_norm reads 2 * rows * dim bytes and writes as
// many; the fused form reads 4 and writes 4 bytes per element (+ the weight, 4 * dim, cached); with
// the quantization, reads 4 and writes 2 (residual) + 1 (q) + 1/32 (scales) bytes per element, + 2
// when out is kept. At dim 7168 and 4096 rows the fused add + norm moves ~117 MB, ~27 us at H200's
// 4.3 TB/s copy rate.
//
// Launch, kBlockPerRow: one block per row, threads = the units per row rounded up to a warp (from
// 1024 rows on, a quarter of them; 32 to 1024 threads; a unit is 8 elements, one 16-byte access,
// when alignment allows, else 1 element). Two passes over the row: the first loads each thread's
// units (up to 4, all loads in flight at once; the weights of its first unit load with them) and
// sums squares (and, fused, writes the rounded residual), a block reduction gives inv_rms, the
// second scales the units still held in registers (as bf16 words, 4 registers a unit) and writes
// out (wider rows re-read the rest). Each thread touches the same units in both passes, so out may
// alias the row it reads. (The loads had sat in the conversion loop, each unit's behind the
// conversion of the one before, which waited for its data: four round trips in the first pass from
// 1024 rows on, not one.)
// Launch, kPersistent (from 1024 rows, 16-byte units, dim <= 8192): the same threads per row and the
// same units per thread, so the same sums and bits; one wave of blocks (SMs x resident blocks) each
// walks rows blockIdx.x, + gridDim.x, ... and issues the loads of its next row (raw 16-byte words
// held in registers) before the stores and the reduction of the current one, so that its loads stay
// in flight through the phases where a block-per-row kernel has none.
// Quantization: a 128-column group is 16 consecutive units, held by the 16 lanes of one half-warp
// (a thread's units are threadIdx.x + i * blockDim.x, blockDim.x a multiple of 32), quantized by
// vector.cuh from the bf16 words that out stores: amax by 4 shuffle steps, lane 0 of the
// half writes the scale, each lane stores its 8 e4m3 bytes. It costs ~11 instructions an element
// (~20 when the scale and each quotient were divisions with their own range checks), which
// lengthened the second pass, where a block has no loads in flight: 70% / 79% of copy at 4096 /
// 16384 rows with q only, against 87% / 91% for add + norm alone (H200). A warp wholly past the row
// skips it (below 1024 rows a thread holds one unit: its other three calls would quantize zeros).
// bf16 units are read and written as single 16-byte accesses (load_row_words, store_row_bf16; the
// persistent kernel's row loads had compiled to four 4-byte loads each).
#include "backend/cuda/norm.h"

#include <algorithm>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/vector.cuh"
#include "core/dtype.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;
using fp8 = __nv_fp8_e4m3;

constexpr int kMaxThreads = 1024;
constexpr int kChunk = 8;  // 8 bf16 = 16 bytes
constexpr int kUnitsPerThread = 4;
constexpr int64_t kManyRows = 1024;
constexpr int kPersistentMaxThreads = 256;  // dim <= 256 threads x 4 units x 8 = 8192
constexpr int kQuantGroup = 128;            // columns per FP8 scale (kFp8Block in fp8_gemm.h)
constexpr int kQuantMaxDim = kMaxThreads * kUnitsPerThread * kChunk;  // every unit held in registers
constexpr unsigned kFullMask = 0xffffffffu;

// What a norm kernel reads and writes.
struct NormArgs {
  const bf16* x = nullptr;  // [rows, dim], rows x_row_stride apart
  int64_t x_row_stride = 0;
  bf16* residual = nullptr;  // kAddResidual: [rows, dim] contiguous
  const float* weight = nullptr;  // [dim]
  bf16* out = nullptr;  // [rows, dim], rows out_row_stride apart; null allowed with kQuant
  int64_t out_row_stride = 0;
  fp8* q = nullptr;         // kQuant: [padded_rows, dim] contiguous
  float* scales = nullptr;  // kQuant: [dim / 128, padded_rows]
  int64_t rows = 0;
  int64_t padded_rows = 0;
  int dim = 0;
  float eps = 0.0f;
};

// Sum over the block; every thread gets the total. blockDim.x must be a multiple of 32. `partials`
// may be reused by a later call only after another barrier (the persistent kernel alternates two).
__device__ __forceinline__ float block_sum(float value, float (&partials)[32]) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullMask, value, offset);
  if (threadIdx.x % 32 == 0) partials[threadIdx.x / 32] = value;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += partials[w];
  return total;
}

// 8 bf16 of a row as one 16-byte load (a Bf16x8 copy compiles to four 4-byte loads).
__device__ __forceinline__ uint4 load_row_words(const bf16* p) { return *reinterpret_cast<const uint4*>(p); }

// kWidth bf16 as floats and back, as load_bf16 / store_bf16 (vector.cuh) with the same bits, but 8 of
// them as one 16-byte access.
template <int kWidth>
__device__ __forceinline__ void load_row_bf16(const bf16* p, float (&out)[kWidth]) {
  if constexpr (kWidth == 1) {
    load_bf16<1>(p, out);
  } else {
    unpack_bf16_words(load_row_words(p), out);
  }
}

template <int kWidth>
__device__ __forceinline__ void store_row_bf16(bf16* p, const float (&in)[kWidth]) {
  if constexpr (kWidth == 1) {
    store_bf16<1>(p, in);
  } else {
    *reinterpret_cast<uint4*>(p) = pack_bf16_words(in);
  }
}

// A unit's bf16 values held compactly: 8 as the 16-byte word they occupy in memory, one as a float.
// The block-per-row kernel loads every unit of a thread in this form before it converts any (a
// conditional load after the conversion of the unit before it would wait for that unit's data: a
// round trip per unit) and holds the row in it between its passes (4 registers a unit, not 8).
template <int kWidth>
using RawUnit = std::conditional_t<kWidth == 1, float, uint4>;

template <int kWidth>
__device__ __forceinline__ RawUnit<kWidth> load_raw(const bf16* p) {
  if constexpr (kWidth == 1) {
    return __bfloat162float(*p);
  } else {
    return load_row_words(p);
  }
}

template <int kWidth>
__device__ __forceinline__ void store_raw(bf16* p, const RawUnit<kWidth>& raw) {
  if constexpr (kWidth == 1) {
    *p = __float2bfloat16(raw);  // exact: a bf16 value
  } else {
    *reinterpret_cast<uint4*>(p) = raw;
  }
}

template <int kWidth>
__device__ __forceinline__ void unpack_raw(const RawUnit<kWidth>& raw, float (&out)[kWidth]) {
  if constexpr (kWidth == 1) {
    out[0] = raw;
  } else {
    unpack_bf16_words(raw, out);
  }
}

// Rounded to bf16 (nearest even: __float2bfloat16's and pack_bf16x8's bits).
template <int kWidth>
__device__ __forceinline__ RawUnit<kWidth> pack_raw(const float (&in)[kWidth]) {
  if constexpr (kWidth == 1) {
    return __bfloat162float(__float2bfloat16(in[0]));
  } else {
    return pack_bf16_words(in);
  }
}

// Unit u of x's row, plus the residual's when fused (the sum rounded to bf16: what residual stores).
template <int kWidth, bool kAddResidual>
__device__ __forceinline__ void load_unit(const NormArgs& a, int64_t row, int u, float (&v)[kWidth]) {
  load_row_bf16<kWidth>(a.x + row * a.x_row_stride + u * kWidth, v);
  if constexpr (kAddResidual) {
    float r[kWidth];
    load_row_bf16<kWidth>(a.residual + row * a.dim + u * kWidth, r);
#pragma unroll
    for (int e = 0; e < kWidth; ++e) v[e] = __bfloat162float(__float2bfloat16(r[e] + v[e]));
  }
}

template <int kWidth>
__device__ __forceinline__ void add_squares(const float (&v)[kWidth], float& sum_squares) {
#pragma unroll
  for (int e = 0; e < kWidth; ++e) sum_squares += v[e] * v[e];
}

// Unit u's output from the row's values v of that unit and the weight's w (v is overwritten): out
// (when set) and, with kQuant, q and the group's scale. With kQuant every lane of the warp calls it
// (valid false past the row); without, only valid units need to.
template <int kWidth, bool kQuant>
__device__ __forceinline__ void write_unit(const NormArgs& a, int64_t row, int u, bool valid, float inv_rms,
                                           const float (&w)[kWidth], float (&v)[kWidth]) {
  if (valid) {
#pragma unroll
    for (int e = 0; e < kWidth; ++e) v[e] = w[e] * (v[e] * inv_rms);
  }
  if constexpr (!kQuant) {
    if (valid) store_row_bf16<kWidth>(a.out + row * a.out_row_stride + u * kWidth, v);
  } else {
    static_assert(kWidth == kChunk, "the fused quantization takes 16-byte units");
    // A warp wholly past the row (at decode a thread holds one unit: its 3 other calls) has nothing to
    // quantize; skipping it is warp-uniform, so the shuffles below still see every lane.
    if (!__any_sync(kFullMask, valid)) return;
    uint4 rounded = make_uint4(0u, 0u, 0u, 0u);  // the bf16 values out stores; zeros past the row
    if (valid) {
      rounded = pack_bf16_words(v);
      if (a.out != nullptr) *reinterpret_cast<uint4*>(a.out + row * a.out_row_stride + u * kWidth) = rounded;
    }
    uint2 packed;
    const float scale = quantize_fp8_half_warp_group(rounded, packed);
    if (valid) {
      *reinterpret_cast<uint2*>(a.q + row * a.dim + u * kWidth) = packed;
      if (threadIdx.x % (kQuantGroup / kChunk) == 0) a.scales[u / (kQuantGroup / kChunk) * a.padded_rows + row] = scale;
    }
  }
}

// A padding row of the quantized output (rows <= row < padded_rows): zeros with scale 1.
__device__ __forceinline__ void write_padding_row(const NormArgs& a, int64_t row) {
  const int units = a.dim / kChunk;
  for (int u = threadIdx.x; u < units; u += blockDim.x) {
    *reinterpret_cast<uint2*>(a.q + row * a.dim + u * kChunk) = make_uint2(0u, 0u);
    if (u % (kQuantGroup / kChunk) == 0) a.scales[u / (kQuantGroup / kChunk) * a.padded_rows + row] = 1.0f;
  }
}

// kBlockPerRow. kAddResidual: residual (contiguous, row stride dim) += x first and the norm reads
// the result. A thread holds up to kUnitsPerThread units of the row in registers between the two
// passes: all its loads are issued before it converts any, and so before the first store (x and
// residual may not alias, but the compiler must assume they do, so loads interleaved with stores
// would be serialized), and pass 2 reads them from registers. Rows wider than kUnitsPerThread *
// blockDim.x units take the loops after them (never with kQuant: its launcher holds every unit).
// With kQuant the grid has padded_rows blocks.
template <bool kVector, bool kAddResidual, bool kQuant>
__global__ void __launch_bounds__(kMaxThreads) rms_norm_kernel(const NormArgs a) {
  static_assert(kVector || !kQuant, "the fused quantization takes 16-byte units");
  __shared__ float partials[32];
  allow_dependent_launch();  // the product after a norm (gemv.h) starts streaming its weights
  constexpr int kWidth = kVector ? kChunk : 1;
  const int64_t row = blockIdx.x;
  const int units = a.dim / kWidth;
  if constexpr (kQuant) {
    if (row >= a.rows) {  // the whole block
      write_padding_row(a, row);
      return;
    }
  }
  bf16* residual_row = kAddResidual ? a.residual + row * a.dim : nullptr;

  // The weights of this thread's first unit (at decode its only one) load with the row, so that the
  // second pass does not wait for them after the reduction.
  float first_weight[kWidth] = {};
  if (threadIdx.x < units) load_f32<kWidth>(a.weight + threadIdx.x * kWidth, first_weight);
  RawUnit<kWidth> held[kUnitsPerThread], raw_residual[kUnitsPerThread];
#pragma unroll
  for (int i = 0; i < kUnitsPerThread; ++i) {
    const int u = threadIdx.x + i * blockDim.x;
    if (u < units) {
      held[i] = load_raw<kWidth>(a.x + row * a.x_row_stride + u * kWidth);
      if constexpr (kAddResidual) raw_residual[i] = load_raw<kWidth>(residual_row + u * kWidth);
    }
  }
  float sum_squares = 0.0f;
#pragma unroll
  for (int i = 0; i < kUnitsPerThread; ++i) {
    const int u = threadIdx.x + i * blockDim.x;
    if (u < units) {
      float v[kWidth];
      unpack_raw<kWidth>(held[i], v);
      if constexpr (kAddResidual) {
        float r[kWidth];
        unpack_raw<kWidth>(raw_residual[i], r);
#pragma unroll
        for (int e = 0; e < kWidth; ++e) v[e] = r[e] + v[e];
        held[i] = pack_raw<kWidth>(v);  // the sum rounded to bf16: what residual stores
        unpack_raw<kWidth>(held[i], v);
      }
      add_squares(v, sum_squares);
    }
  }
  if constexpr (kAddResidual) {
#pragma unroll
    for (int i = 0; i < kUnitsPerThread; ++i) {
      const int u = threadIdx.x + i * blockDim.x;
      if (u < units) store_raw<kWidth>(residual_row + u * kWidth, held[i]);
    }
  }
  if constexpr (!kQuant) {
    for (int u = threadIdx.x + kUnitsPerThread * blockDim.x; u < units; u += blockDim.x) {
      float v[kWidth];
      load_unit<kWidth, kAddResidual>(a, row, u, v);
      if constexpr (kAddResidual) store_row_bf16<kWidth>(residual_row + u * kWidth, v);
      add_squares(v, sum_squares);
    }
  }
  // block_sum's barrier also orders pass 1's reads of x before pass 2's writes when out == x.
  sum_squares = block_sum(sum_squares, partials);
  const float inv_rms = 1.0f / sqrtf(sum_squares / static_cast<float>(a.dim) + a.eps);

  float values[kWidth];
  if (threadIdx.x < units) unpack_raw<kWidth>(held[0], values);
  write_unit<kWidth, kQuant>(a, row, threadIdx.x, threadIdx.x < units, inv_rms, first_weight, values);
#pragma unroll
  for (int i = 1; i < kUnitsPerThread; ++i) {
    const int u = threadIdx.x + i * blockDim.x;
    float w[kWidth];
    if (u < units) {
      load_f32<kWidth>(a.weight + u * kWidth, w);
      unpack_raw<kWidth>(held[i], values);
    }
    write_unit<kWidth, kQuant>(a, row, u, u < units, inv_rms, w, values);
  }
  if constexpr (!kQuant) {
    const bf16* source = kAddResidual ? residual_row : a.x + row * a.x_row_stride;
    for (int u = threadIdx.x + kUnitsPerThread * blockDim.x; u < units; u += blockDim.x) {
      float v[kWidth], w[kWidth];
      load_row_bf16<kWidth>(source + u * kWidth, v);
      load_f32<kWidth>(a.weight + u * kWidth, w);
      write_unit<kWidth, false>(a, row, u, true, inv_rms, w, v);
    }
  }
}

// kPersistent: the 16-byte form of rms_norm_kernel<true, kAddResidual, kQuant> with every unit held
// (units <= kUnitsPerThread * blockDim.x), over rows blockIdx.x + n * gridDim.x, the next row's raw
// words loaded before the current row is stored and reduced. Same arithmetic in the same order, so
// the same bits.
template <bool kAddResidual, bool kQuant>
__global__ void __launch_bounds__(kPersistentMaxThreads) rms_norm_persistent_kernel(const NormArgs a) {
  __shared__ float partials[2][32];  // alternated: a row's reduction never overwrites the last one's
  allow_dependent_launch();
  const int units = a.dim / kChunk;
  uint4 next_x[kUnitsPerThread], next_residual[kUnitsPerThread];
  auto load_raw = [&](int64_t row) {
#pragma unroll
    for (int i = 0; i < kUnitsPerThread; ++i) {
      const int u = threadIdx.x + i * blockDim.x;
      if (u < units) {
        next_x[i] = load_row_words(a.x + row * a.x_row_stride + u * kChunk);
        if constexpr (kAddResidual) next_residual[i] = load_row_words(a.residual + row * a.dim + u * kChunk);
      }
    }
  };
  int64_t row = blockIdx.x;
  if (row < a.rows) load_raw(row);
  for (int parity = 0; row < a.rows; row += gridDim.x, parity ^= 1) {
    float sum_squares = 0.0f;
    float held[kUnitsPerThread][kChunk];
#pragma unroll
    for (int i = 0; i < kUnitsPerThread; ++i) {
      const int u = threadIdx.x + i * blockDim.x;
      if (u < units) {
        unpack_bf16_words(next_x[i], held[i]);
        if constexpr (kAddResidual) {
          float r[kChunk];
          unpack_bf16_words(next_residual[i], r);
#pragma unroll
          for (int e = 0; e < kChunk; ++e) held[i][e] = __bfloat162float(__float2bfloat16(r[e] + held[i][e]));
        }
        add_squares(held[i], sum_squares);
      }
    }
    const int64_t following = row + gridDim.x;
    if (following < a.rows) load_raw(following);  // in flight through this row's stores and barrier
    if constexpr (kAddResidual) {
#pragma unroll
      for (int i = 0; i < kUnitsPerThread; ++i) {
        const int u = threadIdx.x + i * blockDim.x;
        if (u < units) store_row_bf16<kChunk>(a.residual + row * a.dim + u * kChunk, held[i]);
      }
    }
    sum_squares = block_sum(sum_squares, partials[parity]);
    const float inv_rms = 1.0f / sqrtf(sum_squares / static_cast<float>(a.dim) + a.eps);
#pragma unroll
    for (int i = 0; i < kUnitsPerThread; ++i) {
      const int u = threadIdx.x + i * blockDim.x;
      float w[kChunk];
      if (u < units) load_f32<kChunk>(a.weight + u * kChunk, w);  // L1 hits after the first row
      write_unit<kChunk, kQuant>(a, row, u, u < units, inv_rms, w, held[i]);
    }
  }
  if constexpr (kQuant) {
    for (int64_t padding = a.rows + blockIdx.x; padding < a.padded_rows; padding += gridDim.x)
      write_padding_row(a, padding);
  }
}

// Threads per row: one unit each below kManyRows rows (decode: a row's latency spread over as many
// threads as it has units), kUnitsPerThread each from there (blocks short enough that many fit an
// SM, each thread with its loads in flight together; hidden 7168: 224 threads). H200,
// kernels_bench, add + RMSNorm at hidden 7168, kBlockPerRow, us, one unit / four: 1 row 6.1 / 8.4,
// 256 rows 9.7 / 10.1, 4096 rows 79.6 / 71.9 (69% / 77% of copy), 16384 rows 301.5 / 275.2.
int threads_per_row(int64_t rows, int64_t units) {
  const int64_t per_thread = rows >= kManyRows ? (units + kUnitsPerThread - 1) / kUnitsPerThread : units;
  return static_cast<int>(std::min<int64_t>(kMaxThreads, std::max<int64_t>(32, (per_thread + 31) / 32 * 32)));
}

// Whether the persistent kernel serves this launch (the same partition of the row as kBlockPerRow).
bool persistent_fits(const NormArgs& a, bool vector, int threads) {
  return vector && a.rows >= kManyRows && threads <= kPersistentMaxThreads &&
         a.dim / kChunk <= int64_t{kUnitsPerThread} * threads;
}

// kAuto is kBlockPerRow: it beat the persistent schedule at every row count kernels_bench measures
// (norm.h); kPersistent runs only when asked for.
bool use_persistent(NormSchedule schedule, bool fits) { return fits && schedule == NormSchedule::kPersistent; }

// One wave: SMs x the kernel's resident blocks at `threads`, at most one block per row.
template <typename Kernel>
unsigned persistent_blocks(Kernel kernel, int threads, int64_t rows) {
  int device = 0, sms = 0, per_sm = 0;
  DSINFER_CUDA_CHECK(cudaGetDevice(&device));
  DSINFER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  DSINFER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
  return static_cast<unsigned>(std::min<int64_t>(rows, int64_t{sms} * std::max(per_sm, 1)));
}

template <bool kAddResidual, bool kQuant>
void launch_rms_norm(const NormArgs& a, bool vector, NormSchedule schedule, cudaStream_t stream) {
  const int threads = threads_per_row(a.rows, vector ? a.dim / kChunk : a.dim);
  if (use_persistent(schedule, persistent_fits(a, vector, threads))) {
    auto kernel = rms_norm_persistent_kernel<kAddResidual, kQuant>;
    kernel<<<persistent_blocks(kernel, threads, a.rows), threads, 0, stream>>>(a);
  } else {
    const dim3 grid(static_cast<unsigned>(kQuant ? a.padded_rows : a.rows));
    if (vector) {
      rms_norm_kernel<true, kAddResidual, kQuant><<<grid, threads, 0, stream>>>(a);
    } else if constexpr (!kQuant) {
      rms_norm_kernel<false, kAddResidual, false><<<grid, threads, 0, stream>>>(a);
    }
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
  const bool vector = dim % kChunk == 0 && x_row_stride % kChunk == 0 && out_row_stride % kChunk == 0 &&
                      aligned16(x) && aligned16(out) && aligned16(weight);
  NormArgs a;
  a.x = x;
  a.x_row_stride = x_row_stride;
  a.weight = weight;
  a.out = out;
  a.out_row_stride = out_row_stride;
  a.rows = rows;
  a.dim = static_cast<int>(dim);
  a.eps = eps;
  // The plain norm's rows are short (q_a 1536, the latent 512) or few (the final norm): one block each.
  launch_rms_norm<false, false>(a, vector, NormSchedule::kBlockPerRow, stream);
}

void add_rms_norm_inplace(__nv_bfloat16* residual, const __nv_bfloat16* x, const float* weight,
                          __nv_bfloat16* out, int64_t rows, int64_t dim, float eps, cudaStream_t stream,
                          NormSchedule schedule) {
  check_sizes("add_rms_norm_inplace", rows, dim);
  if (rows == 0) return;
  const bool vector = dim % kChunk == 0 && aligned16(residual) && aligned16(x) && aligned16(out) && aligned16(weight);
  NormArgs a;
  a.x = x;
  a.x_row_stride = dim;
  a.residual = residual;
  a.weight = weight;
  a.out = out;
  a.out_row_stride = dim;
  a.rows = rows;
  a.dim = static_cast<int>(dim);
  a.eps = eps;
  launch_rms_norm<true, false>(a, vector, schedule, stream);
}

void add_rms_norm_quant_fp8(__nv_bfloat16* residual, const __nv_bfloat16* x, const float* weight,
                            __nv_bfloat16* out, int64_t rows, int64_t padded_rows, int64_t dim, float eps,
                            __nv_fp8_e4m3* q, float* scales, cudaStream_t stream, NormSchedule schedule) {
  check_sizes("add_rms_norm_quant_fp8", padded_rows, dim);
  DSINFER_CHECK(rows >= 0 && rows <= padded_rows, "add_rms_norm_quant_fp8: ", rows, " rows padded to ",
                padded_rows);
  DSINFER_CHECK(dim % kQuantGroup == 0 && dim <= kQuantMaxDim, "add_rms_norm_quant_fp8: width ", dim,
                " must be a multiple of 128 and at most ", kQuantMaxDim);
  DSINFER_CHECK(aligned16(residual) && aligned16(x) && aligned16(weight) && (out == nullptr || aligned16(out)) &&
                    reinterpret_cast<uintptr_t>(q) % 8 == 0 && reinterpret_cast<uintptr_t>(scales) % 4 == 0,
                "add_rms_norm_quant_fp8: residual, x, weight and out need 16-byte alignment, q 8 and scales 4");
  if (padded_rows == 0) return;
  NormArgs a;
  a.x = x;
  a.x_row_stride = dim;
  a.residual = residual;
  a.weight = weight;
  a.out = out;
  a.out_row_stride = dim;
  a.q = q;
  a.scales = scales;
  a.rows = rows;
  a.padded_rows = padded_rows;
  a.dim = static_cast<int>(dim);
  a.eps = eps;
  launch_rms_norm<true, true>(a, true, schedule, stream);
}

}  // namespace dsinfer::backend::cuda
