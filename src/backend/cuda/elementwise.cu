// Elementwise kernels: embedding lookup, residual add, SiLU gating (alone and fused with FP8
// quantization), strided row copies, dtype conversion. bf16 in and out, float32 math.
//
// All are memory bound (a few FLOPs per element at most); the roofline is the bytes moved over HBM
// bandwidth (copy: H100 SXM ~3.0 TB/s, H200 ~4.3 TB/s, ANCHORS.md):
//   embedding           tokens * dim * (2 or 4) read + tokens * dim * 2 written
//   add_inplace         6n bytes (x read and written, y read), n FLOPs
//   silu_mul            tokens * 2I * 2 read + tokens * I * 2 written, ~5 FLOPs per output
//   silu_mul_quant_fp8  tokens * 2I * 2 read + tokens * I * (1 + 1/32) written (+ 2I with out)
//   copy_rows           2 * rows * cols * element_bytes
//   conversions         6n bytes
//
// Launch configuration:
//   row ops (embedding, copy_rows, silu_mul when a row is not 16-byte units): a row is split into
//   units (8 elements = 16 bytes when alignment allows, else 1 element, or the widest access that
//   fits for copies). A 256-thread block is tx x ty: tx threads (the smallest power of two >= units
//   per row, at most 256) along a row, ty = 256 / tx rows. grid.x covers a row's units, grid.y the
//   rows (at most 65535 blocks; the kernel loops over the rest), so one wide row still spreads over
//   many SMs (decode, T = 1).
//   silu_mul (16-byte units): 128-thread blocks, each thread 2 units of a row (unit = blockIdx.x *
//   256 + threadIdx.x + 128 j, its 4 loads of 16 bytes issued before any is used); grid.x covers a
//   row (V3's I = 2048: 256 units, one block), grid.y the rows (<= 65535, looping beyond).
//   SiLU's gate / (1 + exp(-gate)) takes the division's own fast path when all of a thread's gates
//   are in range (silu_times_units, tested on the bf16 bits), with the division's bits: ~18
//   instructions an element (expf 8, division and product 7, unpacking 2, the range test 1.5).
//   silu_mul_quant_fp8: bound by instruction issue as much as by bytes: at the copy rate an SM has
//   ~39 issue slots per element (4 bytes read, ~1 written), and the SiLU, the bf16 rounding and the
//   quantization (vector.cuh) take ~27 of them. So every instruction counts, and the loads must
//   stay in flight through the arithmetic:
//   - a warp holds 4 of a row's 128-column groups, each on 8 lanes with 2 units a lane (units
//     16 g + l % 8 and + 8: every load instruction reads 128 contiguous bytes per 8 lanes), so a
//     group's amax takes 3 shuffle steps and one scale computation per 16 elements; the group's
//     first lane stores the scale. Lanes of groups past the row (I / 128 not a multiple of 4)
//     compute on zeros and touch no memory.
//   - one wave of 128-thread blocks (5 per SM, <= 96 registers): grid.x covers a row's warps (V3's
//     I = 2048: 4 warps, one block; 18432: 9 blocks), grid.y = the rows split evenly over the
//     blocks resident at once; a block walks rows blockIdx.y, + gridDim.y, ... and loads the next
//     row's words (4 x 16 bytes a lane) before the current row's arithmetic, then writes its
//     padding rows (zeros, scale 1, no arithmetic). Offsets advance by a step a row.
//   ~29 instructions an element in all. Before this layout (one row a block, 16 lanes a group, per-
//   element float range tests, addresses as products of the row): ~35 an element and no loads in
//   flight during the arithmetic, 69% / 75% of copy at I = 2048 / 18432 and 16384 tokens (H200).
//   bf16 accesses are single 16-byte instructions.
//   flat ops (add_inplace, conversions): one 8-element chunk per thread, grid-stride loop.
#include "backend/cuda/elementwise.h"

#include <algorithm>
#include <initializer_list>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/vector.cuh"
#include "core/dtype.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kBlockThreads = 256;
constexpr int64_t kMaxFlatBlocks = 65535;
constexpr int kChunk = 8;  // elements per vector unit: 8 bf16 = 16 bytes

