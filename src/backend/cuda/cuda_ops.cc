// CudaOps: products (gemm.h), attention (mla_decode.h, prefill_attention.h), routed experts (moe.h)
// and sampling (sampling.h) behind the backend's op signatures. Each op checks its shapes on the
// host, takes its scratch from the backend's caching allocator (stream-ordered reuse: no driver
// allocation once the step's shapes have been seen) and queues its kernels.
#include "backend/cuda/cuda_ops.h"

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/mla_decode.h"
#include "backend/cuda/moe.h"
#include "backend/cuda/prefill_attention.h"
#include "backend/cuda/sampling_op.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;

void expect_bf16(const Tensor& t, const char* op, const char* what, int rank) {
  DSINFER_CHECK(t.defined() && t.device() == Device::kCuda && t.dtype() == DType::kBF16 && t.rank() == rank, op,
                ": ", what, " must be a rank-", rank, " bf16 CUDA tensor, got ", dtype_name(t.dtype()), " ",
                t.shape().to_string());
}

GemmWeight gemm_weight(const LinearWeight& weight) {
  DSINFER_CHECK(weight.format != WeightFormat::kW4A8,
                "linear: a W4A8 (int4) weight as a plain linear layer; the CUDA backend runs W4A8 only as routed "
                "experts (moe_experts)");
  GemmWeight out;
  out.data = weight.data.raw();
  out.dtype = weight.data.dtype();
  if (weight.format == WeightFormat::kFp8Block) out.scale = weight.scale.data<float>();
  return out;
}

// A W4A8 expert stack as the CUDA experts read it (docs/w4a8.md): data u8 [E, N, K / 2], scale f32
// [E, N, K / G] with G dividing K, an optional input_scale f32 [E] and optional AWQ factors f32 [E, K].
// Other formats pass.
void expect_w4a8_stack(const LinearWeight& w, const char* name) {
  if (w.format != WeightFormat::kW4A8) return;
  const int64_t E = w.data.dim(0), N = w.out_features(), K = w.in_features();
  DSINFER_CHECK(w.data.dtype() == DType::kU8 && w.scale.defined() && w.scale.dtype() == DType::kF32 &&
                    w.scale.rank() == 3 && w.scale.dim(0) == E && w.scale.dim(1) == N && w.scale.dim(2) > 0 &&
                    K % w.scale.dim(2) == 0 && K % 8 == 0,
                "moe_experts: W4A8 ", name, " ", dtype_name(w.data.dtype()), " ", w.data.shape().to_string(),
                " has scales ", w.scale.defined() ? w.scale.shape().to_string() : std::string("(none)"),
                " (expected u8 [E, N, K / 2] with f32 [E, N, K / G], G dividing K, K a multiple of 8)");
  DSINFER_CHECK(!w.input_scale.defined() || (w.input_scale.dtype() == DType::kF32 && w.input_scale.numel() == E),
                "moe_experts: W4A8 ", name, " input_scale ", w.input_scale.shape().to_string(), " for ", E,
                " experts (expected f32 [E])");
  DSINFER_CHECK(!w.pre_scale.defined() ||
                    (w.pre_scale.dtype() == DType::kF32 && w.pre_scale.shape() == Shape({E, K}) &&
                     reinterpret_cast<uintptr_t>(w.pre_scale.raw()) % 16 == 0),
                "moe_experts: W4A8 ", name, " pre_scale ", w.pre_scale.shape().to_string(), " for ", E, " experts of ",
                K, " inputs (expected f32 [E, K], 16-byte aligned)");
}

GemmOptions gemm_options(const CudaOptions& options) {
  GemmOptions gemm;
  gemm.fp8_fallback_max_rows = options.fp8_gemv_max_rows;
  gemm.force_fallback = options.reference_kernels;
  gemm.bf16_fallback_max_rows = options.bf16_gemv_max_rows;
  gemm.programmatic_gemv = options.programmatic_gemv;
  gemm.fp8_wgmma_max_rows = options.fp8_wgmma_max_rows;
  return gemm;
}

