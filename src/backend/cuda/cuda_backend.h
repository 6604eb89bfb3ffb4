// The CUDA backend: the op interface on one Hopper GPU (sm_90a).
//
// Activations are bf16 with float32 accumulation inside every op (compute_dtype() is kBF16); the
// router's logits and weights and the sampler's logits are float32. Every op is queued on the
// backend's one stream and returns without waiting; to_host, synchronize and sample_tokens wait.
// Device memory comes from a caching allocator (device_memory.h) and the per-step metadata from one
// upload per forward pass (step_metadata.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "backend/backend.h"

namespace dsinfer::backend::cuda {

struct CudaOptions {
  int device = 0;
  // The obviously-correct reference kernels instead of the fast ones (attention on CUDA cores,
  // every product through our own fallback GEMM): what the fast ones are tested against.
  bool reference_kernels = false;
  // Kernel choices by size, measured on an H200 (bench/gpu/model_step_bench --fp8-gemv-max-rows,
  // --moe-gemv-max-rows): FP8 linears with at most this many rows run our one-pass GEMV instead of
  // quantizing activations for cuBLASLt; routed experts with at most this many rows run the GEMV
  // kernels, more the tensor-core kernel.
  // H200, DeepSeek-V3 widths, 4 layers at context 2048, step ms at batch 1 / 64 / 256:
  //   FP8 GEMV never, expert GEMV up to 16 rows:  1.88 / 7.25 / 18.03
  //   FP8 GEMV up to 16 rows, expert GEMV 16:     1.69 / 7.25 / 18.09
  //   FP8 GEMV up to 16 rows, expert GEMV 4 / 1:  1.71 / 7.07 / 12.20  and  1.70 / 7.22 / 12.19
  //   FP8 GEMV up to 4 rows, expert GEMV 2:       1.72 / 6.98 / 12.18
  // Per product (bench/gpu/kernels_bench, H200, us, GEMV / cuBLASLt at 32 rows), the GEMV loses from
  // 8 rows on: N 7168 K 2048 21.7 / 15.3 at 8 rows, 37.3 at 16; N 24576 K 1536 53.3 / 24.4 at 8,
  // 102.4 at 16; at 4 rows it is level or ahead on three of the four shapes. That made it 4, until
  // the wgmma kernel below: from 2 rows on it is level or ahead of the GEMV on three of the four
  // shapes (H200, us, GEMV / wgmma at 2 rows: 14.0 / 12.1, 17.7 / 18.9, 30.3 / 21.2, 14.0 / 14.2).
  int64_t fp8_gemv_max_rows = 1;
  // FP8 linears with more rows than that and at most this many take our TMA + wgmma kernels
  // (GemmOptions::fp8_wgmma_max_rows: swap-AB fp8_gemm_wgmma.h to 32 rows, then fp8_gemm_tiled.h
  // where fp8_tiled_preferred says so), beyond it cuBLASLt; 0: never. H200, fp8_gemm_wgmma_check,
  // 2026-11-25, quantization + kernel against quantization + cuBLASLt over the five shapes: ours
  // faster at 1-32 rows (1.0-1.9x), level at 64, cuBLASLt faster on most shapes from 128. Hence 64.
  int64_t fp8_wgmma_max_rows = 64;
  // bf16 products with one token row (linears, the LM head, absorbed MLA's per-head products) run
  // gemv.h's weight-streaming kernel instead of cuBLASLt (GemmOptions::bf16_fallback_max_rows; more
  // rows up to this many take fp8_gemm.h's fallback); 0: never. (One-row FP8 products take it too
  // while fp8_gemv_max_rows >= 1: V3 4 layers FP8, batch 1, 1.279 ms against 1.318 through the
  // fallback.) H200, one row, us (L2 flushed, CUDA
  // events, gemv_check), gemv / cuBLASLt: q_a 11.6 / 14.1, kv_a 9.1 / 9.8, q_b 24.2 / 29.7, w_uk
  // 9.5 / 11.5, w_uv 9.8 / 10.7, o_proj 63.0 / 72.9, dense gate_up 126 / 140, dense down 70.8 / 76.2,
  // LM head 418 / 419. programmatic_gemv launches them with programmatic dependencies (pdl.cuh): the
  // 3-layer bf16 model's batch-1 step 1.439 ms with, 1.470 ms without (model_step_bench
  // --no-programmatic-gemv). One-row f32 products (the router) take the fallback GEMM.
  int64_t bf16_gemv_max_rows = 1;
  bool programmatic_gemv = true;
  int moe_gemv_max_rows = 2;
  // FP8 routed experts with more rows than the expert GEMV takes and at most this many take the
  // FP8-activation product kernels (moe_fp8_rows.h: weights unpacked once, tiles of 8 rows) instead of
  // the 16-row tensor-core tile; 0: never. At most 32. H200, V3 widths, one MoE layer (moe_fp8_rows_check,
  // all experts' rows through one path): 256 tokens 4.08 vs 4.88 ms; 64 tokens 3.37 vs 3.48 ms.
  // 32, not 16: at batch 256 the one or two experts past 16 rows took 190 us of a 7.5 ms 4-layer
  // step on the 16-row tile (model_step_bench's kernel breakdown); as 16-row chunks of the same
  // launch they cost one more read of their weights.
  int moe_fp8_mma_max_rows = 32;
  // ... from this many rows (MoeShape::fp8_mma_min_rows): 2 leaves one-row experts to the GEMV, 1
  // takes them too from two tokens on. 1 or 2.
  int moe_fp8_mma_min_rows = 2;
  // MLA decode: the fewest cache pages a split-KV chunk covers (mla_decode.h). H200, V3 widths, 4
  // layers at context 2048, graphs on, step ms at batch 1 / 8 / 64 / 256 (bench/gpu/model_step_bench
  // --mla-min-split-pages): 2 pages 1.471 / 3.009 / 5.889 / 10.604, 1 page 1.469 / 3.043 / 5.914 / 10.618.
  int mla_min_split_pages = 2;
  // MLA decode on the warpgroup tensor cores (mla_decode_wgmma.h; heads a multiple of 64), else the
  // mma.sync kernel.
  bool mla_wgmma = true;
};

// What the device is and what it holds, for start-up reports and the memory plan.
struct CudaDeviceInfo {
  std::string name;
  int multiprocessors = 0;
  size_t total_bytes = 0;
  size_t free_bytes = 0;
};
CudaDeviceInfo device_info(int device = 0);
// Number of CUDA devices (0 when there is no GPU or no driver).
int device_count();

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options = {});

// The stream a CUDA backend queues every op on, for work queued beside its ops (NCCL collectives)
// that must stay in order with them. Throws when `backend` is not a CUDA backend.
cudaStream_t stream_of(Backend& backend);

}  // namespace dsinfer::backend::cuda
