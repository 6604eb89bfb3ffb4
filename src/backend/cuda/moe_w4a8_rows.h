// The two routed-expert products of moe_experts (moe.h) for W4A8 experts (docs/w4a8.md: int4 weights
// in groups of G columns along K, e4m3 activations), on the tensor cores with the weights as they are
// stored (two int4 values a byte, unpacked to f16 in registers, exactly):
//
//   gate_up: h[r, i] = bf16(silu(g) * u),  g = x_t . W_e[i]^T,  u = x_t . W_e[I + i]^T   (t = token of row r)
//   down:    y[r, n] = bf16(h_r . D_e[n]^T)
//
// with W[n, k] = q[n, k] * weight_scale[n, k / G] (q in -8..7) and each product's input v quantized to
// e4m3 with one scale a per row (the CPU reference's definition, backend/cpu/linear.cc), v first
// multiplied by its expert's AWQ factors where the experts have them (v = v * pre_scale[e], docs/w4a8.md):
//   a = input_scale[e] (static, per expert) or amax(|v_row|) / 448 (1 where that is 0),
//   q_v[k] = e4m3(v[k] / a)   (round to nearest even, saturating at 448),
// and every product summed per group in f32, then scaled ("promoted"):
//   out = a * sum over groups g of (sum over k in g of q_v[k] * q[n, k]) * weight_scale[n, g].
// That is the CPU's y = (q_v a) . w^T up to the order of the f32 sums; what the GPU adds is h in bf16
// before the down product's quantization (moe.cu rounds h as the other paths do).
//
// Two kernels compute it: the tensor-core one (W4a8RowsKernel::kTensorCore, moe_w4a8_rows.cu says how)
// for K multiples of 128 and groups of 32, 64 or multiples of 128 (w4a8_rows_supported), and a plain
// one (kReference: one thread per output, sequential sums) for every other shape and as the reference
// the first is checked against. Both take every expert of the step, whatever its row count (the
// tensor-core kernel cuts an expert into work items of chunk_rows rows), so the W4A8 experts need no
// other kernel.
//
// Everything is read and written on the device (the plan's offsets and row permutation, the expert
// list): no host synchronisation, capturable in a CUDA graph. Deterministic (fixed summation order, no
// atomics).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace dsinfer::backend::cuda {

// Whether the tensor-core kernel serves a product (gate_up: K = H, outputs I in tiles of 64; down: K = I,
// outputs H in tiles of 128) at these widths and group size: K a multiple of 128 (whole 128-column
// blocks), whole output tiles, and a group size of 32, 64 or a multiple of 128 dividing K. Else
// w4a8_rows_product needs the reference kernel.
bool w4a8_rows_supported(bool gate_up, int64_t hidden, int64_t inter, int64_t group_size);

// An activation quantized for the W4A8 products: q [rows, width] holds the e4m3 values as f16 (exact), each
// 8 columns stored in the order 0 4 1 5 2 6 3 7 (the order the kernel's int4 unpacking gives the weights,
// so that a 16-byte load is a lane's mma operands; moe_w4a8_rows.cu), and scale [rows] f32 the row's a.
struct W4a8Quantize {
  const __nv_bfloat16* x = nullptr;  // [source rows, width] bf16, 16-byte aligned
  int64_t width = 0;                 // K: a positive multiple of 8
  int64_t rows = 0;                  // rows of q (an upper bound when offsets is given)
  // Row r reads x[row_source[r] / top_k] (gate_up's rows in expert order, for a static scale per
  // expert); null: x[r].
  const int32_t* row_source = nullptr;
  int top_k = 1;
  // The plan's [num_experts + 1] offsets: rows at or past offsets[num_experts] are skipped, and with
  // input_scale or pre_scale a row's expert is the one whose rows hold it. Null: every row (input_scale
  // and pre_scale must be null).
  const int32_t* offsets = nullptr;
  int num_experts = 0;
  const float* input_scale = nullptr;  // [num_experts] static scales; null: amax / 448 per row
  // [num_experts, width] f32, 16-byte aligned: AWQ's factors, each row multiplied by its expert's before
  // its scale and rounding (P.pre_quant_scale); null: none.
  const float* pre_scale = nullptr;
  __half* q = nullptr;                 // [rows, width], 16-byte aligned
  float* scale = nullptr;              // [rows]
};

// Queues the quantization on `stream` (rows == 0 queues nothing). Throws dsinfer::Error on bad
// arguments or a failed launch.
void w4a8_quantize(const W4a8Quantize& args, cudaStream_t stream);

enum class W4a8RowsKernel {
  kTensorCore,  // mma.sync on f16 operands unpacked in registers (where w4a8_rows_supported says)
  kReference,   // one thread per output, sequential f32 sums (each row's in the definition's order): any shape
};

// One grouped product over every expert with rows.
struct W4a8RowsProduct {
  bool gate_up = true;                 // true: h = silu(gate) * up (above); false: y = h . D^T
  const uint8_t* weight = nullptr;     // [E, N, K / 2]: gate_up N = 2I, K = H; down N = H, K = I
  const float* weight_scale = nullptr;  // [E, N, K / group_size] f32
  int64_t group_size = 0;              // G: divides K
  const __half* act = nullptr;         // w4a8_quantize's q: one row per token or per expert row (below)
  const float* act_scale = nullptr;    // and its scale
  // gate_up with one activation row per token (a dynamic scale: the same for each of the token's
  // experts): expert row r reads act row row_source[r] / top_k. Else act has the expert rows' order.
  bool act_per_token = false;
  const int32_t* offsets = nullptr;     // [E + 1]: expert e's rows are [offsets[e], offsets[e + 1])
  const int32_t* row_source = nullptr;  // [rows] token * top_k + slot of each row (act_per_token only)
  int top_k = 1;
  int num_experts = 0;                 // E, 1..1024
  int64_t inter = 0;                   // I
  int64_t hidden = 0;                  // H
  int64_t row_bound = 0;               // an upper bound of offsets[E] (T * top_k): sizes the grid
  __nv_bfloat16* out = nullptr;        // gate_up: h [rows, I]; down: y [rows, H]; bf16
  W4a8RowsKernel kernel = W4a8RowsKernel::kTensorCore;
  // Tuning, not semantics (the same bits): activation rows per tensor-core work item, 16 or 32 (two or
  // four n8 tiles); an expert with more rows is several items, each reading its weights again.
  int chunk_rows = 32;
};

// Queues the product on `stream`. Weights and act 16-byte aligned; out must not overlap the inputs.
// Throws dsinfer::Error on bad arguments (kTensorCore on shapes it does not serve included) or a failed
// launch.
void w4a8_rows_product(const W4a8RowsProduct& product, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