// The widest power-of-two access (at most 16 bytes) that divides every address and byte offset given.
int widest_access(std::initializer_list<uint64_t> values) {
  uint64_t all = 0;
  for (uint64_t v : values) all |= v;
  for (int bytes = 16; bytes > 1; bytes /= 2)
    if (all % bytes == 0) return bytes;
  return 1;
}

unsigned flat_blocks(int64_t n) {
  int64_t chunks = (n + kChunk - 1) / kChunk;
  return static_cast<unsigned>(std::min((chunks + kBlockThreads - 1) / kBlockThreads, kMaxFlatBlocks));
}

// The loop every flat kernel shares: chunk c covers elements [8c, 8c + 8) of [0, n), one chunk per
// thread, grid-stride. A whole chunk takes vector(c, begin) when kVector; the rest, element by
// element, scalar(i).
template <bool kVector, typename Vector, typename Scalar>
__device__ __forceinline__ void for_each_chunk(int64_t n, Vector vector, Scalar scalar) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks; c += step) {
    const int64_t begin = c * kChunk;
    if (kVector && begin + kChunk <= n) {
      vector(c, begin);
    } else {
      const int64_t end = begin + kChunk < n ? begin + kChunk : n;
      for (int64_t i = begin; i < end; ++i) scalar(i);
    }
  }
}

// ---- embedding ----

template <typename Table, bool kVector>
__global__ void embedding_kernel(const Table* __restrict__ table, const int32_t* __restrict__ ids,
                                 bf16* __restrict__ out, int64_t tokens, int64_t dim) {
  const int64_t units = kVector ? dim / kChunk : dim;
  auto body = [&](int64_t unit, int64_t t) {
    const Table* source = table + static_cast<int64_t>(ids[t]) * dim;
    bf16* target = out + t * dim;
    if constexpr (!kVector) {
      if constexpr (sizeof(Table) == sizeof(bf16)) {
        target[unit] = source[unit];
      } else {
        target[unit] = __float2bfloat16(source[unit]);
      }
    } else if constexpr (sizeof(Table) == sizeof(bf16)) {
      reinterpret_cast<Bf16x8*>(target)[unit] = reinterpret_cast<const Bf16x8*>(source)[unit];
    } else {
      float values[kChunk];
      load_f32x8(source + unit * kChunk, values);
      reinterpret_cast<Bf16x8*>(target)[unit] = pack_bf16x8(values);
    }
  };
  for_each_row_unit(units, tokens, body);
}

template <typename Table>
void launch_embedding(const Table* table, const int32_t* ids, bf16* out, int64_t tokens, int64_t dim,
                      cudaStream_t stream) {
  bool vector = dim % kChunk == 0 && aligned16(table) && aligned16(out);
  RowGrid launch = row_grid(tokens, vector ? dim / kChunk : dim);
  if (vector) {
    embedding_kernel<Table, true><<<launch.grid, launch.block, 0, stream>>>(table, ids, out, tokens, dim);
  } else {
    embedding_kernel<Table, false><<<launch.grid, launch.block, 0, stream>>>(table, ids, out, tokens, dim);
  }
  DSINFER_CUDA_CHECK_LAUNCH();
}

// ---- add ----

template <bool kVector>
__global__ void add_kernel(bf16* x, const bf16* y, int64_t n) {
  // Not through for_each_chunk: that form compiles the scalar (kVector = false) loop differently.
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks; c += step) {
    const int64_t begin = c * kChunk;
    if (kVector && begin + kChunk <= n) {
      float a[kChunk], b[kChunk];
      unpack_bf16x8(reinterpret_cast<const Bf16x8*>(x)[c], a);
      unpack_bf16x8(reinterpret_cast<const Bf16x8*>(y)[c], b);
#pragma unroll
      for (int i = 0; i < kChunk; ++i) a[i] += b[i];
      reinterpret_cast<Bf16x8*>(x)[c] = pack_bf16x8(a);
    } else {
      const int64_t end = begin + kChunk < n ? begin + kChunk : n;
      for (int64_t i = begin; i < end; ++i) x[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(y[i]));
    }
  }
}

