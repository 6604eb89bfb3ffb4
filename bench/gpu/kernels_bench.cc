// kernels_bench: dsinfer's decode- and prefill-path kernels one by one at DeepSeek-V3's shapes, against
// the chip's ceilings measured in the same run and the published kernels' figures of ANCHORS.md
// (FlashMLA, DeepGEMM on the same GPU kind). Issue 8's benchmark command:
//
//   build/bench/kernels_bench [--runs N] [--out FILE] [--only SECTION]
//   (default bench/results/kernels_<gpu>.json)
//
// Timing (issue 8, ANCHORS.md): the L2 flushed before each call (a 256 MiB cudaMemsetAsync outside
// the timed region), CUDA events around the one call, the median of --runs (default 20) after two
// warm-ups. Cases:
//   - MLA decode (mla_decode.h, the production kernel: kWgmma, 16 heads padding its MMA rows), BF16 paged
//     cache (page 64, 576 / 512): heads 128 and 16, 1 and 2 query tokens per sequence (MTP),
//     batch 64 and 128, cache 1K / 4K / 8K. TFLOP/s counts 2 * heads * cache_len * (576 + 512) per
//     query token; TB/s the cache bytes read once. Beside each, the FP8 cache's kernel
//     (mla_decode_fp8.h) on the same shapes: *_fp8_us, *_fp8_tb_s (576 bytes a row), *_fp8_tflops and
//     *_fp8_vs_bf16 (the BF16 kernel's time over the FP8 one's, same run; issue 9's bar: 1.8 at
//     h128 q1 b128 c4096).
//   --only mla|gemm|grouped|small|prefill runs one section (benchmark kernels_<section>, written to
//   bench/results/kernels_<section>_<gpu>.json by default).
//   - FP8 block GEMM (GemmRunner::linear with CudaOptions' thresholds, the production path: the
//     streaming GEMV at 1 row, our swap-AB or tiled wgmma kernels up to fp8_wgmma_max_rows, cuBLASLt
//     with DeepSeek's block scales beyond, activations quantized inside the call), bf16 out, M from 1
//     to 4096 over the four (N, K) of ANCHORS.md. TB/s counts the weight bytes, TFLOP/s 2 * M * N * K;
//     cuBLASLt's block-scaled product at the same M is timed beside it, and from 64 rows our kernel
//     alone (the DeepGEMM comparison: its figures are kernel times).
//   - Masked grouped FP8 GEMM (decode MoE: 32 experts, expected m 20 and 192) through the groups
//     dimension of our tiled or swap-AB kernel, against DeepGEMM's m_grouped masked figures; and the
//     contiguous layout (prefill MoE: 4 groups of 8576 rows, 34304 in all) through the tiled kernel's
//     groups with dense rows, against DeepGEMM's m_grouped contiguous figures.
//   - The small ops (small_ops_cases.h): routing, SiLU-mul (+ FP8 quant), add + RMSNorm (+ FP8 quant),
//     RoPE and the latent-cache write, 1 to 16K tokens, bytes moved against the copy bandwidth.
//   - Prefill attention (prefill_cases.h): causal, 8 x 2K, 1 x 16K, a 4K chunk on a 4K prefix, TFLOP/s
//     against the BF16 ceiling and the 550 TFLOP/s bar.
// Every figure goes to the result JSON; the anchor block carries the ANCHORS.md figures for this GPU.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/fp8_gemm.h"
#include "backend/cuda/fp8_gemm_tiled.h"
#include "backend/cuda/fp8_gemm_wgmma.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/mla_decode.h"
#include "bench/result_file.h"
#include "cli/flags.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/json.h"

#include "ceilings.h"  // bench/gpu/, next to this file
#include "kernel_timing.h"
#include "prefill_cases.h"
#include "small_ops_cases.h"

