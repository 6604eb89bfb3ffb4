// The CUDA backend's matrix products: linear (y = x W^T) for bf16, f32 and FP8-block weights, and
// the per-head grouped product of absorbed MLA. cuBLASLt does the work; our own kernels
// (fp8_gemm.h) quantize activations for the FP8 path and take over any shape cuBLASLt refuses.
//
// Row-major contract, T = tokens (rows of x):
//   y[T, N] = x[T, K] . W[N, K]^T, float32 accumulation; x bf16; y bf16 or f32.
// Weights:
//   bf16  -> cuBLASLt bf16 x bf16, CUBLAS_COMPUTE_32F (bf16 or f32 output: the lm_head's logits);
//            one token row goes to gemv.h's weight-streaming kernel (GemmOptions).
//   f32   -> x converted to f32 in scratch, cuBLASLt f32 x f32 with CUBLAS_COMPUTE_32F, which never
//            uses TF32 (the MoE router gate: routing ties matter). f32 output only; a bf16 output
//            or a strided x goes to the fallback kernel.
//   FP8   -> DeepSeek's format: W e4m3 [N, K], scale f32 [ceil(N/128), ceil(K/128)], w = fp8 * scale.
//            x is quantized per token and 128 columns (scale = amax / 448) into scratch, then
//            cuBLASLt multiplies with VEC128_32F (x) and BLK128x128_32F (W) scales. cuBLASLt needs
//            K % 128 == 0, N % 16 == 0, (K / 128) % 4 == 0 (the weight scales' row stride) and a
//            token count that is a multiple of 4 (we pad with zero rows in scratch); other shapes,
//            and T <= GemmOptions::fp8_fallback_max_rows, run the fallback, which uses x in bf16
//            without quantizing it. The two differ by that activation rounding; both are within
//            bf16 tolerance for the model. Between fp8_fallback_max_rows and
//            GemmOptions::fp8_wgmma_max_rows tokens (decode), x is quantized the same way and our
//            swap-AB TMA + wgmma kernel (fp8_gemm_wgmma.h) multiplies instead of cuBLASLt: it needs
//            only K % 128 == 0 and streams the weights at close to HBM bandwidth.
// Any product cuBLASLt refuses at run time (no algorithm for the shape and the pointers' actual
// alignment, which we pass to its heuristic; FP8 weights or scales not 16-byte aligned) runs the
// fallback kernel instead: a call never fails for lack of support.
//
// CUDA graphs: every call takes a stream and only queues work on it (kernels, cublasLtMatmul and,
// for an FP8 product through cuBLASLt whose T is not a multiple of 4, one cudaMemcpy2DAsync). The
// first call for a (path, shape, strides, dtypes, pointer alignment) creates cuBLASLt descriptors and
// queries the heuristic (host work only); later calls reuse them, so run every shape once (warm-up)
// before capturing. No call allocates device memory or synchronizes. The workspace, and the split-K tile
// counters of the FP8 wgmma kernel (zero between calls), are shared by all calls: use a runner from
// one stream (or serialize its streams), and from one host thread.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/dtype.h"

