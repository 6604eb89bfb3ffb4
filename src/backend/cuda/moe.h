// The routed experts of a DeepSeekMoE layer on the GPU (Backend::moe_experts; the CPU reference is
// backend/cpu/moe.cc):
//
//   out[t] = sum over j < k with 0 <= e < E of weights[t, j] * down_e(bf16(silu(gate_e(x_t)) * up_e(x_t))),
//   e = expert_ids[t, j] - first_expert (MoeShape: under expert parallelism the stack holds the
//   layer's global experts [first_expert, first_expert + E); the router's other ids are other ranks'),
//
// bf16 activations, float32 accumulation, the intermediate h = silu(g) * u rounded to bf16 as the
// dense path rounds it; FP8 experts with few rows (MoeShape::fp8_mma_max_rows) instead quantize both
// products' inputs to fp8 per 128 columns and multiply them with the fp8 weights as stored, on the
// tensor cores (moe_fp8_rows.h); W4A8 products (int4 weights, docs/w4a8.md) quantize their input to
// e4m3 per row (or with the expert's static input scale) and take every expert, whatever its row
// count, through moe_w4a8_rows.h. Every kernel is sized on the host from the shapes alone (expert
// counts are computed and read on the device), so the op has no host synchronisation and no
// allocation and can be captured in a CUDA graph. Deterministic: the same inputs give the same bits
// on every run.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "backend/backend.h"

