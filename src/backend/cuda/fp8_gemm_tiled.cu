// The host side of the FP8 block-scaled GEMM for many token rows (fp8_gemm_tiled.h): the kernels of
// the static tile walk (dense rows), the chooser's cost model and the launch. The kernel, its shapes,
// roofline and launch configuration: fp8_gemm_tiled_kernel.cuh. Its walk by per-group row counts
// (the masked MoE layout) is instantiated in fp8_gemm_tiled_by_row_counts.cu: instantiated here, next
// to the dense kernels, it changed their machine code (the same sizes, but 45 to 1310 instructions
// allocated or scheduled otherwise), and the dense kernels' code is the one measured.
#include "backend/cuda/fp8_gemm_tiled.h"

#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/fp8_gemm_tiled_kernel.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/tensor_map.h"
#include "core/error.h"

namespace dsinfer::backend::cuda {
using namespace tiled;
namespace {


struct Built {
  int bm, bn;
  KernelFunction kernel;  // the static walk, for dense rows
  int threads;
  int stage_bytes;
  int scale_slot_bytes;
  int staging_bytes;
  int most_stages() const { return max_stages(stage_bytes, scale_slot_bytes, staging_bytes); }
};

template <int kConsumers, int kWaves, int kBn>
constexpr Built built() {
  using C = Config<kConsumers, kWaves, kBn>;
  return {C::kBm,         kBn, fp8_tiled_kernel<kConsumers, kWaves, kBn, false>, C::kThreads, C::kStageBytes,
          C::kScaleSlotBytes, C::kStagingBytes};
}

constexpr Built kBuilt[] = {built<1, 1, 64>(), built<1, 1, 128>(), built<1, 1, 192>(), built<2, 1, 64>(),
                            built<2, 1, 128>(),  built<2, 1, 192>(), built<2, 2, 128>()};

const Built* find_built(int bm, int bn) {
  for (const Built& b : kBuilt)
    if (b.bm == bm && b.bn == bn) return &b;
  return nullptr;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

CUtensorMap make_map(const void* data, uint64_t rows, uint64_t k, uint32_t box_rows, const char* what) {
  return make_swizzled_2d_map(data, CU_TENSOR_MAP_DATA_TYPE_UINT8, k, rows, k, kBlockK, box_rows, what);
}

}  // namespace

std::string Fp8TiledConfig::describe() const {
  return str_cat("tiled bm ", bm, " bn ", bn, " stages ", stages, " blocks ", blocks,
                 tma_scales ? "" : " cp.async scales");
}

bool fp8_tiled_config_valid(const Fp8TiledConfig& config) {
  const Built* b = find_built(config.bm, config.bn);
  return b != nullptr && config.stages >= 0 && config.stages <= b->most_stages() &&
         config.stages != 1 && config.blocks >= 0;
}

bool fp8_tiled_supported(const Fp8WgmmaGemm& g) {
  const int64_t y_row_stride = g.y_row_stride == 0 ? g.n : g.y_row_stride;
  const size_t y_element = g.y_dtype == DType::kF32 ? 4 : 2;
  return fp8_wgmma_supported(g) && g.n % 2 == 0 && y_row_stride % 2 == 0 &&
         (g.groups == 1 || (g.y_group_stride == 0 ? g.group_rows * y_row_stride : g.y_group_stride) % 2 == 0) &&
         aligned(g.y, 2 * y_element);
}

// The chooser's model (H200 measurements of fp8_gemm_wgmma_check, rounded): a tile costs, per K block,
// the larger of its MMAs (2 bm n 128 FLOP at ~9.5 TFLOP/s an SM with two consumer warpgroups, ~5 with
// one: a lone warpgroup cannot hide its promotions) and its loads ((bm + bn) 128 bytes at ~40 GB/s an
// SM), plus ~0.7 us a tile (epilogue, ring turnover); tiles run in rounds of one an SM; and nothing
// beats reading W and q once from HBM.
namespace {
constexpr double kTwoWarpgroupFlopsPerNs = 9500, kOneWarpgroupFlopsPerNs = 5000;
constexpr double kTileBytesPerNs = 40, kTileFixedNs = 700, kTiledHbmBytesPerNs = 3000;

struct TiledEstimate {
  double ns;
  int64_t tiles;
};

TiledEstimate tiled_estimate(int bm, int bn, int64_t max_m, int64_t n, int64_t k, int64_t groups, int sm_count) {
  const int64_t m_tiles = ceil_div(max_m, bm), tiles = groups * m_tiles * ceil_div(n, bn);
  const int64_t rows = std::min<int64_t>(bm, ceil_div(max_m, 64) * 64);  // rows a tile multiplies usefully
  const double mma = 2.0 * rows * bn * kBlockK / (bm >= 128 ? kTwoWarpgroupFlopsPerNs : kOneWarpgroupFlopsPerNs);
  const double load = static_cast<double>(bm + bn) * kRowBytes / kTileBytesPerNs;
  const double rounds = static_cast<double>(ceil_div(tiles, std::max(sm_count, 1)));
  const double hbm = static_cast<double>(groups) * (n + max_m) * k / kTiledHbmBytesPerNs;
  return {std::max(hbm, rounds * ((k / kBlockK) * std::max(mma, load) + kTileFixedNs)), tiles};
}

constexpr int kTiledShapes[][2] = {{256, 128}, {128, 192}, {128, 128}, {128, 64}, {64, 128}, {64, 64}};  // (bm, bn)
}  // namespace

Fp8TiledConfig choose_fp8_tiled_config(int64_t max_m, int64_t n, int64_t k, int64_t groups, int sm_count) {
  Fp8TiledConfig best{64, 64, 0, 0};
  double best_ns = std::numeric_limits<double>::infinity();
  for (const auto& shape : kTiledShapes) {
    // No tile taller than the rows rounded up to a warpgroup's 64.
    if (shape[0] > 64 && shape[0] > ceil_div(max_m, 64) * 64) continue;
    const double ns = tiled_estimate(shape[0], shape[1], max_m, n, k, groups, sm_count).ns;
    if (ns < best_ns) best_ns = ns, best = {shape[0], shape[1], 0, 0};
  }
  return best;
}

Fp8TiledConfig choose_fp8_tiled_config_for_counts(int64_t group_rows, int64_t n, int64_t k, int64_t groups,
                                                  int sm_count) {
  return group_rows <= 64 ? Fp8TiledConfig{64, 128, 0, 0} : Fp8TiledConfig{128, 192, 0, 0};
}

bool fp8_tiled_preferred(int64_t max_m, int64_t n, int64_t k, int64_t groups, int sm_count) {
  if (max_m <= 32) return false;
  // With fewer tiles than half the SMs even at 64 x 64, the swap-AB kernel's split-K streams the
  // weights faster.
  return tiled_estimate(64, 64, max_m, n, k, groups, sm_count).tiles * 2 >= sm_count;
}

void fp8_tiled_gemm(const Fp8WgmmaGemm& g, const Fp8TiledConfig& config, cudaStream_t stream) {
  DSINFER_CHECK(fp8_tiled_supported(g), "fp8_tiled_gemm: unsupported arguments (N ", g.n, ", K ", g.k, ", groups ",
                g.groups, ", group rows ", g.group_rows, ", q rows ", g.q_rows, ", scale stride ", g.scale_stride,
                "): K must be a multiple of 128, N and the y strides even, W and q 16-byte aligned, y bf16 or f32 "
                "aligned to two elements, and the strides must cover the rows");
  DSINFER_CHECK(fp8_tiled_config_valid(config), "fp8_tiled_gemm: no kernel for ", config.describe());
  if (g.group_rows == 0) return;
  const Built& b = *find_built(config.bm, config.bn);
  const int stages = config.stages == 0 ? b.most_stages() : config.stages;

  KernelParams p{};
  p.w_scale = g.w_scale;
  p.x_scale = g.x_scale;
  p.rows_per_group = g.rows_per_group;
  p.y = g.y;
  p.scale_stride = g.scale_stride;
  p.y_row_stride = g.y_row_stride == 0 ? g.n : g.y_row_stride;
  p.y_group_stride = g.y_group_stride == 0 ? g.group_rows * p.y_row_stride : g.y_group_stride;
  p.n = static_cast<int>(g.n);
  p.n_scale_rows = static_cast<int>(ceil_div(g.n, kBlockK));
  p.k_blocks = static_cast<int>(g.k / kBlockK);
  p.group_rows = static_cast<int>(g.group_rows);
  p.m_tiles = static_cast<int>(ceil_div(g.group_rows, config.bm));
  p.n_tiles = static_cast<int>(ceil_div(g.n, config.bn));
  const int64_t tiles = g.groups * p.m_tiles * p.n_tiles;
  DSINFER_CHECK(tiles <= std::numeric_limits<int32_t>::max(), "fp8_tiled_gemm: ", tiles, " tiles are too many");
  p.tiles = static_cast<int>(tiles);
  p.stages = stages;
  p.y_f32 = g.y_dtype == DType::kF32;
  // TMA stores need a 16-byte aligned y with 16-byte row and group strides.
  p.tma_store = !p.y_f32 && aligned(g.y, 16) && p.y_row_stride % 8 == 0 && p.y_group_stride % 8 == 0;
  // The token scales by TMA need a 16-byte aligned x_scale with rows of a multiple of 16 bytes.
  p.tma_scales = config.tma_scales && aligned(g.x_scale, 16) && g.scale_stride % 4 == 0;
  // With per-group counts the grid still covers up to group_rows' tiles (the counts are on the
  // device); blocks past the tiles with rows exit at once.
  const KernelFunction kernel = g.rows_per_group == nullptr ? b.kernel : by_row_counts_kernel(b.bm, b.bn);

  const CUtensorMap q_map = make_map(g.q, static_cast<uint64_t>(g.q_rows), g.k, config.bm, "the FP8 activations");
  const CUtensorMap w_map = make_map(g.w, static_cast<uint64_t>(g.groups * g.n), g.k, config.bn, "the FP8 weights");
  const int blocks = static_cast<int>(
      std::min<int64_t>(tiles, config.blocks > 0 ? config.blocks : fp8_wgmma_sm_count()));
  // y as [groups][group_rows][n] bf16, written in 64 x 64 boxes (the 128-byte swizzle of the staging).
  const CUtensorMap y_map =
      p.tma_store ? make_swizzled_3d_map(g.y, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                                         {static_cast<uint64_t>(g.n), static_cast<uint64_t>(g.group_rows),
                                          static_cast<uint64_t>(g.groups)},
                                         {static_cast<uint64_t>(p.y_row_stride) * 2,
                                          static_cast<uint64_t>(p.y_group_stride) * 2},
                                         {64, 64, 1}, "the bf16 output")
                  : q_map;  // unused
  // x_scale as [k_blocks][q_rows] f32 (the row stride scale_stride), read bm rows of a K block a box.
  const CUtensorMap scale_map =
      p.tma_scales ? make_plain_2d_map(g.x_scale, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, static_cast<uint64_t>(g.q_rows),
                                       static_cast<uint64_t>(p.k_blocks), static_cast<uint64_t>(g.scale_stride) * 4,
                                       static_cast<uint32_t>(config.bm), 1, "the FP8 activations' scales")
                   : q_map;  // unused
  const int smem = smem_bytes(b.stage_bytes, b.scale_slot_bytes, b.staging_bytes, stages);
  // A function attribute, not a stream operation: legal (and cheap) during graph capture.
  DSINFER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  ProgrammaticLaunch launch(dim3(static_cast<unsigned>(blocks)), dim3(b.threads), smem, stream, g.programmatic);
  DSINFER_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, kernel, q_map, w_map, y_map, scale_map, p));
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