// ---- silu_mul ----

__device__ __forceinline__ float silu_times(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

// Element by element, for rows that are not whole 16-byte units.
__global__ void silu_mul_scalar_kernel(const bf16* __restrict__ x, bf16* __restrict__ out, int64_t tokens,
                                       int64_t inter) {
  allow_dependent_launch();  // the down projection after it (gemv.h) starts streaming its weights
  auto body = [&](int64_t unit, int64_t t) {
    const bf16* gate = x + t * 2 * inter;
    const float g = __bfloat162float(gate[unit]), u = __bfloat162float(gate[inter + unit]);
    out[t * inter + unit] = __float2bfloat16(silu_times(g, u));
  };
  for_each_row_unit(inter, tokens, body);
}

// Whether every gate of a unit (8 bf16, 16 bytes) has 2^-60 <= |gate| <= 27 (false for a NaN), on the
// bits: magnitudes order as their bits do (a NaN's above every number's), two to an instruction
// (~1.5 instructions an element; as float comparisons, ~2.5).
__device__ __forceinline__ bool gates_in_fast_range(const uint4& raw_gate) {
  constexpr uint32_t kMagnitudes = 0x7fff7fffu;
  constexpr uint32_t kLowest = 0x21802180u;   // 2^-60 in both halves
  constexpr uint32_t kHighest = 0x41d841d8u;  // 27
  const uint32_t a = raw_gate.x & kMagnitudes, b = raw_gate.y & kMagnitudes;
  const uint32_t c = raw_gate.z & kMagnitudes, d = raw_gate.w & kMagnitudes;
  const uint32_t high = __vmaxu2(__vmaxu2(a, b), __vmaxu2(c, d));
  const uint32_t low = __vminu2(__vminu2(a, b), __vminu2(c, d));
  return (__vmaxu2(high, kHighest) == kHighest) & (__vminu2(low, kLowest) == kLowest);
}

// silu_times for the kUnits x 8 values of kUnits units (gate: raw_gate's values as floats), the same
// bits. gate / d (d = 1 + exp(-gate)) is the division's own fast path (nvcc's div.rn for sm_90:
// MUFU.RCP and one Newton step for 1 / d, q0 = gate / d approximately, the remainder gate - d q0
// exact by FMA, one correction) without its per-element range check (FCHK) and branch to a
// subroutine: when 2^-60 <= |gate| <= 27 for all of them, d is in [1, 2^40) and every operand, the
// remainder and the quotient (>= 2^-100) are normal, where that check passes. Any other gate (0,
// tiny, large, inf, NaN: rare) sends all of them through the divisions themselves.
template <int kUnits>
__device__ __forceinline__ void silu_times_units(const uint4 (&raw_gate)[kUnits], float (&gate)[kUnits][kChunk],
                                                 const float (&up)[kUnits][kChunk]) {
  float denominator[kUnits][kChunk];
  bool inside = true;
#pragma unroll
  for (int j = 0; j < kUnits; ++j) {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) denominator[j][i] = 1.0f + expf(-gate[j][i]);
    inside &= gates_in_fast_range(raw_gate[j]);
  }
  if (inside) {
#pragma unroll
    for (int j = 0; j < kUnits; ++j) {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        const float d = denominator[j][i];
        float approximate;
        asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(approximate) : "f"(d));
        const float y = __fmaf_rn(approximate, __fmaf_rn(-d, approximate, 1.0f), approximate);
        const float q0 = __fmaf_rn(gate[j][i], y, 0.0f);
        gate[j][i] = __fmul_rn(__fmaf_rn(y, __fmaf_rn(-d, q0, gate[j][i]), q0), up[j][i]);
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < kUnits; ++j) {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) gate[j][i] = gate[j][i] / denominator[j][i] * up[j][i];
    }
  }
}

constexpr int kSiluThreads = 128;
constexpr int kSiluUnits = 2;  // 16-byte units per thread
constexpr int kQuantGroup = 128;  // columns per FP8 scale (kFp8Block in fp8_gemm.h)
constexpr int kGroupUnits = kQuantGroup / kChunk;  // 16