class Ops final : public CudaOps {
 public:
  Ops(CudaContext& context, const CudaOptions& options)
      : context_(context),
        reference_(options.reference_kernels),
        moe_gemv_max_rows_(options.moe_gemv_max_rows),
        moe_fp8_mma_max_rows_(options.moe_fp8_mma_max_rows),
        moe_fp8_mma_min_rows_(options.moe_fp8_mma_min_rows),
        mla_min_split_pages_(options.mla_min_split_pages),
        mla_kernel_(options.mla_wgmma ? MlaDecodeKernel::kWgmma : MlaDecodeKernel::kTensorCore),
        gemm_(gemm_options(options)),
        sampler_(context) {}

  Tensor linear(const Tensor& x, const LinearWeight& weight, DType out_dtype) override {
    expect_bf16(x, "linear", "x", 2);
    DSINFER_CHECK(weight.data.rank() == 2 && weight.data.dim(1) == x.dim(1), "linear: x ", x.shape().to_string(),
                  " does not match weight ", weight.data.shape().to_string());
    int64_t T = x.dim(0), N = weight.data.dim(0), K = x.dim(1);
    Tensor y = context_.allocate(out_dtype, {T, N});
    if (T == 0) return y;
    run_linear(static_cast<const bf16*>(x.raw()), gemm_weight(weight), y.raw(), out_dtype, T, N, K);
    return y;
  }

  Tensor grouped_linear(const Tensor& x, const Tensor& weight) override {
    expect_bf16(x, "grouped_linear", "x", 3);
    DSINFER_CHECK(weight.rank() == 3 && weight.dim(0) == x.dim(1) && weight.dim(2) == x.dim(2),
                  "grouped_linear: x ", x.shape().to_string(), " does not match weight ", weight.shape().to_string());
    int64_t T = x.dim(0), G = x.dim(1), N = weight.dim(1), K = x.dim(2);
    Tensor y = context_.allocate(DType::kBF16, {T, G, N});
    if (T == 0) return y;
    gemm_.grouped_linear(static_cast<const bf16*>(x.raw()), weight.raw(), weight.dtype(), static_cast<bf16*>(y.raw()),
                         T, G, N, K, context_.stream());
    return y;
  }

  // The per-head product reads q's first dn columns in place and writes the first L columns of each
  // output row; the rope columns are copied beside them: no slice or concatenation copies.
  Tensor absorb_query(const Tensor& q, const Tensor& w_uk_t) override {
    expect_bf16(q, "absorb_query", "q", 3);
    DSINFER_CHECK(w_uk_t.rank() == 3 && w_uk_t.dim(0) == q.dim(1) && w_uk_t.dim(2) < q.dim(2),
                  "absorb_query: q ", q.shape().to_string(), " does not match w_uk_t ", w_uk_t.shape().to_string());
    const int64_t T = q.dim(0), H = q.dim(1), D = q.dim(2), dn = w_uk_t.dim(2), L = w_uk_t.dim(1), W = L + D - dn;
    Tensor out = context_.allocate(DType::kBF16, {T, H, W});
    if (T == 0) return out;
    gemm_.grouped_linear(static_cast<const bf16*>(q.raw()), w_uk_t.raw(), w_uk_t.dtype(),
                         static_cast<bf16*>(out.raw()), T, H, L, dn, context_.stream(), {H * D, D, H * W, W});
    copy_rows({q.raw(), D, dn, nullptr, out.raw(), W, L, T * H, D - dn, 2}, context_.stream());
    return out;
  }