namespace dsinfer::backend::cuda {

// One stacked expert matrix [E, N, K] in device memory (LinearWeight's data/scale/format as pointers).
struct ExpertMatrix {
  // [E, N, K]: bf16 (kDense) or fp8 e4m3 (kFp8Block), contiguous; kW4A8: [E, N, K / 2] bytes, two int4
  // values a byte (docs/w4a8.md)
  const void* data = nullptr;
  // kFp8Block: [E, ceil(N / 128), ceil(K / 128)] f32; kW4A8: [E, N, K / group_size] f32; kDense: null
  const float* scale = nullptr;
  WeightFormat format = WeightFormat::kDense;
  // kW4A8 only: columns per scale (divides K), and the experts' static activation scales [E] f32 or
  // null (then each row's amax / 448).
  int64_t group_size = 0;
  const float* input_scale = nullptr;
  // kW4A8 only: AWQ's factors [E, K] f32 (16-byte aligned) that each expert's input is multiplied by
  // before its e4m3 quantization (docs/w4a8.md's pre_quant_scale), or null.
  const float* pre_scale = nullptr;
};

struct MoeShape {
  int64_t tokens = 0;       // T (for the scratch size: the largest T a step may have)
  int64_t top_k = 0;        // k, routed experts per token (8 for V3)
  int64_t num_experts = 0;  // E, the stack's experts, 1..1024 (256 for V3)
  // The global id of the stack's expert 0 (ExpertStack::first_expert): expert ids are global, and
  // the plan maps id to stack expert id - first_expert. 0 .. INT32_MAX - E.
  int64_t first_expert = 0;
  int64_t inter = 0;        // I, moe_intermediate_size (2048 for V3)
  int64_t hidden = 0;       // H, hidden_size (7168 for V3)
  // Kernel choice, not shape: experts with more rows than this go to the tensor-core kernel (when
  // the shapes allow it), the others to the GEMV kernels.
  int gemv_max_rows = 16;
  // Kernel choice: experts with 1..fp8_mma_max_rows rows take the FP8 tensor-core products
  // (moe_fp8_rows.h: fp8 activations, no dequantization pass) for each product whose weights are FP8,
  // when H and I are multiples of 128; the kernels above take the other experts. 0: never. 0..32.
  int fp8_mma_max_rows = 32;
  // ... and from this many rows: 2 leaves one-row experts to the one-row GEMV, 1 takes them too
  // (from 2 tokens on: a single token's experts all have one row, and stay on the GEMV). 1 or 2.
  int fp8_mma_min_rows = 2;
  // W4A8 products quantize their inputs into the scratch: which products are W4A8 (they must match the
  // ExpertMatrix formats moe_experts is given: these size the scratch), and whether gate_up's input is
  // quantized per row, i.e. per expert, not once per token: with static input scales or AWQ factors.
  bool w4a8_gate_up = false;
  bool w4a8_gate_up_per_row = false;
  bool w4a8_down = false;
  // Kernel choice: the W4A8 products' reference kernel (moe_w4a8_rows.h's kReference) instead of the
  // tensor-core one, which also takes the shapes the tensor-core kernel does not.
  bool w4a8_reference = false;
};

// Bytes of device scratch moe_experts needs for shape (grows with shape.tokens): the per-expert row
// offsets, the row permutation, h [T * k, I] bf16 and the per-row expert outputs [T * k, H] bf16.
// About T * k * (I + H) * 2 bytes: 150 KB per token for V3. With fp8_mma_max_rows (and H, I
// multiples of 128) also x and h quantized (e4m3 values stored as f16) with their scales,
// (T * H + T * k * I) * 2 bytes + 2%: 47 KB per token for V3. W4A8 products likewise: x (per token, or
// per row with static scales or AWQ factors: T * k * H * 2 bytes) and h quantized with one scale per row.
size_t moe_experts_scratch_bytes(const MoeShape& shape);

// x [T, H] bf16; expert_ids [T, k] int32 and weights [T, k] f32 (the router's output);
// gate_up [E, 2I, H] (per expert I gate rows then I up rows) and down [E, H, I]; out [T, H] bf16, which
// may be x itself (x is last read before out is written) but must not overlap the scratch.
// scratch: device memory of at least moe_experts_scratch_bytes(shape) bytes, 16-byte aligned, used
// only by the work queued here (it may be reused once that work is done, in stream order).
// Expert ids outside [first_expert, first_expert + E) are skipped (their slot contributes nothing: a
// dummy or padded row, or an expert another rank holds); a token with no valid slot gets zeros.
// Duplicate ids in a row are computed twice, as on the CPU. Queues its kernels on `stream` and
// returns; T == 0 queues nothing.
// Throws dsinfer::Error on a bad shape, format or scratch size, or a failed launch.
void moe_experts(const __nv_bfloat16* x, const int32_t* expert_ids, const float* weights,
                 const ExpertMatrix& gate_up, const ExpertMatrix& down, const MoeShape& shape,
                 __nv_bfloat16* out, void* scratch, size_t scratch_bytes, cudaStream_t stream);

// moe_experts' last kernel alone, for the kernel benchmark: out[t] = sum_j weights[t, j] *
// rows[slot_row[t, j]] over j = 0..top_k-1 in that order, f32 sums rounded to bf16; a slot_row of -1
// adds nothing. rows [*, hidden] and out [tokens, hidden] bf16, slot_row and weights [tokens, top_k]
// on the device. Queues one kernel on `stream`.
void moe_combine(const __nv_bfloat16* rows, const int32_t* slot_row, const float* weights, __nv_bfloat16* out,
                 int64_t tokens, int64_t top_k, int64_t hidden, cudaStream_t stream);

// The prefill form, for steps with many rows per expert: the same function, with each expert's two
// products done by `product` over a contiguous block of its rows (a library GEMM: cuBLASLt reaches
// the tensor cores' rate at these sizes, the grouped mma kernel above about a third of it). The
// plan runs on the device and its per-expert row counts are read back into host_offsets (pinned,
// E + 1 ints): one host synchronisation, so this form is never captured in a graph. x's rows are
// gathered into expert order first; silu(gate) * up is taken on the bf16 products, as the dense MLP
// takes it. Empty experts call nothing. Not for W4A8 matrices (moe_experts takes them at any size).
//   product(in [rows, K] bf16, rows, matrix, expert, N, K, out [rows, N] bf16): out = in . W_e^T.
using ExpertProduct = std::function<void(const __nv_bfloat16* in, int64_t rows, const ExpertMatrix& matrix,
                                         int64_t expert, int64_t out_features, int64_t in_features,
                                         __nv_bfloat16* out)>;
size_t moe_experts_by_expert_scratch_bytes(const MoeShape& shape);
void moe_experts_by_expert(const __nv_bfloat16* x, const int32_t* expert_ids, const float* weights,
                           const ExpertMatrix& gate_up, const ExpertMatrix& down, const MoeShape& shape,
                           const ExpertProduct& product, __nv_bfloat16* out, void* scratch, size_t scratch_bytes,
                           int32_t* host_offsets, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