// silu_mul, 16-byte units, kSiluUnits per thread (see the top).
__global__ void __launch_bounds__(kSiluThreads)
    silu_mul_vector_kernel(const bf16* __restrict__ x, bf16* __restrict__ out, int64_t rows, int64_t inter) {
  allow_dependent_launch();  // the down projection after it (gemv.h) starts streaming its weights
  const int64_t units = inter / kChunk;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * (kSiluThreads * kSiluUnits) + threadIdx.x;
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    // One 16-byte load per unit and half (ld.global.nc.v4; a Bf16x8 copy compiled to four 4-byte loads).
    const uint4* gate = reinterpret_cast<const uint4*>(x + row * 2 * inter);
    const uint4* up = gate + units;
    uint4 raw_gate[kSiluUnits], raw_up[kSiluUnits];
#pragma unroll
    for (int j = 0; j < kSiluUnits; ++j) {
      const int64_t unit = first + j * kSiluThreads;
      if (unit < units) {
        raw_gate[j] = __ldg(gate + unit);
        raw_up[j] = __ldg(up + unit);
      }
    }
#pragma unroll
    for (int j = 0; j < kSiluUnits; ++j) {
      const int64_t unit = first + j * kSiluThreads;
      if (unit < units) {
        const uint4 gate_words[1] = {raw_gate[j]};
        float h[1][kChunk], u[1][kChunk];
        unpack_bf16_words(raw_gate[j], h[0]);
        unpack_bf16_words(raw_up[j], u[0]);
        silu_times_units<1>(gate_words, h, u);
        reinterpret_cast<uint4*>(out + row * inter)[unit] = pack_bf16_words(h[0]);
      }
    }
  }
}

void launch_silu_mul_vector(const bf16* x, bf16* out, int64_t rows, int64_t inter, cudaStream_t stream) {
  const int64_t units = inter / kChunk;
  const int64_t blocks_x = (units + kSiluThreads * kSiluUnits - 1) / (kSiluThreads * kSiluUnits);
  DSINFER_CHECK(blocks_x <= INT32_MAX, "silu_mul: rows of ", inter, " exceed the grid");
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(std::min(rows, kMaxFlatBlocks)));
  silu_mul_vector_kernel<<<grid, kSiluThreads, 0, stream>>>(x, out, rows, inter);
  DSINFER_CUDA_CHECK_LAUNCH();
}

// ---- silu_mul_quant_fp8 ----

constexpr int kQuantWarpGroups = 4;  // 128-column groups a warp covers in a row: 8 lanes each
constexpr int kSiluQuantBlocksPerSm = 5;  // guaranteed by the launch bounds (<= 96 registers)

// One row's gate and up words of a lane's two units (units g * 16 + l % 8 and that + 8 of its
// group g).
struct SiluQuantWords {
  uint4 gate[2], up[2];
};

