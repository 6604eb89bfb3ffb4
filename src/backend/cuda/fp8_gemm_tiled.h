// Our FP8 block-scaled GEMM for many token rows (prefill, large decode batches, MoE groups of many
// rows): persistent blocks walk 128 x 128 output tiles with the tokens on warpgroup MMA's M and the
// weights on its N, fed by TMA, with DeepSeek's per-128-K promotion. fp8_gemm_wgmma.h is its
// counterpart for few tokens (weights on M); both take the same Fp8WgmmaGemm arguments:
//
//   y[g, t, n] = sum_kb w_scale[g, n / 128, kb] * x_scale[kb, row(g, t)]
//                       * sum_{k in block kb} fp8(W[g, n, k]) * fp8(q[row(g, t), k])
//   row(g, t) = g * group_rows + t,  for t < m_g = rows_per_group[g] (rows t >= m_g are not written)
//
// The split-K workspace and counters of Fp8WgmmaGemm are not used. Launchers queue work on `stream`
// and return: no allocation, no synchronization, no host copy (graph-capturable). Bad arguments
// throw dsinfer::Error.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backend/cuda/fp8_gemm_wgmma.h"

namespace dsinfer::backend::cuda {

// How a product is cut up (fp8_gemm_tiled_kernel.cuh):
//   bm      token rows per tile: 64 (one consumer warpgroup), 128 (two) or 256 (two, two waves each)
//   bn      weight rows per tile: 64, 128 (never straddling a 128-row scale block) or 192 (two
//           scale blocks' rows; not with bm 256)
//   stages  depth of the TMA ring, one 128-wide K block a stage; 0: as deep as shared memory allows
//   blocks  persistent blocks; 0: one an SM (never more than the tiles)
//   tma_scales  the token scales of a stage by one TMA box where x_scale is 16-byte aligned with a
//           scale_stride a multiple of 4 (else, and when false, by the producer warp's cp.async)
struct Fp8TiledConfig {
  int bm = 128;
  int bn = 128;
  int stages = 0;
  int blocks = 0;
  bool tma_scales = true;
  std::string describe() const;
};

// Whether the kernel takes these arguments: fp8_wgmma_supported's conditions, and n and the y row
// stride even (y is written in pairs of columns) with y aligned to a pair.
bool fp8_tiled_supported(const Fp8WgmmaGemm& g);

// The configuration for max_m rows a group (dense: T) of n x k weights, `groups` of them, on a GPU
// with sm_count SMs: the tile shape a cost model of the GPU says is fastest (fp8_gemm_tiled.cu).
Fp8TiledConfig choose_fp8_tiled_config(int64_t max_m, int64_t n, int64_t k, int64_t groups, int sm_count);

// The configuration for groups with per-group row counts (the masked MoE layout), whose counts are
// on the device: only the tiles with rows are walked. Groups of up to 64 rows take 64 x 128 tiles,
// larger ones 128 x 192. Measured on an H200 (kernels_bench's masked cases, 32 groups, expected
// rows 20 (groups of 64) and 192 (of 320) of (4096, 7168) / (7168, 2048), us): at 20 rows 64 x 128
// 241 / 129 against 251 / 132 (64 x 192) and 267 / 139 (128 x 192); at 192 rows 128 x 192
// 444 / 247 against 450 / 263 (256 x 128), 506 / 258 (128 x 128) and 633 / 299 (64 x 128).
Fp8TiledConfig choose_fp8_tiled_config_for_counts(int64_t group_rows, int64_t n, int64_t k, int64_t groups, int sm_count);

// Whether this kernel, rather than fp8_gemm_wgmma.h's swap-AB one, should take the product: more than
// 32 rows, and enough tiles to occupy half the SMs (otherwise swap-AB's split-K streams the weights
// faster).
bool fp8_tiled_preferred(int64_t max_m, int64_t n, int64_t k, int64_t groups, int sm_count);

// Whether the kernel is built for (bm, bn), with stages in [0, the most that fit] and blocks >= 0.
bool fp8_tiled_config_valid(const Fp8TiledConfig& config);

// Queues the product. Throws unless fp8_tiled_supported(g) and the configuration is valid. y must
// not overlap the inputs.
void fp8_tiled_gemm(const Fp8WgmmaGemm& g, const Fp8TiledConfig& config, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