namespace dsinfer::bench {
namespace {

using backend::cuda::GemmRunner;
using backend::cuda::LinearArgs;
using bf16 = __nv_bfloat16;

// ANCHORS.md, H200 (kernel times with the L2 flushed): FlashMLA decode and DeepGEMM FP8 GEMMs.
struct MlaAnchor { int heads, q, batch, cache; double us; };
constexpr MlaAnchor kFlashMlaH200[] = {{128, 1, 64, 4096, 117},  {128, 1, 128, 4096, 229}, {128, 1, 128, 8192, 442},
                                       {128, 2, 128, 4096, 420}, {16, 1, 128, 4096, 163},  {16, 1, 128, 8192, 307},
                                       {16, 1, 64, 1024, 34}};
struct GemmAnchor { int m, n, k; double us; };
constexpr GemmAnchor kDeepGemmH200[] = {{64, 7168, 2048, 7.8},      {64, 4096, 7168, 13.6},     {64, 24576, 1536, 16.1},
                                        {64, 2112, 7168, 10.1},     {4096, 7168, 2048, 90.7},   {4096, 4096, 7168, 165.9},
                                        {4096, 24576, 1536, 230.8}, {4096, 2112, 7168, 93.6}};

// The printed columns of a case's anchor: its time and our ratio to it ("-" without one).
struct AnchorColumns {
  std::string time = "-";
  std::string ratio = "-";
};

// Our time for case `key` against the anchor's `anchor_us` (0: none for this case or this GPU),
// like with like: the anchors are kernel times, so ours is `gpu_us` (the timer's kernel time from
// CUPTI's records) where there is one, else `us` (CUDA events, which hold the launch too). The
// anchor's time goes to `anchors`, the ratio (anchor time / ours) to `figures` as key +
// ratio_suffix.
AnchorColumns compare_with_anchor(const std::string& key, double us, double gpu_us, double anchor_us,
                                  const char* ratio_suffix, Json& figures, Json& anchors) {
  AnchorColumns columns;
  if (anchor_us <= 0) return columns;
  if (gpu_us > 0) us = gpu_us;
  anchors[key + "_us"] = anchor_us;
  figures[key + ratio_suffix] = anchor_us / us;
  columns.time = str_cat(anchor_us);
  columns.ratio = str_cat(std::round(anchor_us / us * 100) / 100);
  return columns;
}

void mla_cases(Timer& timer, cudaStream_t stream, int sm_count, bool h200, Json& figures, Json& anchors) {
  std::printf("\nMLA decode, BF16 paged cache (page 64, 576 / 512)\n");
  std::printf("  (us: CUDA events around the call; gpu us: its kernel time from CUPTI, as FlashMLA's figures)\n");
  std::printf("  heads  q  batch  cache        us    gpu us   TFLOP/s    TB/s   FlashMLA us   ratio"
              "  |  fp8 us  fp8 TB/s  fp8 TFLOP/s  fp8/bf16\n");
  const int width = backend::cuda::kMlaCacheWidth, page = backend::cuda::kMlaPageSize;
  for (int heads : {128, 16})
    for (int q : {1, 2})
      for (int batch : {64, 128})
        for (int cache : {1024, 4096, 8192}) {
          if (heads == 16 && q == 2) continue;  // the MTP case is measured at 128 heads, as ANCHORS.md
          const int tokens = batch * q, pages_per_seq = cache / page, pages = batch * pages_per_seq;
          Buffer q_buf(size_t(tokens) * heads * width * 2), cache_buf(size_t(pages) * page * width * 2),
              cache_fp8(size_t(pages) * page * width), out(size_t(tokens) * heads * 512 * 2);
          fill(cache_fp8.get(), DType::kF8E4M3, int64_t(pages) * page * width, 3, -1, 1, stream);
          fill(q_buf.get(), DType::kBF16, int64_t(tokens) * heads * width, 1, -1, 1, stream);
          fill(cache_buf.get(), DType::kBF16, int64_t(pages) * page * width, 2, -1, 1, stream);
          std::vector<int32_t> token_sequence(tokens), positions(tokens), table_start(batch + 1), page_ids(pages);
          for (int b = 0; b < batch; ++b) {
            table_start[b] = b * pages_per_seq;
            for (int j = 0; j < q; ++j) {
              token_sequence[b * q + j] = b;
              positions[b * q + j] = cache - q + j;
            }
          }
          table_start[batch] = pages;
          for (int i = 0; i < pages; ++i) page_ids[i] = (i * 7919) % pages;  // scattered pages
          Buffer d_seq(tokens * 4), d_pos(tokens * 4), d_start((batch + 1) * 4), d_pages(pages * 4);
          DSINFER_CUDA_CHECK(cudaMemcpy(d_seq.get(), token_sequence.data(), tokens * 4, cudaMemcpyHostToDevice));
          DSINFER_CUDA_CHECK(cudaMemcpy(d_pos.get(), positions.data(), tokens * 4, cudaMemcpyHostToDevice));
          DSINFER_CUDA_CHECK(cudaMemcpy(d_start.get(), table_start.data(), (batch + 1) * 4, cudaMemcpyHostToDevice));
          DSINFER_CUDA_CHECK(cudaMemcpy(d_pages.get(), page_ids.data(), pages * 4, cudaMemcpyHostToDevice));
          Buffer scratch(backend::cuda::mla_decode_scratch_bytes(tokens, heads, sm_count));
          backend::cuda::MlaDecodeArgs args;
          args.q = q_buf.get<bf16>();
          args.cache = cache_buf.get<bf16>();
          args.token_sequence = d_seq.get<int32_t>();
          args.positions = d_pos.get<int32_t>();
          args.page_table_start = d_start.get<int32_t>();
          args.page_ids = d_pages.get<int32_t>();
          args.out = out.get<bf16>();
          args.tokens = tokens;
          args.heads = heads;
          args.sm_count = sm_count;
          args.scale = 0.1f;
          args.scratch = scratch.get();
          args.scratch_bytes = scratch.bytes();
          const double us =
              timer.median_us([&] { backend::cuda::mla_decode(args, backend::cuda::MlaDecodeKernel::kWgmma, stream); });
          const double gpu_us = timer.kernel_median_us();
          // Each query token attends to about `cache` rows (the last q tokens see slightly fewer).
          const double flops = 2.0 * heads * double(cache) * (576 + 512) * tokens;
          const double bytes = double(batch) * cache * width * 2;
          const double tflops = flops / us / 1e6, tbs = bytes / us / 1e6;
          double anchor = 0;
          for (const MlaAnchor& a : kFlashMlaH200)
            if (a.heads == heads && a.q == q && a.batch == batch && a.cache == cache) anchor = a.us;
          const std::string key = str_cat("mla_h", heads, "_q", q, "_b", batch, "_c", cache);
          figures[key + "_us"] = us;
          if (gpu_us > 0) figures[key + "_gpu_us"] = gpu_us;
          figures[key + "_tflops"] = tflops;
          figures[key + "_tb_s"] = tbs;
          const AnchorColumns compared =
              compare_with_anchor(key, us, gpu_us, h200 ? anchor : 0, "_vs_flashmla", figures, anchors);
          // The same attention over an FP8 cache (--kv-cache-dtype fp8: mla_decode_fp8.h, FP8 wgmma for
          // Q K^T and P V): half the cache bytes; *_fp8_vs_bf16 = the BF16 kernel's time / the FP8
          // kernel's, kernel times where CUPTI gives both.
          backend::cuda::MlaDecodeArgs fp8_args = args;
          fp8_args.cache = nullptr;
          fp8_args.cache_fp8 = cache_fp8.get<uint8_t>();
          const double fp8_us = timer.median_us(
              [&] { backend::cuda::mla_decode(fp8_args, backend::cuda::MlaDecodeKernel::kWgmma, stream); });
          const double fp8_gpu_us = timer.kernel_median_us();
          const double fp8_tbs = bytes / 2 / fp8_us / 1e6, fp8_tflops = flops / fp8_us / 1e6;
          const double fp8_vs_bf16 = gpu_us > 0 && fp8_gpu_us > 0 ? gpu_us / fp8_gpu_us : us / fp8_us;
          figures[key + "_fp8_us"] = fp8_us;
          if (fp8_gpu_us > 0) figures[key + "_fp8_gpu_us"] = fp8_gpu_us;
          figures[key + "_fp8_tflops"] = fp8_tflops;
          figures[key + "_fp8_tb_s"] = fp8_tbs;
          figures[key + "_fp8_vs_bf16"] = fp8_vs_bf16;
          std::printf("  %5d %2d %6d %6d %9.1f %9.1f %9.1f %7.2f %13s %7s  | %7.1f %9.2f %12.1f %9.2f\n", heads, q,
                      batch, cache, us, gpu_us, tflops, tbs, compared.time.c_str(), compared.ratio.c_str(), fp8_us,
                      fp8_tbs, fp8_tflops, fp8_vs_bf16);
        }
}

// Our FP8 kernel alone on activations quantized beforehand, as DeepGEMM's figures are its kernel
// alone: the tiled kernel where fp8_tiled_preferred says so, else the swap-AB kernel, each with the
// configuration its chooser picks.
struct KernelTime {
  double us = 0;      // CUDA events
  double gpu_us = 0;  // CUPTI's kernel time (0: none)
  std::string config;
};
KernelTime fp8_kernel_us(Timer& timer, cudaStream_t stream, const bf16* x, const void* w,
                                             const float* w_scale, void* y, int64_t m, int64_t n, int64_t k,
                                             int sm_count) {
  const int64_t t4 = (m + 3) / 4 * 4;
  Buffer q(size_t(t4) * k), x_scale(size_t(k / 128) * t4 * 4);
  backend::cuda::quantize_fp8_per_token_group(x, k, m, t4, k, q.get<__nv_fp8_e4m3>(), x_scale.get<float>(), stream);
  backend::cuda::Fp8WgmmaGemm g;
  g.w = static_cast<const __nv_fp8_e4m3*>(w);
  g.w_scale = w_scale;
  g.q = q.get<__nv_fp8_e4m3>();
  g.q_rows = t4;
  g.x_scale = x_scale.get<float>();
  g.scale_stride = t4;
  g.group_rows = m;
  g.y = y;
  g.n = n;
  g.k = k;
  if (backend::cuda::fp8_tiled_preferred(m, n, k, 1, sm_count)) {
    const backend::cuda::Fp8TiledConfig config = backend::cuda::choose_fp8_tiled_config(m, n, k, 1, sm_count);
    const double us = timer.median_us([&] { backend::cuda::fp8_tiled_gemm(g, config, stream); });
    return {us, timer.kernel_median_us(), config.describe()};
  }
  const backend::cuda::Fp8WgmmaTiling tiling = backend::cuda::choose_fp8_wgmma_tiling(m, n, k, 1, sm_count);
  Buffer workspace(backend::cuda::fp8_wgmma_workspace_bytes(tiling, m, n, 1));
  const int64_t counters = backend::cuda::fp8_wgmma_tile_counters(tiling, m, n, 1);
  Buffer tile_counters(size_t(std::max<int64_t>(counters, 1)) * 4);
  DSINFER_CUDA_CHECK(cudaMemset(tile_counters.get(), 0, tile_counters.bytes()));
  g.workspace = workspace.get();
  g.workspace_bytes = workspace.bytes();
  g.tile_counters = tile_counters.get<int32_t>();
  g.tile_counter_capacity = counters;
  const double us = timer.median_us([&] { backend::cuda::fp8_wgmma_gemm(g, tiling, stream); });
  return {us, timer.kernel_median_us(), tiling.describe()};
}

void gemm_cases(Timer& timer, cudaStream_t stream, int sm_count, bool h200, const Ceilings& ceilings, Json& figures,
                Json& anchors) {
  std::printf("\nFP8 block GEMM (1x128 activations, 128x128 weights), bf16 out: GemmRunner's production path\n"
              "  (quantization + GEMM) beside cuBLASLt's; from 64 rows also our kernel alone (\"kernel us\", the\n"
              "  tiled or swap-AB kernel and the configuration their choosers pick), which DeepGEMM's kernel-only\n"
              "  figures are compared with\n");
  std::printf("  (gpu us: the kernel's time from CUPTI, as DeepGEMM's figures, which the ratio compares it with)\n");
  std::printf("      M      N      K        us   TFLOP/s  weight TB/s   of copy  cuBLASLt us   ratio  kernel us     gpu us"
              "  kernel TFLOP/s   DeepGEMM us   ratio\n");
  const backend::cuda::CudaOptions defaults;
  backend::cuda::GemmOptions options;  // as the CUDA backend sets them (CudaOptions' defaults)
  options.fp8_fallback_max_rows = defaults.fp8_gemv_max_rows;
  options.fp8_wgmma_max_rows = defaults.fp8_wgmma_max_rows;
  options.bf16_fallback_max_rows = defaults.bf16_gemv_max_rows;
  GemmRunner production(options);
  backend::cuda::GemmOptions cublas_options;  // cuBLASLt's block-scaled product at every M
  cublas_options.fp8_wgmma_max_rows = 0;
  GemmRunner cublas(cublas_options);
  struct Nk { int n, k; };
  for (Nk nk : {Nk{7168, 2048}, Nk{4096, 7168}, Nk{24576, 1536}, Nk{2112, 7168}}) {
    const int64_t n = nk.n, k = nk.k;
    Buffer w(size_t(n) * k), scale(size_t((n + 127) / 128) * ((k + 127) / 128) * 4);
    fill(w.get(), DType::kF8E4M3, n * k, 3, -200, 200, stream);
    fill(scale.get(), DType::kF32, (n + 127) / 128 * ((k + 127) / 128), 4, 1e-4f, 3e-4f, stream);
    for (int m : {1, 2, 4, 8, 16, 32, 64, 128, 256, 4096}) {
      Buffer x(size_t(m) * k * 2), y(size_t(m) * n * 2);
      fill(x.get(), DType::kBF16, int64_t(m) * k, 5, -1, 1, stream);
      const size_t scratch_bytes =
          std::max(backend::cuda::plan_linear(options, DType::kF8E4M3, DType::kBF16, m, n, k).scratch_bytes,
                   backend::cuda::plan_linear(cublas_options, DType::kF8E4M3, DType::kBF16, m, n, k).scratch_bytes);
      Buffer scratch(scratch_bytes);
      LinearArgs args;
      args.x = x.get<bf16>();
      args.weight = {w.get(), DType::kF8E4M3, scale.get<float>()};
      args.y = y.get();
      args.tokens = m;
      args.out_features = n;
      args.in_features = k;
      args.scratch = scratch.get();
      args.scratch_bytes = scratch.bytes();
      const double us = timer.median_us([&] { production.linear(args, stream); });
      const double cublas_us = timer.median_us([&] { cublas.linear(args, stream); });
      KernelTime kernel;
      if (m >= 64)
        kernel = fp8_kernel_us(timer, stream, x.get<bf16>(), w.get(), scale.get<float>(), y.get(), m, n, k, sm_count);
      const double kernel_us = kernel.us;
      const double tflops = 2.0 * m * n * k / us / 1e6, tbs = double(n) * k / us / 1e6;
      double anchor = 0;
      for (const GemmAnchor& a : kDeepGemmH200)
        if (a.m == m && a.n == n && a.k == k) anchor = a.us;
      const std::string key = str_cat("fp8_gemm_m", m, "_n", n, "_k", k);
      figures[key + "_us"] = us;
      figures[key + "_tflops"] = tflops;
      figures[key + "_weight_tb_s"] = tbs;
      figures[key + "_cublaslt_us"] = cublas_us;
      if (kernel_us > 0) figures[key + "_kernel_us"] = kernel_us;
      if (kernel.gpu_us > 0) figures[key + "_kernel_gpu_us"] = kernel.gpu_us;
      const AnchorColumns compared = compare_with_anchor(key, kernel_us > 0 ? kernel_us : us, kernel.gpu_us,
                                                         h200 ? anchor : 0, "_vs_deepgemm", figures, anchors);
      std::printf("  %5d %6lld %6lld %9.1f %9.1f %12.2f %8.0f%% %12.1f %7.2f", m, static_cast<long long>(n),
                  static_cast<long long>(k), us, tflops, tbs, 100.0 * tbs / ceilings.copy_tb_s, cublas_us,
                  cublas_us / us);
      if (kernel_us > 0) {
        std::printf(" %10.1f %10.1f %15.1f", kernel_us, kernel.gpu_us, 2.0 * m * n * k / kernel_us / 1e6);
      } else {
        std::printf(" %10s %10s %15s", "", "", "");
      }
      std::printf(" %13s %7s   %s\n", compared.time.c_str(), compared.ratio.c_str(), kernel.config.c_str());
    }
  }
  std::printf("  (ceilings of this run: FP8 GEMM %.0f TFLOP/s, copy %.2f TB/s)\n", ceilings.fp8_tflops, ceilings.copy_tb_s);
}

// A grouped FP8 GEMM's operands on the device, random: `groups` e4m3 weight matrices [n, k] with
// their 128 x 128 block scales, `rows` e4m3 activation rows with their per-128-column scales
// (token-contiguous, as the kernels take them) and a bf16 y; fills seeded seed .. seed + 3.
struct GroupedOperands {
  Buffer w, w_scale, q, x_scale, y;
  GroupedOperands(int64_t groups, int64_t rows, int n, int k, uint64_t seed, cudaStream_t stream)
      : w(size_t(groups) * n * k),
        w_scale(size_t(groups) * ((n + 127) / 128) * (k / 128) * 4),
        q(size_t(rows) * k),
        x_scale(size_t(k / 128) * rows * 4),
        y(size_t(rows) * n * 2) {
    fill(w.get(), DType::kF8E4M3, groups * n * k, seed, -200, 200, stream);
    fill(w_scale.get(), DType::kF32, groups * ((n + 127) / 128) * (k / 128), seed + 1, 1e-4f, 3e-4f, stream);
    fill(q.get(), DType::kF8E4M3, rows * k, seed + 2, -400, 400, stream);
    fill(x_scale.get(), DType::kF32, (k / 128) * rows, seed + 3, 1e-3f, 2e-3f, stream);
  }
  // The product over them: group g's rows g * group_rows .. (dense; the caller sets rows_per_group
  // for the masked layout).
  backend::cuda::Fp8WgmmaGemm gemm(int64_t groups, int64_t rows, int64_t group_rows, int n, int k) {
    backend::cuda::Fp8WgmmaGemm g;
    g.w = w.get<__nv_fp8_e4m3>();
    g.w_scale = w_scale.get<float>();
    g.q = q.get<__nv_fp8_e4m3>();
    g.q_rows = rows;
    g.x_scale = x_scale.get<float>();
    g.scale_stride = rows;
    g.group_rows = group_rows;
    g.y = y.get();
    g.n = n;
    g.k = k;
    g.groups = groups;
    return g;
  }
};

// Decode MoE's masked grouped FP8 GEMM: 32 experts, each with its own row count (drawn around the
// expected m) in a group padded to group_rows, through the groups dimension of our tiled kernel
// (fp8_gemm_tiled.h) where fp8_tiled_preferred says so, else of the swap-AB one (fp8_gemm_wgmma.h),
// with the configuration their choosers pick. DeepGEMM's m_grouped masked figures of
// ANCHORS.md are the anchor; TB/s counts every expert's weights once.
void grouped_gemm_cases(Timer& timer, cudaStream_t stream, int sm_count, bool h200, const Ceilings& ceilings,
                        Json& figures, Json& anchors) {
  std::printf("\nGrouped FP8 GEMM, masked (decode MoE): 32 experts, rows per expert drawn in [m/2, 3m/2], bf16 out\n");
  std::printf("  expected m      N      K  group rows        us    gpu us  weight TB/s  of copy   DeepGEMM us   ratio\n");
  struct Case { int m, n, k; double deepgemm_us; };
  constexpr int kExperts = 32;
  for (const Case& c : {Case{20, 4096, 7168, 240}, Case{20, 7168, 2048, 132}, Case{192, 4096, 7168, 364},
                        Case{192, 7168, 2048, 203}}) {
    const int64_t group_rows = (3 * c.m / 2 + 63) / 64 * 64;
    const int64_t rows = kExperts * group_rows;
    GroupedOperands operands(kExperts, rows, c.n, c.k, 41, stream);
    Buffer counts(kExperts * 4);
    std::vector<int32_t> host_counts(kExperts);
    uint32_t state = 12345;
    for (int32_t& count : host_counts) {
      state = state * 1664525u + 1013904223u;
      count = c.m / 2 + static_cast<int32_t>((state >> 8) % static_cast<uint32_t>(c.m + 1));  // [m/2, 3m/2]
    }
    DSINFER_CUDA_CHECK(cudaMemcpy(counts.get(), host_counts.data(), kExperts * 4, cudaMemcpyHostToDevice));
    backend::cuda::Fp8WgmmaGemm g = operands.gemm(kExperts, rows, group_rows, c.n, c.k);
    g.rows_per_group = counts.get<int32_t>();
    const bool tiled = backend::cuda::fp8_tiled_preferred(group_rows, c.n, c.k, kExperts, sm_count);
    const backend::cuda::Fp8TiledConfig config =
        backend::cuda::choose_fp8_tiled_config_for_counts(group_rows, c.n, c.k, kExperts, sm_count);
    const backend::cuda::Fp8WgmmaTiling tiling =
        backend::cuda::choose_fp8_wgmma_tiling(group_rows, c.n, c.k, kExperts, sm_count);
    Buffer workspace(backend::cuda::fp8_wgmma_workspace_bytes(tiling, group_rows, c.n, kExperts));
    const int64_t counters = backend::cuda::fp8_wgmma_tile_counters(tiling, group_rows, c.n, kExperts);
    Buffer tile_counters(size_t(std::max<int64_t>(counters, 1)) * 4);
    DSINFER_CUDA_CHECK(cudaMemset(tile_counters.get(), 0, tile_counters.bytes()));
    g.workspace = workspace.get();
    g.workspace_bytes = workspace.bytes();
    g.tile_counters = tile_counters.get<int32_t>();
    g.tile_counter_capacity = counters;
    const double us = timer.median_us([&] {
      if (tiled) {
        backend::cuda::fp8_tiled_gemm(g, config, stream);
      } else {
        backend::cuda::fp8_wgmma_gemm(g, tiling, stream);
      }
    });
    const double gpu_us = timer.kernel_median_us();
    const double tbs = double(kExperts) * c.n * c.k / us / 1e6;
    const std::string key = str_cat("grouped_masked_m", c.m, "_n", c.n, "_k", c.k);
    figures[key + "_us"] = us;
    if (gpu_us > 0) figures[key + "_gpu_us"] = gpu_us;
    figures[key + "_weight_tb_s"] = tbs;
    const AnchorColumns compared =
        compare_with_anchor(key, us, gpu_us, h200 ? c.deepgemm_us : 0, "_vs_deepgemm", figures, anchors);
    std::printf("  %10d %6d %6d %11lld %9.1f %9.1f %12.2f %7.0f%% %13s %7s   (%s)\n", c.m, c.n, c.k,
                static_cast<long long>(group_rows), us, gpu_us, tbs, 100 * tbs / ceilings.copy_tb_s, compared.time.c_str(),
                compared.ratio.c_str(), tiled ? config.describe().c_str() : tiling.describe().c_str());
    if (!tiled) continue;
    // Every tile shape of the tiled kernel on the same rows, for the chooser: the counts are on the
    // device, so the chooser sees only group_rows.
    std::printf("  %10s tile shapes:", "");
    for (const auto& [bm, bn] : {std::pair{256, 128}, std::pair{128, 192}, std::pair{128, 128}, std::pair{128, 64},
                                std::pair{64, 192}, std::pair{64, 128}, std::pair{64, 64}}) {
      const backend::cuda::Fp8TiledConfig shape{bm, bn, 0, 0};
      const double shape_us = timer.median_us([&] { backend::cuda::fp8_tiled_gemm(g, shape, stream); });
      figures[str_cat(key, "_bm", bm, "_bn", bn, "_us")] = shape_us;
      std::printf("  %dx%d %.1f", bm, bn, shape_us);
    }
    std::printf(" us\n");
  }
}

// Prefill MoE's grouped FP8 GEMM, DeepGEMM's "contiguous" layout: each group's rows one after another
// (ANCHORS.md's case: 4 groups, 34304 rows, every group 8576 = 67 x 128 of them), here the tiled
// kernel's groups dimension with dense rows (group g's rows g * 8576 ..), its chooser's configuration.
// TFLOP/s counts 2 * rows * N * K; DeepGEMM's m_grouped contiguous figures of ANCHORS.md the anchor.
void grouped_contiguous_cases(Timer& timer, cudaStream_t stream, int sm_count, bool h200, const Ceilings& ceilings,
                              Json& figures, Json& anchors) {
  std::printf("\nGrouped FP8 GEMM, contiguous (prefill MoE): 4 groups of 8576 rows, bf16 out\n");
  std::printf("  groups   rows      N      K        us    gpu us   TFLOP/s  of FP8   DeepGEMM us   ratio\n");
  struct Case { int n, k; double deepgemm_us; };
  constexpr int kGroups = 4, kGroupRows = 8576;
  for (const Case& c : {Case{4096, 7168, 1410}, Case{7168, 2048, 744}}) {
    const int64_t rows = int64_t{kGroups} * kGroupRows;
    GroupedOperands operands(kGroups, rows, c.n, c.k, 51, stream);
    const backend::cuda::Fp8WgmmaGemm g = operands.gemm(kGroups, rows, kGroupRows, c.n, c.k);
    const backend::cuda::Fp8TiledConfig config =
        backend::cuda::choose_fp8_tiled_config(kGroupRows, c.n, c.k, kGroups, sm_count);
    const double us = timer.median_us([&] { backend::cuda::fp8_tiled_gemm(g, config, stream); });
    const double gpu_us = timer.kernel_median_us();
    const double tflops = 2.0 * rows * c.n * c.k / (gpu_us > 0 ? gpu_us : us) / 1e6;
    const std::string key = str_cat("grouped_contiguous_g", kGroups, "_n", c.n, "_k", c.k);
    figures[key + "_us"] = us;
    if (gpu_us > 0) figures[key + "_gpu_us"] = gpu_us;
    figures[key + "_tflops"] = tflops;
    const AnchorColumns compared =
        compare_with_anchor(key, us, gpu_us, h200 ? c.deepgemm_us : 0, "_vs_deepgemm", figures, anchors);
    std::printf("  %6d %6lld %6d %6d %9.1f %9.1f %9.0f %6.0f%% %13s %7s   (%s)\n", kGroups,
                static_cast<long long>(rows), c.n, c.k, us, gpu_us, tflops, 100 * tflops / ceilings.fp8_tflops,
                compared.time.c_str(), compared.ratio.c_str(), config.describe().c_str());
  }
}

int run(int argc, char** argv) {
  cli::Flags flags("kernels_bench [flags]", "dsinfer's kernels at DeepSeek-V3 shapes against the ceilings and ANCHORS.md");
  flags.add_int("runs", "timed runs per case (the median is reported; at least 10)", 20);
  flags.add_string("out", "FILE", "result JSON (default bench/results/kernels_<gpu>.json)");
  flags.add_string("only", "SECTION", "run one section: mla, gemm, grouped, small or prefill (default: all)", false,
                   "");
  if (!flags.parse(argc - 1, argv + 1)) return 0;
  const std::string only = flags.get_string("only");
  DSINFER_CHECK(only.empty() || only == "mla" || only == "gemm" || only == "grouped" || only == "small" ||
                    only == "prefill",
                "--only ", only, ": not a section (mla, gemm, grouped, small, prefill)");
  auto section = [&](const char* name) { return only.empty() || only == name; };
  const int runs = static_cast<int>(std::max<int64_t>(10, flags.get_int("runs")));

  DSINFER_CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  DSINFER_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string name = prop.name;
  const bool h200 = name.find("H200") != std::string::npos;
  const std::string tag = gpu_tag(name);
  std::printf("%s\nmeasuring the ceilings ...\n", gpu_device_name(0).c_str());
  const Ceilings ceilings = measure_ceilings(0);
  std::printf("ceilings: copy %.2f TB/s, BF16 GEMM %.0f TFLOP/s, FP8 GEMM %.0f TFLOP/s\n", ceilings.copy_tb_s,
              ceilings.bf16_tflops, ceilings.fp8_tflops);

  cudaStream_t stream;
  DSINFER_CUDA_CHECK(cudaStreamCreate(&stream));
  Json figures = Json::object(), anchors = Json::object();
  {
    Timer timer(stream, runs);
    // What the method itself costs: the events around a 4-byte memset right after the flush. Small
    // kernels' times include it; ANCHORS.md's H200 kernel times (CUPTI) do not.
    Buffer tiny(256);
    const double floor_us =
        timer.median_us([&] { DSINFER_CUDA_CHECK(cudaMemsetAsync(tiny.get(), 0, 4, stream)); });
    figures["timing_floor_us"] = floor_us;
    std::printf("timing floor (CUDA events around a 4-byte memset after the L2 flush): %.1f us\n", floor_us);
    if (section("mla")) mla_cases(timer, stream, prop.multiProcessorCount, h200, figures, anchors);
    if (section("gemm")) gemm_cases(timer, stream, prop.multiProcessorCount, h200, ceilings, figures, anchors);
    if (section("grouped")) {
      grouped_gemm_cases(timer, stream, prop.multiProcessorCount, h200, ceilings, figures, anchors);
      grouped_contiguous_cases(timer, stream, prop.multiProcessorCount, h200, ceilings, figures, anchors);
    }
    if (section("small")) small_op_cases(timer, stream, ceilings, figures);
    if (section("prefill")) prefill_attention_cases(timer, stream, ceilings, figures);
  }
  DSINFER_CUDA_CHECK(cudaStreamDestroy(stream));

  Json result;
  // One section's run is a benchmark of its own (kernels_mla, ...), in a file of its own by default: it
  // never replaces the whole run's figures.
  result["benchmark"] = only.empty() ? std::string("kernels") : str_cat("kernels_", only);
  result["device"] = gpu_device_name(0);
  Json config;
  config["runs"] = runs;
  config["timing"] = "CUDA events around one call, L2 flushed (256 MiB memset) before each, median; *_gpu_us: the "
                     "same runs' kernel time (first kernel start to last kernel end) from CUPTI's activity records, "
                     "median, which the *_vs_* ratios use where present (ANCHORS.md's figures are kernel times); the "
                     "small ops' (route, silu_mul, add_rms_norm, rope, write_latent_cache) *_us and *_tb_s are kernel "
                     "times where CUPTI gives them";
  result["config"] = config;
  figures["ceiling_copy_tb_s"] = ceilings.copy_tb_s;
  figures["ceiling_bf16_tflops"] = ceilings.bf16_tflops;
  figures["ceiling_fp8_tflops"] = ceilings.fp8_tflops;
  result["figures"] = figures;
  Json anchor;
  anchor["name"] = h200 ? "FlashMLA and DeepGEMM on an H200 (ANCHORS.md, kernel times with the L2 flushed)"
                        : "none for this GPU in ANCHORS.md's kernel tables";
  for (const auto& [key, value] : anchors.as_object()) anchor[key] = value;
  result["anchor"] = anchor;
  const std::string out = flags.has("out") ? flags.get_string("out")
                                           : str_cat("bench/results/", only.empty() ? "kernels" : str_cat("kernels_", only),
                                                     "_", tag, ".json");
  write_result(out, result);
  std::printf("\nwrote %s\n", out.c_str());
  return 0;
}

}  // namespace
}  // namespace dsinfer::bench

int main(int argc, char** argv) {
  return dsinfer::bench::run_benchmark("kernels_bench", dsinfer::bench::run, argc, argv);
}