// silu_mul fused with the FP8 quantization of h (see the top): a warp holds 4 groups of a row, 2 units
// a lane, and walks rows blockIdx.y, + gridDim.y, ...; the next row's words are loaded before the
// current row's arithmetic. Then the padding rows it meets in [rows, padded_rows): q zeros and
// scale 1. Offsets advance by a step a row (as products of the row they took ~40 instructions a row).
__global__ void __launch_bounds__(kSiluThreads, kSiluQuantBlocksPerSm)
    silu_mul_quant_kernel(const bf16* __restrict__ x, bf16* __restrict__ out, __nv_fp8_e4m3* __restrict__ q,
                          float* __restrict__ scales, int rows, int padded_rows, int64_t inter, int64_t x_step,
                          int64_t h_step) {
  allow_dependent_launch();  // the down projection after it (gemv.h) starts streaming its weights
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t groups = inter / kQuantGroup, units = inter / kChunk;
  const int64_t first_group =
      (static_cast<int64_t>(blockIdx.x) * (kSiluThreads / 32) + threadIdx.x / 32) * kQuantWarpGroups;
  if (first_group >= groups) return;  // the whole warp: past the row
  const int64_t group = first_group + lane / 8;
  // A lane of a group past the row (the row's last warp, when groups % 4 != 0) touches no memory and
  // computes on zero words (every lane takes part in the group shuffles; zeros quantize to zeros).
  const bool active = group < groups;
  const bool writes_scale = active && lane % 8 == 0;
  const int64_t unit = group * kGroupUnits + lane % 8;  // and unit + 8
  const int row_step = static_cast<int>(gridDim.y);

  // x's words of the row loaded next (16-byte units; x_step = gridDim.y rows of them); h's units (q: 8
  // bytes, out: 16; h_step = gridDim.y rows) and the scale of the row stored next.
  const uint4* x_words = reinterpret_cast<const uint4*>(x);
  int64_t x_offset = blockIdx.y * 2 * units + unit;
  int64_t h_offset = blockIdx.y * units + unit;
  float* scale = scales + group * padded_rows + blockIdx.y;

  auto load = [&](bool exists, SiluQuantWords& words) {
    if (active && exists) {
      words.gate[0] = __ldg(x_words + x_offset);
      words.gate[1] = __ldg(x_words + x_offset + 8);
      words.up[0] = __ldg(x_words + x_offset + units);
      words.up[1] = __ldg(x_words + x_offset + units + 8);
    }
    x_offset += x_step;
  };
  auto process = [&](const SiluQuantWords& words) {
    // h as silu_mul stores it (bf16), quantized as quantize_fp8_per_token_group would.
    float h[2][kChunk], u[2][kChunk];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      unpack_bf16_words(words.gate[j], h[j]);
      unpack_bf16_words(words.up[j], u[j]);
    }
    silu_times_units<2>(words.gate, h, u);
    uint4 rounded[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      rounded[j] = pack_bf16_words(h[j]);
      if (active && out != nullptr) reinterpret_cast<uint4*>(out)[h_offset + 8 * j] = rounded[j];
    }
    uint2 packed[2];
    const float group_scale = quantize_fp8_lane_group<2>(rounded, packed);
    if (active) {
      uint2* q_units = reinterpret_cast<uint2*>(q) + h_offset;
      q_units[0] = packed[0];
      q_units[8] = packed[1];
    }
    if (writes_scale) *scale = group_scale;
    h_offset += h_step;
    scale += row_step;
  };

  // Two sets of words used in turn (no copy between them): the row in `current` is processed while
  // the next one's loads are in flight.
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
  SiluQuantWords even = {{zero, zero}, {zero, zero}}, odd = even;
  int row = static_cast<int>(blockIdx.y);
  auto step = [&](const SiluQuantWords& current, SiluQuantWords& following) {
    const int next = row + row_step;
    load(next < rows, following);
    process(current);
    row = next;
    return next < rows;
  };
  if (row < rows) {
    load(true, even);
    while (step(even, odd) && step(odd, even)) {
    }
  }
  for (; row < padded_rows; row += row_step) {
    if (active) {
      uint2* q_units = reinterpret_cast<uint2*>(q) + h_offset;
      q_units[0] = make_uint2(0u, 0u);
      q_units[8] = make_uint2(0u, 0u);
    }
    if (writes_scale) *scale = 1.0f;
    h_offset += h_step;
    scale += row_step;
  }
}

void launch_silu_mul_quant(const bf16* x, bf16* out, __nv_fp8_e4m3* q, float* scales, int64_t rows,
                           int64_t padded_rows, int64_t inter, cudaStream_t stream) {
  const int64_t warps_per_row = (inter / kQuantGroup + kQuantWarpGroups - 1) / kQuantWarpGroups;
  const int64_t blocks_x = (warps_per_row + kSiluThreads / 32 - 1) / (kSiluThreads / 32);
  DSINFER_CHECK(blocks_x <= INT32_MAX, "silu_mul_quant_fp8: rows of ", inter, " exceed the grid");
  // One wave of blocks, as many on every SM: the rows they walk differ by at most one a block, so an
  // SM's rows (and instructions) by at most a few percent.
  int device = 0, sms = 0;
  DSINFER_CUDA_CHECK(cudaGetDevice(&device));
  DSINFER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t row_slots = std::max<int64_t>(1, int64_t{sms} * kSiluQuantBlocksPerSm / blocks_x);
  const int64_t blocks_y = std::min(padded_rows, row_slots);
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(blocks_y));
  const int64_t units = inter / kChunk;
  silu_mul_quant_kernel<<<grid, kSiluThreads, 0, stream>>>(x, out, q, scales, static_cast<int>(rows),
                                                           static_cast<int>(padded_rows), inter,
                                                           blocks_y * 2 * units, blocks_y * units);
  DSINFER_CUDA_CHECK_LAUNCH();
}