namespace dsinfer::backend::cuda {

enum class GemmPath : uint8_t { kCublasLt, kFallback, kGemv, kFp8Wgmma };

struct GemmOptions {
  // FP8 weights: run the fallback (no activation quantization, one pass over W) when T <= this.
  // 0: cuBLASLt whenever it takes the shape. Measure before raising it (decode-sized products).
  int64_t fp8_fallback_max_rows = 0;
  // FP8 weights with fp8_fallback_max_rows < T <= this: activations quantized, then our swap-AB
  // wgmma kernel (fp8_gemm_wgmma.h) instead of cuBLASLt. 0: never (cuBLASLt, as before).
  int64_t fp8_wgmma_max_rows = 32;  // CudaOptions::fp8_wgmma_max_rows says why
  // Within that path, T >= this takes the tiled kernel (fp8_gemm_tiled.h: tokens on wgmma's M,
  // persistent tiles up to 256 x 128) where fp8_tiled_preferred says so, instead of the swap-AB one.
  int64_t fp8_tiled_min_rows = 33;
  // Launch that kernel programmatically: its first weight loads overlap the quantization's tail.
  bool programmatic_fp8_wgmma = true;
  // Every product through the fallback kernel (reference runs, debugging).
  bool force_fallback = false;
  // bf16 weights with at most kFallbackMaxOutputs rows: the fallback when T <= this, and at T = 1
  // gemv.h's kernel (for grouped products too). 0: always cuBLASLt. (At one row it streams the
  // weights faster than cuBLASLt's small-M kernels on every DeepSeek-V3 shape but the LM head; see
  // CudaOptions::bf16_gemv_max_rows.)
  int64_t bf16_fallback_max_rows = 0;
  static constexpr int64_t kFallbackMaxOutputs = 65536;  // below a vocabulary's 129,280
  // One-token bf16 products (gemv.h) launched programmatically: each starts streaming its weights
  // while the kernel before it finishes.
  bool programmatic_gemv = true;
};

// A linear weight as stored: [N, K] row-major (K contiguous).
struct GemmWeight {
  const void* data = nullptr;    // bf16, f32 or f8e4m3 (dtype)
  DType dtype = DType::kBF16;
  const float* scale = nullptr;  // kF8E4M3: [ceil(N/128), ceil(K/128)] f32 row-major, 16-byte aligned
};

struct LinearArgs {
  const __nv_bfloat16* x = nullptr;  // [T, K] bf16
  int64_t x_row_stride = 0;          // elements between rows; 0: K
  GemmWeight weight;
  void* y = nullptr;                 // [T, N], y_dtype (bf16 or f32); must not overlap x, W or scratch
  DType y_dtype = DType::kBF16;
  int64_t y_row_stride = 0;          // elements between rows; 0: N
  int64_t tokens = 0;                // T (0: nothing is queued)
  int64_t out_features = 0;          // N
  int64_t in_features = 0;           // K
  void* scratch = nullptr;           // device memory of at least plan_linear(...).scratch_bytes,
  size_t scratch_bytes = 0;          // 16-byte aligned; not used by anything else while queued
};

struct LinearPlan {
  GemmPath path = GemmPath::kCublasLt;  // the path taken when cuBLASLt (or our FP8 kernel) takes it
  size_t scratch_bytes = 0;
};

// The path a linear of this shape takes (unless cuBLASLt refuses it at run time, which falls back
// and needs no scratch) and the scratch it needs. scratch_bytes never decreases with tokens, so the
// value for the largest T of a run covers every smaller T: size the scratch once at start-up.
LinearPlan plan_linear(const GemmOptions& options, DType weight_dtype, DType y_dtype, int64_t tokens,
                       int64_t out_features, int64_t in_features);

// grouped_linear's row and group strides of x and y, in elements; 0: contiguous (x: G K and K,
// y: G N and N).
struct GroupedStrides {
  int64_t x_row = 0, x_group = 0, y_row = 0, y_group = 0;
};

class GemmRunner {
 public:
  // cuBLAS's recommended workspace on Hopper.
  static constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;

  // Allocates a kDefaultWorkspaceBytes workspace (once, here) on the current device, and the FP8
  // wgmma kernel's split-K tile counters (kFp8WgmmaMaxSplitTiles int32, zeroed here; both
  // constructors synchronize the device once for that).
  explicit GemmRunner(GemmOptions options = {});
  // Borrows `workspace` (device memory, 256-byte aligned, workspace_bytes long), which must outlive
  // the runner; workspace_bytes may be 0 (then cuBLASLt picks algorithms that need none). Allocates
  // the tile counters as above.
  GemmRunner(void* workspace, size_t workspace_bytes, GemmOptions options = {});
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  const GemmOptions& options() const;

  // y = x W^T as the top of this file says. Throws dsinfer::Error on bad arguments (null pointers,
  // shapes, strides < the row length, a weight dtype other than bf16 / f32 / f8e4m3, a y dtype other
  // than bf16 / f32, too little scratch) and on cuBLASLt errors other than "not supported".
  void linear(const LinearArgs& args, cudaStream_t stream);

  // x [T, G, K] bf16, weight [G, N, K] (bf16: cuBLASLt strided-batched; f32: the fallback),
  // y [T, G, N] bf16: y[t, g] = x[t, g] . weight[g]^T for each group g (absorbed MLA, G = heads),
  // contiguous unless `strides` says otherwise. Needs no scratch.
  void grouped_linear(const __nv_bfloat16* x, const void* weight, DType weight_dtype, __nv_bfloat16* y,
                      int64_t tokens, int64_t groups, int64_t out_features, int64_t in_features,
                      cudaStream_t stream, const GroupedStrides& strides = {});

  // The path the last linear or grouped_linear call took (tests check which one they measured).
  GemmPath last_path() const;

 private:
  bool one_row_gemv(DType weight_dtype, int64_t tokens) const;

  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dsinfer::backend::cuda
