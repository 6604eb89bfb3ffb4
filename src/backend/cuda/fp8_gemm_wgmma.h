// Our own FP8 block-scaled GEMM for small token counts (decode): TMA + warpgroup MMA with the
// operands swapped (weights on wgmma's M, tokens on its N). See fp8_gemm_wgmma.cu for the kernel.
//
//   y[g, t, n] = sum_kb w_scale[g, n / 128, kb] * x_scale[kb, row(g, t)]
//                       * sum_{k in block kb} fp8(W[g, n, k]) * fp8(q[row(g, t), k])
//   row(g, t) = g * group_rows + t,  for t < m_g = rows_per_group[g] (y rows t >= m_g are not written)
//
// W [groups, n, k] e4m3 with DeepSeek's 128 x 128 block scales [groups, ceil(n / 128), k / 128] f32;
// q and x_scale are quantize_fp8_per_token_group's output (fp8_gemm.h) over groups * group_rows rows:
// q [q_rows, k] e4m3, x_scale [k / 128, scale_stride] f32 token-contiguous. y bf16 or f32. A dense
// linear is groups = 1, group_rows = T, rows_per_group = nullptr. The masked grouped layout of decode
// MoE (every expert's rows padded to group_rows, the real counts on the device) is groups = E.
//
// Split-K: when the weight tiles are too few to fill the GPU, K is split over several blocks; each
// writes its f32 partial tile to the caller's workspace and the last block of a tile to arrive
// (a per-tile counter) adds the partials in split order (deterministic: the same bits whichever
// block arrives last) and writes y. The counters must be zero before the first call; every call
// leaves them zero again (so a captured CUDA graph replays), and two calls that share counters must
// not run concurrently.
//
// Launchers queue work on `stream` and return: no allocation, no synchronization, no host copy
// (graph-capturable). Bad arguments throw dsinfer::Error.
#pragma once

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace dsinfer::backend::cuda {

// How a product is cut up (fp8_gemm_wgmma.cu):
//   bn     tokens per block, wgmma's N: 8, 16, 32 or 64 (groups of more rows take several m tiles)
//   rows   weight rows per block: 64 (one consumer warpgroup) or 128 (two)
//   splits blocks that share one tile's K (1: no split-K; at most k / 128)
//   stages depth of the TMA ring (2..kFp8WgmmaMaxStages), one 128-wide K block a stage
struct Fp8WgmmaTiling {
  int bn = 64;
  int rows = 64;
  int splits = 1;
  int stages = 8;
  std::string describe() const;
};

inline constexpr int kFp8WgmmaMaxStages = 8;
// Tiles (groups x n tiles x m tiles) a split product may have: the counters a caller provides.
inline constexpr int64_t kFp8WgmmaMaxSplitTiles = 1024;

struct Fp8WgmmaGemm {
  const __nv_fp8_e4m3* w = nullptr;  // [groups, n, k] e4m3, 16-byte aligned
  const float* w_scale = nullptr;    // [groups, ceil(n / 128), k / 128] f32
  const __nv_fp8_e4m3* q = nullptr;  // [q_rows, k] e4m3, 16-byte aligned
  int64_t q_rows = 0;                // >= groups * group_rows (rows past it read as zeros)
  const float* x_scale = nullptr;    // [k / 128, scale_stride] f32: row r, block kb at kb * scale_stride + r
  int64_t scale_stride = 0;          // >= groups * group_rows
  int64_t group_rows = 0;            // rows of each group in q and y (dense: T)
  const int32_t* rows_per_group = nullptr;  // [groups] device int32, clamped to [0, group_rows]; nullptr: all
  void* y = nullptr;                 // [groups][group_rows, n], bf16 or f32 (y_dtype)
  DType y_dtype = DType::kBF16;
  int64_t y_row_stride = 0;          // elements; 0: n
  int64_t y_group_stride = 0;        // elements; 0: group_rows * y_row_stride
  int64_t n = 0;
  int64_t k = 0;                     // a multiple of 128
  int64_t groups = 1;
  void* workspace = nullptr;         // split-K partials: fp8_wgmma_workspace_bytes, 16-byte aligned
  size_t workspace_bytes = 0;
  int32_t* tile_counters = nullptr;  // split-K: fp8_wgmma_tile_counters(...) int32, zero (see above)
  int64_t tile_counter_capacity = 0;
  // Launched with programmatic stream serialization (pdl.cuh): the weight loads of the first stages
  // start while the kernel before (the activation quantization) finishes; q, x_scale,
  // rows_per_group, y, the workspace and the counters are touched only after it completed.
  bool programmatic = false;
};

// Whether the kernel takes these arguments (k a positive multiple of 128; w and q 16-byte aligned;
// scales non-null; y bf16 or f32 and aligned to its element; strides that fit; groups * n, q_rows
// below 2^31). The workspace and counters are checked by the launcher against the tiling.
bool fp8_wgmma_supported(const Fp8WgmmaGemm& g);

// The tiling for max_m rows a group (dense: T), n x k weights, `groups` of them, on a GPU with
// sm_count SMs: bn from max_m, then the (rows, splits) that a bandwidth model of the GPU says is
// fastest, splitting K only when the tiles leave SMs idle.
Fp8WgmmaTiling choose_fp8_wgmma_tiling(int64_t max_m, int64_t n, int64_t k, int64_t groups, int sm_count);

// Split-K needs: workspace bytes (0 without split-K) and tile counters (0 without split-K).
size_t fp8_wgmma_workspace_bytes(const Fp8WgmmaTiling& tiling, int64_t max_m, int64_t n, int64_t groups);
int64_t fp8_wgmma_tile_counters(const Fp8WgmmaTiling& tiling, int64_t max_m, int64_t n, int64_t groups);

// The largest workspace choose_fp8_wgmma_tiling's tilings need for any max_m in [1, max_rows]
// (a size that does not decrease with max_rows: plan scratch once for the largest).
size_t fp8_wgmma_workspace_bound(int64_t max_rows, int64_t n, int64_t k, int64_t groups, int sm_count);

// Whether a tiling is one the kernel is built for (bn, rows) with splits in [1, k / 128] and stages
// in [2, kFp8WgmmaMaxStages].
bool fp8_wgmma_tiling_valid(const Fp8WgmmaTiling& tiling, int64_t k);

// Queues the product with the given tiling. Throws unless fp8_wgmma_supported(g) and the tiling is
// valid, and (split-K) the workspace and counters are large enough. y must not overlap the inputs.
void fp8_wgmma_gemm(const Fp8WgmmaGemm& g, const Fp8WgmmaTiling& tiling, cudaStream_t stream);

// The SM count of the current device (the chooser's input; a host query, legal during capture).
int fp8_wgmma_sm_count();

}  // namespace dsinfer::backend::cuda