// ---- copy_rows ----

// Unit is the access type (uint4, uint2, uint32_t, uint16_t, uint8_t); strides in bytes; src and dst
// already point at their first column.
template <typename Unit>
__global__ void copy_rows_kernel(const char* __restrict__ src, int64_t src_stride_bytes,
                                 const int32_t* __restrict__ src_rows, char* __restrict__ dst,
                                 int64_t dst_stride_bytes, int64_t rows, int64_t units) {
  auto body = [&](int64_t unit, int64_t r) {
    const int64_t source_row = src_rows != nullptr ? static_cast<int64_t>(src_rows[r]) : r;
    const Unit* from = reinterpret_cast<const Unit*>(src + source_row * src_stride_bytes);
    Unit* to = reinterpret_cast<Unit*>(dst + r * dst_stride_bytes);
    to[unit] = from[unit];
  };
  for_each_row_unit(units, rows, body);
}

template <typename Unit>
void launch_copy_rows(const char* src, int64_t src_stride_bytes, const int32_t* src_rows, char* dst,
                      int64_t dst_stride_bytes, int64_t rows, int64_t row_bytes, cudaStream_t stream) {
  int64_t units = row_bytes / static_cast<int64_t>(sizeof(Unit));
  RowGrid launch = row_grid(rows, units);
  copy_rows_kernel<Unit><<<launch.grid, launch.block, 0, stream>>>(src, src_stride_bytes, src_rows, dst,
                                                                   dst_stride_bytes, rows, units);
  DSINFER_CUDA_CHECK_LAUNCH();
}

// ---- concat_columns ----

// Unit u of output row r: units [0, a_units) from a's row, the rest from b's (16-byte units).
__global__ void concat_columns_kernel(const uint4* __restrict__ a, int64_t a_units, const uint4* __restrict__ b,
                                      int64_t b_units, uint4* __restrict__ out, int64_t rows) {
  const int64_t units = a_units + b_units;
  auto body = [&](int64_t unit, int64_t r) {
    out[r * units + unit] = unit < a_units ? a[r * a_units + unit] : b[r * b_units + unit - a_units];
  };
  for_each_row_unit(units, rows, body);
}

// ---- conversions ----

template <bool kVector>
__global__ void f32_to_bf16_kernel(const float* __restrict__ in, bf16* __restrict__ out, int64_t n) {
  auto vector = [&](int64_t c, int64_t begin) {
    float values[kChunk];
    load_f32x8(in + begin, values);
    reinterpret_cast<Bf16x8*>(out)[c] = pack_bf16x8(values);
  };
  for_each_chunk<kVector>(n, vector, [&](int64_t i) { out[i] = __float2bfloat16(in[i]); });
}

template <bool kVector>
__global__ void bf16_to_f32_kernel(const bf16* __restrict__ in, float* __restrict__ out, int64_t n) {
  auto vector = [&](int64_t c, int64_t begin) {
    float values[kChunk];
    unpack_bf16x8(reinterpret_cast<const Bf16x8*>(in)[c], values);
    store_f32x8(out + begin, values);
  };
  for_each_chunk<kVector>(n, vector, [&](int64_t i) { out[i] = __bfloat162float(in[i]); });
}

}  // namespace

void embedding(const void* table, DType table_dtype, const int32_t* ids, __nv_bfloat16* out, int64_t tokens,
               int64_t dim, cudaStream_t stream) {
  DSINFER_CHECK(table_dtype == DType::kF32 || table_dtype == DType::kBF16,
                "embedding: the table must be f32 or bf16, got ", dtype_name(table_dtype));
  DSINFER_CHECK(tokens >= 0 && dim >= 0, "embedding: negative size (", tokens, " tokens, dim ", dim, ")");
  if (tokens == 0 || dim == 0) return;
  if (table_dtype == DType::kF32) {
    launch_embedding(static_cast<const float*>(table), ids, out, tokens, dim, stream);
  } else {
    launch_embedding(static_cast<const bf16*>(table), ids, out, tokens, dim, stream);
  }
}