  Tensor attention_expanded(const Tensor& q, const Tensor& kv, const Tensor& k_rope, const AttentionBatch& batch,
                            float scale) override {
    expect_bf16(q, "attention_expanded", "q", 3);
    expect_bf16(kv, "attention_expanded", "kv", 3);
    expect_bf16(k_rope, "attention_expanded", "k_rope", 2);
    const DeviceAttention& device = context_.metadata().attention(batch);
    int64_t T = q.dim(0), H = q.dim(1);
    // Head widths from the shapes: R = k_rope width, N = the rest of q, V = the rest of a kv row.
    const int64_t R = k_rope.dim(1), N = q.dim(2) - R, V = kv.dim(2) - N;
    DSINFER_CHECK(R >= 1 && N >= 1 && V >= 1 && kv.dim(1) == H && kv.dim(0) == device.total_context &&
                      k_rope.dim(0) == device.total_context && T == device.num_tokens,
                  "attention_expanded: q ", q.shape().to_string(), ", kv ", kv.shape().to_string(), ", k_rope ",
                  k_rope.shape().to_string(), " do not match each other or the batch (", device.num_tokens,
                  " tokens, ", device.total_context, " context rows)");
    Tensor out = context_.allocate(DType::kBF16, {T, H, V});
    if (T == 0) return out;
    PrefillAttentionArgs args;
    args.q = static_cast<const bf16*>(q.raw());
    args.kv = static_cast<const bf16*>(kv.raw());
    args.k_rope = static_cast<const bf16*>(k_rope.raw());
    args.query_start = device.query_start;
    args.kv_start = device.context_start;
    args.positions = device.positions;
    args.out = static_cast<bf16*>(out.raw());
    args.tokens = static_cast<int>(T);
    args.heads = static_cast<int>(H);
    args.num_sequences = device.num_sequences;
    args.kv_rows = static_cast<int>(kv.dim(0));
    args.nope_dim = static_cast<int>(N);
    args.rope_dim = static_cast<int>(R);
    args.value_dim = static_cast<int>(V);
    args.scale = scale;
    prefill_attention(args, reference_ ? PrefillAttentionKernel::kSimple : PrefillAttentionKernel::kWgmma,
                      context_.stream());
    return out;
  }

  Tensor attention_absorbed(const Tensor& q, const Tensor& cache, const AttentionBatch& batch, float scale,
                            int64_t latent_width) override {
    expect_bf16(q, "attention_absorbed", "q", 3);
    DSINFER_CHECK(cache.defined() && cache.device() == Device::kCuda && cache.rank() == 3 &&
                      (cache.dtype() == DType::kBF16 || cache.dtype() == DType::kF8E4M3),
                  "attention_absorbed: the cache must be a bf16 or e4m3 CUDA tensor [pages, page_size, row], got ",
                  dtype_name(cache.dtype()), " ", cache.shape().to_string());
    const DeviceAttention& device = context_.metadata().attention(batch);
    int64_t T = q.dim(0), H = q.dim(1), W = cache.dim(2);
    DSINFER_CHECK(q.dim(2) == W && latent_width >= 1 && latent_width <= W && cache.dim(1) == device.page_size &&
                      T == device.num_tokens,
                  "attention_absorbed: q ", q.shape().to_string(), " and cache ", cache.shape().to_string(),
                  " must be equally wide with a latent width of ", latent_width, " and pages of ", device.page_size,
                  " tokens, ", device.num_tokens, " tokens");
    Tensor out = context_.allocate(DType::kBF16, {T, H, latent_width});
    if (T == 0) return out;
    MlaDecodeArgs args;
    args.q = static_cast<const bf16*>(q.raw());
    // An FP8 cache: the FP8 wgmma kernel (mla_decode_fp8.h) at DeepSeek's widths; kSimple (the
    // reference mode) and other widths dequantize in the generic kernel.
    if (cache.dtype() == DType::kF8E4M3)
      args.cache_fp8 = static_cast<const uint8_t*>(cache.raw());
    else
      args.cache = static_cast<const bf16*>(cache.raw());
    args.token_sequence = device.token_sequence;
    args.positions = device.positions;
    args.page_table_start = device.page_table_start;
    args.page_ids = device.page_ids;
    args.out = static_cast<bf16*>(out.raw());
    args.tokens = static_cast<int>(T);
    args.heads = static_cast<int>(H);
    args.latent_dim = static_cast<int>(latent_width);
    args.rope_dim = static_cast<int>(W - latent_width);
    args.page_size = device.page_size;
    args.sm_count = context_.sm_count();
    args.scale = scale;
    args.min_split_pages = mla_min_split_pages_;
    args.scratch_bytes =
        mla_decode_scratch_bytes(args.tokens, args.heads, args.sm_count, args.latent_dim, args.rope_dim);
    std::shared_ptr<void> scratch = args.scratch_bytes ? context_.allocate_bytes(args.scratch_bytes) : nullptr;
    args.scratch = scratch.get();
    mla_decode(args, reference_ ? MlaDecodeKernel::kSimple : mla_kernel_, context_.stream());
    return out;
  }

