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
#ifdef DSINFER_HAVE_FLASHINFER
#include "flashinfer_prefill.h"  // bench/gpu/: FlashInfer's sm90 prefill, the issue 8 anchor
#endif

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

double max_abs_diff(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, double(std::fabs(bf16_to_f32(a[i]) - bf16_to_f32(b[i]))));
  return worst;
}

#ifdef DSINFER_HAVE_FLASHINFER
// FlashInfer's time and the largest difference of its output from ours, for one case.
struct AnchorResult {
  double us = 0;
  double max_diff = 0;
};

// FlashInfer's sm90 ragged prefill on the case's q, kv and k_rope: its K (nope + rope broadcast to
// every head) and V built once and its plan made once, outside the timing (as SGLang feeds it);
// the timed call only launches. Its causal mask aligns each sequence's queries with the end of its
// kv rows, which is our positions (prefix + i) for every case here. Throws dsinfer::Error when
// FlashInfer rejects the shape or the launch.
AnchorResult flashinfer_case(Timer& timer, cudaStream_t stream, const PrefillAttentionArgs& args,
                             const std::vector<int32_t>& query_start, const std::vector<int32_t>& kv_start,
                             const std::vector<uint16_t>& ours) {
  Buffer k(size_t(args.kv_rows) * kHeads * kFlashInferHeadDimQk * 2),
      v(size_t(args.kv_rows) * kHeads * kFlashInferHeadDimVo * 2),
      out(size_t(args.tokens) * kHeads * kFlashInferHeadDimVo * 2),
      scratch(flashinfer_prefill_scratch_bytes(args.tokens, args.num_sequences, kHeads));
  flashinfer_prefill_build_kv(args.kv, args.k_rope, args.kv_rows, kHeads, k.get<bf16>(), v.get<bf16>(), stream);
  const FlashInferPrefillPlan plan = flashinfer_prefill_plan(query_start.data(), kv_start.data(), args.num_sequences,
                                                             kHeads, scratch.get(), scratch.bytes(), stream);
  FlashInferPrefillArgs fi;
  fi.q = args.q;
  fi.k = k.get<bf16>();
  fi.v = v.get<bf16>();
  fi.out = out.get<bf16>();
  fi.scale = args.scale;
  flashinfer_prefill(plan, fi, stream);
  std::vector<uint16_t> theirs(ours.size());
  DSINFER_CUDA_CHECK(cudaMemcpy(theirs.data(), out.get(), theirs.size() * 2, cudaMemcpyDeviceToHost));
  AnchorResult result;
  result.max_diff = max_abs_diff(ours, theirs);
  result.us = timer.median_us([&] { flashinfer_prefill(plan, fi, stream); });
  return result;
}
#endif

}  // namespace

void prefill_attention_cases(Timer& timer, cudaStream_t stream, const Ceilings& ceilings, Json& figures) {
  std::printf("\nPrefill attention (prefill_attention kWgmma, the backend's; beside it kFlash, the mma.sync kernel, and\n"
              "  the largest difference of their outputs): causal, 128 heads, d_qk 192, d_v 128\n");
  std::printf("  FLOPs = 2 * (192 + 128) * heads * sum over queries of their visible keys\n");
#ifdef DSINFER_HAVE_FLASHINFER
  std::printf("  FlashInfer: its sm90 (FA3) ragged prefill on the same q and kv (K = nope + broadcast rope, V built\n"
              "    once, plan made once, outside the timing); vs FI = FlashInfer us / our us (> 1: we are faster);\n"
              "    FI diff: the largest |difference| of its output from kWgmma's\n");
  std::printf("  %-22s %10s %9s %9s %9s %12s %10s %10s %9s %7s %10s\n", "case", "us", "TFLOP/s", "of BF16", "of 550",
              "mma.sync us", "max diff", "FI us", "FI TF/s", "vs FI", "FI diff");
#else
  std::printf("  FlashInfer: not built (run tools/setup_flashinfer.sh)\n");
  std::printf("  %-22s %10s %9s %9s %9s %12s %10s\n", "case", "us", "TFLOP/s", "of BF16", "of 550", "mma.sync us",
              "max diff");
#endif
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
    const double worst = max_abs_diff(flash_out, wgmma_out);
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
    std::printf("  %-22s %10.1f %9.1f %8.0f%% %8.0f%% %12.1f %10.1e", shape.name, us, tflops,
                100 * tflops / ceilings.bf16_tflops, 100 * tflops / kBarTflops, flash_us, worst);
#ifdef DSINFER_HAVE_FLASHINFER
    // The anchor after our own figures, so that a FlashInfer failure costs only its columns.
    std::string anchor_error;
    AnchorResult anchor;
    try {
      anchor = flashinfer_case(timer, stream, args, query_start, kv_start, wgmma_out);
    } catch (const Error& e) {
      anchor_error = e.what();
    }
    if (anchor_error.empty()) {
      const double anchor_tflops = 2.0 * (kNope + kRope + kValue) * kHeads * pairs / anchor.us / 1e6;
      figures[key + "_flashinfer_us"] = anchor.us;
      figures[key + "_vs_flashinfer"] = anchor.us / us;
      std::printf(" %10.1f %9.1f %6.2fx %10.1e\n", anchor.us, anchor_tflops, anchor.us / us, anchor.max_diff);
    } else {
      std::printf("\n    FlashInfer did not run this case: %s\n", anchor_error.c_str());
    }
#else
    std::printf("\n");
#endif
  }
  std::printf("  (BF16 GEMM ceiling of this run: %.0f TFLOP/s)\n", ceilings.bf16_tflops);
}

}  // namespace dsinfer::bench