void add_inplace(__nv_bfloat16* x, const __nv_bfloat16* y, int64_t n, cudaStream_t stream) {
  DSINFER_CHECK(n >= 0, "add_inplace: negative size ", n);
  if (n == 0) return;
  if (aligned16(x) && aligned16(y)) {
    add_kernel<true><<<flat_blocks(n), kBlockThreads, 0, stream>>>(x, y, n);
  } else {
    add_kernel<false><<<flat_blocks(n), kBlockThreads, 0, stream>>>(x, y, n);
  }
  DSINFER_CUDA_CHECK_LAUNCH();
}

void silu_mul(const __nv_bfloat16* x, __nv_bfloat16* out, int64_t tokens, int64_t inter, cudaStream_t stream) {
  DSINFER_CHECK(tokens >= 0 && inter >= 0, "silu_mul: negative size (", tokens, " tokens, ", inter, " wide)");
  if (tokens == 0 || inter == 0) return;
  // Each row's gate and up halves start at multiples of `inter` elements, so 16-byte units need
  // inter % 8 == 0 on top of aligned base pointers.
  if (inter % kChunk == 0 && aligned16(x) && aligned16(out)) {
    launch_silu_mul_vector(x, out, tokens, inter, stream);
    return;
  }
  RowGrid launch = row_grid(tokens, inter);
  silu_mul_scalar_kernel<<<launch.grid, launch.block, 0, stream>>>(x, out, tokens, inter);
  DSINFER_CUDA_CHECK_LAUNCH();
}

void silu_mul_quant_fp8(const __nv_bfloat16* x, __nv_bfloat16* out, int64_t tokens, int64_t padded_tokens,
                        int64_t inter, __nv_fp8_e4m3* q, float* scales, cudaStream_t stream) {
  DSINFER_CHECK(tokens >= 0 && padded_tokens >= tokens && padded_tokens <= INT32_MAX / 2 && inter > 0 &&
                    inter % kQuantGroup == 0,
                "silu_mul_quant_fp8: ", tokens, " tokens padded to ", padded_tokens, ", width ", inter,
                " (a positive multiple of 128)");
  DSINFER_CHECK(aligned16(x) && (out == nullptr || aligned16(out)) && reinterpret_cast<uintptr_t>(q) % 8 == 0 &&
                    reinterpret_cast<uintptr_t>(scales) % 4 == 0,
                "silu_mul_quant_fp8: x and out need 16-byte alignment, q 8 and scales 4");
  if (padded_tokens == 0) return;
  launch_silu_mul_quant(x, out, q, scales, tokens, padded_tokens, inter, stream);
}

void concat_columns(const void* a, int64_t a_cols, const void* b, int64_t b_cols, void* out, int64_t rows,
                    int element_bytes, cudaStream_t stream) {
  DSINFER_CHECK(rows >= 0 && a_cols >= 0 && b_cols >= 0, "concat_columns: negative size (", rows, " rows of ", a_cols,
                " + ", b_cols, " columns)");
  DSINFER_CHECK(element_bytes == 2 || element_bytes == 4, "concat_columns: element size must be 2 or 4 bytes, got ",
                element_bytes);
  const int64_t a_bytes = a_cols * element_bytes, b_bytes = b_cols * element_bytes;
  if (rows == 0 || a_bytes + b_bytes == 0) return;
  const bool pieces = a_bytes % 16 == 0 && b_bytes % 16 == 0 && aligned16(a) && aligned16(b) && aligned16(out);
  if (!pieces) {
    copy_rows({a, a_cols, 0, nullptr, out, a_cols + b_cols, 0, rows, a_cols, element_bytes}, stream);
    copy_rows({b, b_cols, 0, nullptr, out, a_cols + b_cols, a_cols, rows, b_cols, element_bytes}, stream);
    return;
  }
  const int64_t a_units = a_bytes / 16, b_units = b_bytes / 16;
  RowGrid launch = row_grid(rows, a_units + b_units);
  concat_columns_kernel<<<launch.grid, launch.block, 0, stream>>>(static_cast<const uint4*>(a), a_units,
                                                                  static_cast<const uint4*>(b), b_units,
                                                                  static_cast<uint4*>(out), rows);
  DSINFER_CUDA_CHECK_LAUNCH();
}

