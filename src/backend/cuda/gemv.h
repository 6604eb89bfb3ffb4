// One-token products: y[g, n] = x[g, :] . W[g, n, :] for every group g (one
// group for a linear; the heads for absorbed MLA's grouped products). This is batch-1 decode's
// shape: every weight is read once and used once, so the kernel is a weight stream and its only
// measure is bytes per second against the copy ceiling.
//
// Why not the fallback GEMM (fp8_gemm.h): it gives a block of 128 threads four weight rows and the
// whole K, which leaves short rows (K = 128, 512, 1536) with one or two loads per thread, and
// narrow products (N = 576) with about one block per SM. Here a team of lanes owns whole rows
// (several at short K, so that each lane keeps ~16 loads of 16 bytes in flight), and narrow
// products split K over the warps of a block. See gemv.cu for the layouts.
//
// Programmatic launch: with `programmatic` set the kernel is launched with programmatic stream
// serialization, so that it may start while the kernel before it finishes (CUDA graphs keep this
// as a programmatic edge). It issues its first weight loads (weights are never written by a step)
// and only then waits for the previous kernel (griddepcontrol.wait) before it reads x or writes y.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace dsinfer::backend::cuda {

struct Gemv {
  const __nv_bfloat16* x = nullptr;  // [groups][k] bf16, group g at x + g * x_group_stride
  int64_t x_group_stride = 0;
  const void* w = nullptr;  // [groups][n, k] row-major (w_dtype), group g at w + g * w_group_stride elements
  DType w_dtype = DType::kBF16;  // bf16, or e4m3 with DeepSeek's 128 x 128 block scales (one group)
  int64_t w_group_stride = 0;
  const float* w_scale = nullptr;  // e4m3: [ceil(n / 128), ceil(k / 128)] f32 row-major
  void* y = nullptr;                 // [groups][n] bf16 or f32 (y_dtype), group g at y + g * y_group_stride
  DType y_dtype = DType::kBF16;
  int64_t y_group_stride = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t groups = 1;
  bool programmatic = false;
};

// How the kernel tiles the weight rows (gemv.cu): lanes per team, rows per team, warps that split K,
// and 16-byte loads in flight per lane.
struct GemvTiling {
  int team = 32;
  int rows = 1;
  int split = 1;
  int loads = 8;
  std::string describe() const;
};

// Every tiling the kernel is built for (gemv_check times each), and the one gemv() uses for a shape.
std::vector<GemvTiling> gemv_tilings();
GemvTiling choose_gemv_tiling(int64_t n, int64_t k, int64_t groups, DType w_dtype = DType::kBF16);

// Whether gemv() takes these arguments: k filling 16-byte chunks (a multiple of 8 for bf16, 16 for
// e4m3) and at most 65536, x, w and their group strides 16-byte aligned, y aligned to its element,
// n * groups < 2^31; e4m3 weights with their scales, one group and a bf16 y. Otherwise use the
// fallback GEMM.
bool gemv_supported(const Gemv& g);

// Queues the product on `stream`; throws dsinfer::Error unless gemv_supported(g). y must not
// overlap x or w. Deterministic: a fixed summation order for a given shape.
void gemv(const Gemv& g, cudaStream_t stream);
// The same with a given tiling (one of gemv_tilings(), its rows dividing n).
void gemv(const Gemv& g, const GemvTiling& tiling, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