  Tensor moe_experts(const Tensor& x, const Routing& routing, const ExpertStack& experts) override {
    expect_bf16(x, "moe_experts", "x", 2);
    const LinearWeight& gate_up = experts.gate_up;
    const LinearWeight& down = experts.down;
    MoeShape shape;
    shape.tokens = x.dim(0);
    shape.top_k = routing.expert_ids.dim(1);
    shape.num_experts = experts.num_experts();
    shape.first_expert = experts.first_expert;  // the plan skips the slots of other ranks' experts
    DSINFER_CHECK(gate_up.data.rank() == 3 && down.data.rank() == 3, "moe_experts: expert stacks must be rank 3, got ",
                  gate_up.data.shape().to_string(), " / ", down.data.shape().to_string());
    shape.inter = down.in_features();
    shape.hidden = x.dim(1);
    shape.gemv_max_rows = moe_gemv_max_rows_;
    // The FP8-activation kernels for FP8 experts (the reference mode keeps the dequantizing ones;
    // bf16 experts need none of their scratch).
    const bool fp8_experts = gate_up.format == WeightFormat::kFp8Block || down.format == WeightFormat::kFp8Block;
    shape.fp8_mma_max_rows = reference_ || !fp8_experts ? 0 : moe_fp8_mma_max_rows_;
    shape.fp8_mma_min_rows = moe_fp8_mma_min_rows_;
    shape.w4a8_gate_up = gate_up.format == WeightFormat::kW4A8;
    shape.w4a8_gate_up_per_row =
        shape.w4a8_gate_up && (gate_up.input_scale.defined() || gate_up.pre_scale.defined());
    shape.w4a8_down = down.format == WeightFormat::kW4A8;
    shape.w4a8_reference = reference_;
    DSINFER_CHECK(gate_up.out_features() == 2 * shape.inter && gate_up.in_features() == shape.hidden &&
                      down.out_features() == shape.hidden && routing.expert_ids.dim(0) == shape.tokens,
                  "moe_experts: x ", x.shape().to_string(), " does not match experts ",
                  gate_up.data.shape().to_string(), " / ", down.data.shape().to_string());
    expect_w4a8_stack(gate_up, "gate_up");
    expect_w4a8_stack(down, "down");
    Tensor out = context_.allocate(DType::kBF16, {shape.tokens, shape.hidden});
    if (shape.tokens == 0) return out;
    auto matrix = [](const LinearWeight& w) {
      ExpertMatrix m{w.data.raw(), w.scale.defined() ? w.scale.data<float>() : nullptr, w.format};
      if (w.format == WeightFormat::kW4A8) {
        m.group_size = w.group_size();
        m.input_scale = w.input_scale.defined() ? w.input_scale.data<float>() : nullptr;
        m.pre_scale = w.pre_scale.defined() ? w.pre_scale.data<float>() : nullptr;
      }
      return m;
    };
    // Prefill-sized steps: each expert's rows through the library GEMM (moe.h), never in a graph. (W4A8
    // experts stay on moe_experts, which serves any row count.)
    if (shape.tokens * shape.top_k >= kMoeLibraryMinRows && !reference_ && !context_.metadata().capturing() &&
        gate_up.data.dtype() == down.data.dtype() && !shape.w4a8_gate_up && !shape.w4a8_down) {
      size_t scratch_bytes = moe_experts_by_expert_scratch_bytes(shape);
      std::shared_ptr<void> scratch = context_.allocate_bytes(scratch_bytes);
      host_offsets_.reserve((shape.num_experts + 1) * sizeof(int32_t));
      cuda::moe_experts_by_expert(static_cast<const bf16*>(x.raw()), routing.expert_ids.data<int32_t>(),
                                  routing.weights.data<float>(), matrix(gate_up), matrix(down), shape,
                                  [this](const bf16* in, int64_t rows, const ExpertMatrix& m, int64_t e, int64_t n,
                                         int64_t k, bf16* y) { expert_product(in, rows, m, e, n, k, y); },
                                  static_cast<bf16*>(out.raw()), scratch.get(), scratch_bytes,
                                  static_cast<int32_t*>(host_offsets_.data()), context_.stream());
      return out;
    }
    size_t scratch_bytes = moe_experts_scratch_bytes(shape);
    std::shared_ptr<void> scratch = context_.allocate_bytes(scratch_bytes);
    cuda::moe_experts(static_cast<const bf16*>(x.raw()), routing.expert_ids.data<int32_t>(),
                      routing.weights.data<float>(), matrix(gate_up), matrix(down), shape,
                      static_cast<bf16*>(out.raw()), scratch.get(), scratch_bytes, context_.stream());
    return out;
  }