void copy_rows(const RowCopy& copy, cudaStream_t stream) {
  const int64_t e = copy.element_bytes;
  DSINFER_CHECK(e == 2 || e == 4, "copy_rows: element size must be 2 or 4 bytes, got ", e);
  DSINFER_CHECK(copy.rows >= 0 && copy.cols >= 0 && copy.src_col >= 0 && copy.dst_col >= 0,
                "copy_rows: negative size or column (", copy.rows, " rows, ", copy.cols, " columns from ",
                copy.src_col, " to ", copy.dst_col, ")");
  if (copy.rows == 0 || copy.cols == 0) return;
  // Rows of the destination must not overlap (threads would race); rows of the source may, but a
  // stride narrower than the window is almost surely a caller's mistake.
  const bool many_rows = copy.rows > 1 || copy.src_rows != nullptr;
  DSINFER_CHECK(!many_rows || copy.src_row_stride >= copy.src_col + copy.cols, "copy_rows: source columns [",
                copy.src_col, ", ", copy.src_col + copy.cols, ") do not fit a row stride of ", copy.src_row_stride);
  DSINFER_CHECK(copy.rows == 1 || copy.dst_row_stride >= copy.dst_col + copy.cols, "copy_rows: destination columns [",
                copy.dst_col, ", ", copy.dst_col + copy.cols, ") do not fit a row stride of ", copy.dst_row_stride);
  const char* src = static_cast<const char*>(copy.src) + copy.src_col * e;
  char* dst = static_cast<char*>(copy.dst) + copy.dst_col * e;
  const int64_t src_stride = copy.src_row_stride * e, dst_stride = copy.dst_row_stride * e, row_bytes = copy.cols * e;
  int access = widest_access({reinterpret_cast<uintptr_t>(src), reinterpret_cast<uintptr_t>(dst),
                              static_cast<uint64_t>(src_stride), static_cast<uint64_t>(dst_stride),
                              static_cast<uint64_t>(row_bytes)});
  auto launch = [&](auto unit) {
    using Unit = decltype(unit);
    launch_copy_rows<Unit>(src, src_stride, copy.src_rows, dst, dst_stride, copy.rows, row_bytes, stream);
  };
  switch (access) {
    case 16: launch(uint4{}); break;
    case 8: launch(uint2{}); break;
    case 4: launch(uint32_t{}); break;
    case 2: launch(uint16_t{}); break;
    default: launch(uint8_t{}); break;
  }
}

void convert_f32_to_bf16(const float* in, __nv_bfloat16* out, int64_t n, cudaStream_t stream) {
  DSINFER_CHECK(n >= 0, "convert_f32_to_bf16: negative size ", n);
  if (n == 0) return;
  if (aligned16(in) && aligned16(out)) {
    f32_to_bf16_kernel<true><<<flat_blocks(n), kBlockThreads, 0, stream>>>(in, out, n);
  } else {
    f32_to_bf16_kernel<false><<<flat_blocks(n), kBlockThreads, 0, stream>>>(in, out, n);
  }
  DSINFER_CUDA_CHECK_LAUNCH();
}

void convert_bf16_to_f32(const __nv_bfloat16* in, float* out, int64_t n, cudaStream_t stream) {
  DSINFER_CHECK(n >= 0, "convert_bf16_to_f32: negative size ", n);
  if (n == 0) return;
  if (aligned16(in) && aligned16(out)) {
    bf16_to_f32_kernel<true><<<flat_blocks(n), kBlockThreads, 0, stream>>>(in, out, n);
  } else {
    bf16_to_f32_kernel<false><<<flat_blocks(n), kBlockThreads, 0, stream>>>(in, out, n);
  }
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
