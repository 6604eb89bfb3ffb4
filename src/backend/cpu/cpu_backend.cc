// CpuBackend: the Backend interface over the reference ops in ops.h.
#include "backend/cpu/ops.h"

namespace dsinfer::backend {
namespace {

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  Device device() const override { return Device::kCpu; }
  DType compute_dtype() const override { return DType::kF32; }
  bool supports_cache_dtype(DType dtype) const override {
    return dtype == DType::kF32 || dtype == DType::kF8E4M3 || dtype == DType::kU8;
  }
  bool supports_weight_format(WeightFormat, WeightUse) const override { return true; }

  Tensor empty(DType dtype, Shape shape) override { return Tensor::empty(dtype, shape); }
  Tensor to_device(const Tensor& host) override { return host; }
  Tensor to_host(const Tensor& tensor) override { return tensor; }

  void fill_uniform(Tensor& t, uint64_t seed, float low, float high) override {
    cpu::fill_uniform(t, seed, low, high);
  }
  Tensor embedding(const Tensor& table, const Tensor& ids) override { return cpu::embedding(table, ids); }
  Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) override {
    return cpu::rms_norm(x, weight, eps);
  }
  Tensor add_rms_norm_inplace(Tensor& residual, const Tensor& x, const Tensor& weight, float eps) override {
    return cpu::add_rms_norm_inplace(residual, x, weight, eps);
  }
  void add_inplace(Tensor& x, const Tensor& y) override { cpu::add_inplace(x, y); }
  Tensor silu_mul(const Tensor& x) override { return cpu::silu_mul(x); }
  Tensor concat_last(const Tensor& a, const Tensor& b) override { return cpu::concat_last(a, b); }
  Tensor slice_last(const Tensor& x, int64_t begin, int64_t end) override { return cpu::slice_last(x, begin, end); }
  Tensor gather_rows(const Tensor& x, const std::vector<int32_t>& rows) override {
    return cpu::gather_rows(x, rows);
  }
  Tensor concat_rows(const Tensor& a, const Tensor& b) override { return cpu::concat_rows(a, b); }

  Tensor linear(const Tensor& x, const LinearWeight& weight) override { return cpu::linear(x, weight); }
  Tensor linear_f32(const Tensor& x, const LinearWeight& weight) override { return cpu::linear(x, weight); }
  Tensor grouped_linear(const Tensor& x, const Tensor& weight) override { return cpu::grouped_linear(x, weight); }
  Tensor absorb_query(const Tensor& q, const Tensor& w_uk_t) override { return cpu::absorb_query(q, w_uk_t); }
  void rope_inplace(Tensor& x, int64_t begin, const std::vector<int32_t>& positions,
                    const RopeTable& table) override {
    cpu::rope_inplace(x, begin, positions, table);
  }

  void write_cache(Tensor& cache, const Tensor& latent, const AttentionBatch& batch) override {
    cpu::write_cache(cache, latent, batch);
  }
  Tensor gather_cache(const Tensor& cache, const AttentionBatch& batch) override {
    return cpu::gather_cache(cache, batch);
  }
  Tensor attention_expanded(const Tensor& q, const Tensor& kv, const Tensor& k_rope, const AttentionBatch& batch,
                            float scale) override {
    return cpu::attention_expanded(q, kv, k_rope, batch, scale);
  }
  Tensor attention_absorbed(const Tensor& q, const Tensor& cache, const AttentionBatch& batch, float scale,
                            int64_t latent_width) override {
    return cpu::attention_absorbed(q, cache, batch, scale, latent_width);
  }

  Routing route(const Tensor& logits, const Tensor& bias, const RouterParams& params) override {
    return cpu::route(logits, bias, params);
  }
  Tensor moe_experts(const Tensor& x, const Routing& routing, const ExpertStack& experts) override {
    return cpu::moe_experts(x, routing, experts);
  }
  SampledTokens sample_tokens(Tensor& logits, const SamplingBatch& batch) override {
    return cpu::sample_tokens(logits, batch);
  }
  void write_latent_cache(Tensor& cache, const Tensor& kv_a, const Tensor& norm_weight, float eps,
                          const RopeTable& table, const AttentionBatch& batch) override {
    cpu::write_latent_cache(cache, kv_a, norm_weight, eps, table, batch);
  }
  void map_expert_ids(Tensor& expert_ids, const Tensor& replica_start, const Tensor& replica_slots) override {
    cpu::map_expert_ids(expert_ids, replica_start, replica_slots);
  }
  void count_expert_ids(const Tensor& expert_ids, Tensor& counts) override { cpu::count_expert_ids(expert_ids, counts); }
  void resolve_placeholders(Tensor& token_ids, const Tensor& previous) override {
    cpu::resolve_placeholders(token_ids, previous);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace dsinfer::backend