  std::unique_ptr<PendingTokens> queue_sample_tokens(Tensor& logits, const SamplingBatch& batch) override {
    return sampler_.queue(logits, batch);
  }

 private:
  // Expert e's product for the prefill form of moe_experts: y [rows, n] = in [rows, k] . W_e^T,
  // through the same GemmRunner as every linear (cuBLASLt, FP8 with block scales, or the fallback).
  void expert_product(const bf16* in, int64_t rows, const ExpertMatrix& m, int64_t e, int64_t n, int64_t k, bf16* y) {
    const bool fp8 = m.format == WeightFormat::kFp8Block;
    GemmWeight weight;
    weight.dtype = fp8 ? DType::kF8E4M3 : DType::kBF16;
    weight.data = static_cast<const char*>(m.data) + e * n * k * (fp8 ? 1 : 2);
    if (fp8) weight.scale = m.scale + e * ((n + kWeightBlock - 1) / kWeightBlock) * ((k + kWeightBlock - 1) / kWeightBlock);
    run_linear(in, weight, y, DType::kBF16, rows, n, k);
  }

  // y [T, N] = x [T, K] . W^T through GemmRunner, with the scratch its plan asks for (taken from the
  // caching allocator and given back in stream order).
  void run_linear(const bf16* x, const GemmWeight& weight, void* y, DType y_dtype, int64_t T, int64_t N, int64_t K) {
    LinearPlan plan = plan_linear(gemm_.options(), weight.dtype, y_dtype, T, N, K);
    std::shared_ptr<void> scratch = plan.scratch_bytes ? context_.allocate_bytes(plan.scratch_bytes) : nullptr;
    LinearArgs args;
    args.x = x;
    args.weight = weight;
    args.y = y;
    args.y_dtype = y_dtype;
    args.tokens = T;
    args.out_features = N;
    args.in_features = K;
    args.scratch = scratch.get();
    args.scratch_bytes = plan.scratch_bytes;
    gemm_.linear(args, context_.stream());
  }

  // Routed experts of at least this many rows (tokens x top_k) take moe_experts_by_expert: ~32 rows
  // per expert for DeepSeek-V3 (prefill chunks of 1024 tokens and more).
  static constexpr int64_t kMoeLibraryMinRows = 8192;
  PinnedBuffer host_offsets_;
  CudaContext& context_;
  bool reference_;
  int moe_gemv_max_rows_;
  int moe_fp8_mma_max_rows_;
  int moe_fp8_mma_min_rows_;
  int mla_min_split_pages_;
  MlaDecodeKernel mla_kernel_;
  GemmRunner gemm_;
  SamplingOp sampler_;
};

}  // namespace

std::unique_ptr<CudaOps> make_cuda_ops(CudaContext& context, const CudaOptions& options) {
  return std::make_unique<Ops>(context, options);
}

}  // namespace dsinfer::backend::cuda
