#include "prefill_cases.h"  // bench/gpu/, next to this file

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/prefill_attention.h"
#include "core/dtype.h"
#include "core/error.h"

namespace dsinfer::bench {
namespace {

using backend::cuda::PrefillAttentionArgs;
using backend::cuda::PrefillAttentionKernel;
using bf16 = __nv_bfloat16;

constexpr int kHeads = 128;
constexpr int kNope = backend::cuda::kPrefillNopeDim, kRope = backend::cuda::kPrefillRopeDim,
              kValue = backend::cuda::kPrefillValueDim;
constexpr double kBarTflops = 550;  // issue 8's "done when" on H200

struct Shape {
  const char* name;
  int sequences;
  int new_tokens;  // per sequence
  int prefix;      // cached rows before them, per sequence
};

template <typename T>
void upload(void* device, const std::vector<T>& host) {
  DSINFER_CUDA_CHECK(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
}

}  // namespace

void prefill_attention_cases(Timer& timer, cudaStream_t stream, const Ceilings& ceilings, Json& figures) {
  std::printf("\nPrefill attention (prefill_attention kWgmma, the backend's; beside it kFlash, the mma.sync kernel, and\n"
              "  the largest difference of their outputs): causal, 128 heads, d_qk 192, d_v 128\n");
  std::printf("  FLOPs = 2 * (192 + 128) * heads * sum over queries of their visible keys\n");
  std::printf("  %-22s %10s %9s %9s %9s %12s %10s\n", "case", "us", "TFLOP/s", "of BF16", "of 550", "mma.sync us",
              "max diff");
  for (const Shape& shape : {Shape{"8x2048", 8, 2048, 0}, Shape{"1x16384", 1, 16384, 0},
                             Shape{"4096_on_4096_prefix", 1, 4096, 4096}}) {
    const int tokens = shape.sequences * shape.new_tokens;
    const int context = shape.prefix + shape.new_tokens;
    const int kv_rows = shape.sequences * context;
    Buffer q(size_t(tokens) * kHeads * (kNope + kRope) * 2), kv(size_t(kv_rows) * kHeads * (kNope + kValue) * 2),
        k_rope(size_t(kv_rows) * kRope * 2), out(size_t(tokens) * kHeads * kValue * 2);
    fill(q.get(), DType::kBF16, int64_t(tokens) * kHeads * (kNope + kRope), 31, -1, 1, stream);
    fill(kv.get(), DType::kBF16, int64_t(kv_rows) * kHeads * (kNope + kValue), 32, -1, 1, stream);
    fill(k_rope.get(), DType::kBF16, int64_t(kv_rows) * kRope, 33, -1, 1, stream);
    std::vector<int32_t> query_start(shape.sequences + 1), kv_start(shape.sequences + 1), positions(tokens);
    double pairs = 0;
    for (int b = 0; b <= shape.sequences; ++b) {
      query_start[b] = b * shape.new_tokens;
      kv_start[b] = b * context;
    }
    for (int t = 0; t < tokens; ++t) {
      positions[t] = shape.prefix + t % shape.new_tokens;
      pairs += positions[t] + 1;
    }
    Buffer d_query_start(query_start.size() * 4), d_kv_start(kv_start.size() * 4), d_positions(positions.size() * 4);
    upload(d_query_start.get(), query_start);
    upload(d_kv_start.get(), kv_start);
    upload(d_positions.get(), positions);
    PrefillAttentionArgs args;
    args.q = q.get<bf16>();
    args.kv = kv.get<bf16>();
    args.k_rope = k_rope.get<bf16>();
    args.query_start = d_query_start.get<int32_t>();
    args.kv_start = d_kv_start.get<int32_t>();
    args.positions = d_positions.get<int32_t>();
    args.out = out.get<bf16>();
    args.tokens = tokens;
    args.heads = kHeads;
    args.num_sequences = shape.sequences;
    args.kv_rows = kv_rows;
    args.scale = 0.07f;
    // The production kernel (kWgmma) against kFlash's output first: they differ only in summation order.
    backend::cuda::prefill_attention(args, PrefillAttentionKernel::kFlash, stream);
    std::vector<uint16_t> flash_out(size_t(tokens) * kHeads * kValue), wgmma_out(flash_out.size());
    DSINFER_CUDA_CHECK(cudaMemcpy(flash_out.data(), out.get(), flash_out.size() * 2, cudaMemcpyDeviceToHost));
    backend::cuda::prefill_attention(args, PrefillAttentionKernel::kWgmma, stream);
    DSINFER_CUDA_CHECK(cudaMemcpy(wgmma_out.data(), out.get(), wgmma_out.size() * 2, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (size_t i = 0; i < flash_out.size(); ++i)
      worst = std::max(worst, double(std::fabs(bf16_to_f32(flash_out[i]) - bf16_to_f32(wgmma_out[i]))));
    DSINFER_CHECK(worst <= 2e-2, "prefill attention ", shape.name, ": kWgmma differs from kFlash by ", worst);
    const double flash_us = timer.median_us(
        [&] { backend::cuda::prefill_attention(args, PrefillAttentionKernel::kFlash, stream); });
    const double us = timer.median_us(
        [&] { backend::cuda::prefill_attention(args, PrefillAttentionKernel::kWgmma, stream); });
    const double tflops = 2.0 * (kNope + kRope + kValue) * kHeads * pairs / us / 1e6;
    const std::string key = str_cat("prefill_attention_", shape.name);
    figures[key + "_us"] = us;
    figures[key + "_tflops"] = tflops;
    figures[key + "_of_bf16"] = tflops / ceilings.bf16_tflops;
    figures[key + "_mma_sync_us"] = flash_us;
    std::printf("  %-22s %10.1f %9.1f %8.0f%% %8.0f%% %12.1f %10.1e\n", shape.name, us, tflops,
                100 * tflops / ceilings.bf16_tflops, 100 * tflops / kBarTflops, flash_us, worst);
  }
  std::printf("  (BF16 GEMM ceiling of this run: %.0f TFLOP/s)\n", ceilings.bf16_tflops);
}

}  // namespace dsinfer::bench
