// The two routed-expert products of moe_experts (moe.h) for FP8 experts with few rows each (decode:
// 1 to 32 rows per expert), on the tensor cores with the weights as they are stored (sm_90 has no FP8
// mma.sync: each weight is unpacked to f16 in registers, exactly, and multiplied with f32 accumulation,
// which is the FP8 instruction's arithmetic; moe_fp8_rows.cu says why):
//
//   gate_up: h[r, i] = bf16(silu(g) * u),  g = x_t . W_e[i]^T,  u = x_t . W_e[I + i]^T   (t = token of row r)
//   down:    y[r, n] = bf16(h_r . D_e[n]^T)
//
// with both inputs quantized to e4m3 per row and 128 columns (DeepGEMM's activation format):
//   s[r, b] = amax(|v[r, 128b .. 128b + 127]|) / 448 (1 where that amax is 0), q[r, k] = e4m3(v[r, k] / s[r, k / 128]),
// and every product summed per 128-column block in f32 then scaled ("promoted"):
//   out = sum over b of (sum over k in block b of q[k] * w8[n, k]) * weight_scale[n / 128, b] * s[r, b].
// So these products differ from the bf16-activation kernels of moe.cu by the activation rounding (about
// 2^-5 relative per element, averaging out over K: ~1e-3 NMSE through both products, inside the
// conformance bound kBoundMoeFp8 = 6e-3).
//
// Everything is read and written on the device (the plan's offsets and row permutation, the expert
// list): no host synchronisation, capturable in a CUDA graph. Deterministic (fixed summation order, no
// atomics). Only experts with 1..max_rows rows are computed; other experts' rows are not touched.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace dsinfer::backend::cuda {

// The most rows per expert the product kernels take (two chunks of two n8 tiles of activation rows).
inline constexpr int kFp8RowsMaxRows = 32;

// Whether the kernels serve these widths: H and I multiples of 128 (whole scale blocks, whole tiles).
bool fp8_rows_supported(int64_t hidden, int64_t inter);

// x [rows, width] bf16 (16-byte aligned, width % 128 == 0) -> q [rows, width] and scale
// [rows, width / 128] f32, row-major, with the formula above (round to nearest, saturating). q holds
// the e4m3 values stored as f16 (exact: every e4m3 value is an f16), so that the product kernels feed
// the tensor cores without converting activations (see moe_fp8_rows.cu). With offsets
// ([num_experts + 1], the plan's, on the device), only the rows of experts with min_rows..max_rows
// rows are written (rows past offsets[num_experts] and rows of larger experts are skipped); with offsets null,
// every row. rows may be 0 (queues nothing).
void fp8_rows_quantize(const __nv_bfloat16* x, int64_t rows, int64_t width, const int32_t* offsets, int num_experts,
                       int min_rows, int max_rows, __half* q, float* scale, cudaStream_t stream);

// How the product kernels copy weights into shared memory (tuning, not semantics: the same bits).
enum class Fp8RowsLoad {
  kWarpRows,  // each warp copies its 32 weight rows cooperatively: 8 (16) lanes per row, whole 128-byte lines
  kLanes,     // each lane copies the chunks it multiplies (64 bytes of 8 rows per warp instruction)
};

// One grouped product over the experts with min_rows..max_rows rows.
struct Fp8RowsProduct {
  bool gate_up = true;                     // true: h = silu(gate) * up (above); false: y = h . D^T
  const __nv_fp8_e4m3* weight = nullptr;   // [E, N, K] e4m3: gate_up N = 2I, K = H; down N = H, K = I
  const float* weight_scale = nullptr;     // [E, N / 128, K / 128] f32
  const __half* act = nullptr;             // gate_up: the tokens' q [T, H]; down: the rows' q [rows, I]
  const float* act_scale = nullptr;        // [same rows, K / 128] f32 (fp8_rows_quantize)
  const int32_t* offsets = nullptr;        // [E + 1]: expert e's rows are [offsets[e], offsets[e + 1])
  const int32_t* row_source = nullptr;     // gate_up: [rows] token * top_k + slot of each row; down: unused
  int top_k = 1;
  int num_experts = 0;                     // E, 1..1024
  int64_t inter = 0;                       // I
  int64_t hidden = 0;                      // H
  int min_rows = 1;                        // 1..max_rows
  int max_rows = 16;                       // 1..kFp8RowsMaxRows
  int64_t row_bound = 0;                   // an upper bound of offsets[E] (T * top_k): sizes the grid
  __nv_bfloat16* out = nullptr;            // gate_up: h [rows, I]; down: y [rows, H]; bf16
  // Tuning, not semantics (the result is the same bits): 128-column blocks per pipeline stage, 1 (six
  // stages of 16 KB per block) or 2 (three of 32 KB); 0 takes the default (1). 2 applies only with
  // K / 128 even (else 1).
  int stage_k_blocks = 0;
  Fp8RowsLoad load = Fp8RowsLoad::kWarpRows;  // tuning, not semantics (above)
};

// Queues the product on `stream`. Weights, act and out 16-byte aligned; out must not overlap the
// inputs. Throws dsinfer::Error on bad arguments or a failed launch.
void fp8_rows_product(const Fp8RowsProduct& product, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
