// The conformance harness on the CPU: the CPU backend passes against itself; an emulation of the GPU's
// bf16 storage (and of FP8 activations in FP8 products) passes within the bounds; a backend broken in
// one op is reported failing in that op alone; every op of backend.h has cases.
#include "backend/conformance/conformance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/source_path.h"

namespace dsinfer::backend::conformance {
namespace {

// Forwards every method to another backend; the test backends override what they change.
class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  std::string name() const override { return inner_->name(); }
  Device device() const override { return inner_->device(); }
  DType compute_dtype() const override { return inner_->compute_dtype(); }
  void begin_step(const StepContext& step) override { inner_->begin_step(step); }
  void synchronize() override { inner_->synchronize(); }
  MemoryInfo memory_info() override { return inner_->memory_info(); }
  void release_cached_memory() override { inner_->release_cached_memory(); }
  Tensor empty(DType dtype, Shape shape) override { return inner_->empty(dtype, shape); }
  Tensor to_device(const Tensor& host) override { return inner_->to_device(host); }
  Tensor to_host(const Tensor& tensor) override { return inner_->to_host(tensor); }
  void fill_uniform(Tensor& t, uint64_t seed, float low, float high) override { inner_->fill_uniform(t, seed, low, high); }
  Tensor embedding(const Tensor& table, const Tensor& ids) override { return inner_->embedding(table, ids); }
  Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) override { return inner_->rms_norm(x, weight, eps); }
  Tensor add_rms_norm_inplace(Tensor& residual, const Tensor& x, const Tensor& weight, float eps) override {
    return inner_->add_rms_norm_inplace(residual, x, weight, eps);
  }
  void add_inplace(Tensor& x, const Tensor& y) override { inner_->add_inplace(x, y); }
  Tensor silu_mul(const Tensor& x) override { return inner_->silu_mul(x); }
  Tensor concat_last(const Tensor& a, const Tensor& b) override { return inner_->concat_last(a, b); }
  Tensor slice_last(const Tensor& x, int64_t begin, int64_t end) override { return inner_->slice_last(x, begin, end); }
  Tensor gather_rows(const Tensor& x, const std::vector<int32_t>& rows) override { return inner_->gather_rows(x, rows); }
  Tensor concat_rows(const Tensor& a, const Tensor& b) override { return inner_->concat_rows(a, b); }
  Tensor linear(const Tensor& x, const LinearWeight& weight) override { return inner_->linear(x, weight); }
  Tensor linear_f32(const Tensor& x, const LinearWeight& weight) override { return inner_->linear_f32(x, weight); }
  Tensor grouped_linear(const Tensor& x, const Tensor& weight) override { return inner_->grouped_linear(x, weight); }
  Tensor absorb_query(const Tensor& q, const Tensor& w_uk_t) override { return inner_->absorb_query(q, w_uk_t); }
  void rope_inplace(Tensor& x, int64_t begin, const std::vector<int32_t>& positions, const RopeTable& table) override {
    inner_->rope_inplace(x, begin, positions, table);
  }
  void write_cache(Tensor& cache, const Tensor& latent, const AttentionBatch& batch) override {
    inner_->write_cache(cache, latent, batch);
  }
  Tensor gather_cache(const Tensor& cache, const AttentionBatch& batch) override {
    return inner_->gather_cache(cache, batch);
  }
  Tensor attention_expanded(const Tensor& q, const Tensor& kv, const Tensor& k_rope, const AttentionBatch& batch,
                            float scale) override {
    return inner_->attention_expanded(q, kv, k_rope, batch, scale);
  }
  Tensor attention_absorbed(const Tensor& q, const Tensor& cache, const AttentionBatch& batch, float scale,
                            int64_t latent_width) override {
    return inner_->attention_absorbed(q, cache, batch, scale, latent_width);
  }
  Routing route(const Tensor& logits, const Tensor& bias, const RouterParams& params) override {
    return inner_->route(logits, bias, params);
  }
  Tensor moe_experts(const Tensor& x, const Routing& routing, const ExpertStack& experts) override {
    return inner_->moe_experts(x, routing, experts);
  }
  SampledTokens sample_tokens(Tensor& logits, const SamplingBatch& batch) override {
    return inner_->sample_tokens(logits, batch);
  }
  std::unique_ptr<PendingTokens> queue_sample_tokens(Tensor& logits, const SamplingBatch& batch) override {
    return inner_->queue_sample_tokens(logits, batch);
  }
  void resolve_placeholders(Tensor& token_ids, const Tensor& previous) override {
    inner_->resolve_placeholders(token_ids, previous);
  }
  void map_expert_ids(Tensor& expert_ids, const Tensor& replica_start, const Tensor& replica_slots) override {
    inner_->map_expert_ids(expert_ids, replica_start, replica_slots);
  }
  void count_expert_ids(const Tensor& expert_ids, Tensor& counts) override {
    inner_->count_expert_ids(expert_ids, counts);
  }
  void write_latent_cache(Tensor& cache, const Tensor& kv_a, const Tensor& norm_weight, float eps,
                          const RopeTable& table, const AttentionBatch& batch) override {
    inner_->write_latent_cache(cache, kv_a, norm_weight, eps, table, batch);
  }

 protected:
  Backend& inner() { return *inner_; }

 private:
  std::unique_ptr<Backend> inner_;
};

// ------------------------------------------------------------------------------------------------
// The GPU's storage on the CPU: activations and the cache in bf16, on a "device" of their own (copies,
// never shared with the host), each op computed by the CPU reference on their f32 values and its
// result rounded to bf16. With fp8_activations, products with FP8 block weights also round their
// activations to FP8 per token and 128 columns (scale = amax / 448), as DeepGEMM-style kernels do,
// and the experts keep bf16 intermediates. It proves the harness's bf16 paths and that the bounds
// leave room for these roundings.
class Bf16Backend final : public ForwardingBackend {
 public:
  explicit Bf16Backend(bool fp8_activations)
      : ForwardingBackend(make_cpu_backend()), fp8_activations_(fp8_activations) {}

  std::string name() const override { return fp8_activations_ ? "cpu-bf16-w8a8" : "cpu-bf16"; }
  DType compute_dtype() const override { return DType::kBF16; }
  Tensor to_device(const Tensor& host) override { return host.clone(); }
  Tensor to_host(const Tensor& tensor) override { return tensor.clone(); }

  Tensor embedding(const Tensor& table, const Tensor& ids) override { return narrow(inner().embedding(table, ids)); }
  Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) override {
    return narrow(inner().rms_norm(widen(x), weight, eps));
  }
  Tensor add_rms_norm_inplace(Tensor& residual, const Tensor& x, const Tensor& weight, float eps) override {
    add_inplace(residual, x);
    return rms_norm(residual, weight, eps);  // from the rounded residual
  }
  void add_inplace(Tensor& x, const Tensor& y) override {
    Tensor sum = widen(x);
    inner().add_inplace(sum, widen(y));
    store(x, sum);
  }
  Tensor silu_mul(const Tensor& x) override { return narrow(inner().silu_mul(widen(x))); }
  Tensor concat_last(const Tensor& a, const Tensor& b) override { return narrow(inner().concat_last(widen(a), widen(b))); }
  Tensor slice_last(const Tensor& x, int64_t begin, int64_t end) override {
    return narrow(inner().slice_last(widen(x), begin, end));
  }
  Tensor gather_rows(const Tensor& x, const std::vector<int32_t>& rows) override {
    return narrow(inner().gather_rows(widen(x), rows));
  }
  Tensor concat_rows(const Tensor& a, const Tensor& b) override { return narrow(inner().concat_rows(widen(a), widen(b))); }
  Tensor linear(const Tensor& x, const LinearWeight& weight) override { return narrow(product(x, weight)); }
  Tensor linear_f32(const Tensor& x, const LinearWeight& weight) override { return product(x, weight); }
  Tensor grouped_linear(const Tensor& x, const Tensor& weight) override {
    return narrow(inner().grouped_linear(widen(x), weight));
  }
  Tensor absorb_query(const Tensor& q, const Tensor& w_uk_t) override {
    return narrow(inner().absorb_query(widen(q), w_uk_t));
  }
  void rope_inplace(Tensor& x, int64_t begin, const std::vector<int32_t>& positions, const RopeTable& table) override {
    Tensor rotated = widen(x);
    inner().rope_inplace(rotated, begin, positions, table);
    store(x, rotated);
  }
  void write_cache(Tensor& cache, const Tensor& latent, const AttentionBatch& batch) override {
    Tensor wide = widen(cache);
    inner().write_cache(wide, widen(latent), batch);
    store(cache, wide);
  }
  void write_latent_cache(Tensor& cache, const Tensor& kv_a, const Tensor& norm_weight, float eps,
                          const RopeTable& table, const AttentionBatch& batch) override {
    Tensor wide = widen(cache);
    inner().write_latent_cache(wide, widen(kv_a), norm_weight, eps, table, batch);
    store(cache, wide);
  }
  Tensor gather_cache(const Tensor& cache, const AttentionBatch& batch) override {
    return narrow(inner().gather_cache(widen(cache), batch));
  }
  Tensor attention_expanded(const Tensor& q, const Tensor& kv, const Tensor& k_rope, const AttentionBatch& batch,
                            float scale) override {
    return narrow(inner().attention_expanded(widen(q), widen(kv), widen(k_rope), batch, scale));
  }
  Tensor attention_absorbed(const Tensor& q, const Tensor& cache, const AttentionBatch& batch, float scale,
                            int64_t latent_width) override {
    return narrow(inner().attention_absorbed(widen(q), widen(cache), batch, scale, latent_width));
  }
  Tensor moe_experts(const Tensor& x, const Routing& routing, const ExpertStack& experts) override {
    if (!fp8_activations_) return narrow(inner().moe_experts(widen(x), routing, experts));
    Tensor input = widen(x);
    int64_t T = input.dim(0), D = input.dim(1), k = routing.expert_ids.dim(1);
    Tensor out = Tensor::empty(DType::kF32, {T, D});
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < k; ++i) {
        int64_t e = routing.expert_ids.data<int32_t>()[t * k + i] - experts.first_expert;  // the stack's expert
        if (e < 0 || e >= experts.num_experts()) continue;                                 // another rank's
        Tensor hidden = narrow(product(input.slice(t, t + 1), experts.gate_up.expert(e)));  // [1, 2I] bf16
        Tensor activated = narrow(inner().silu_mul(widen(hidden)));                       // [1, I] bf16
        Tensor y = product(activated, experts.down.expert(e));                            // [1, D] f32
        float weight = routing.weights.data<float>()[t * k + i];
        for (int64_t c = 0; c < D; ++c) out.data<float>()[t * D + c] += weight * y.data<float>()[c];
      }
    }
    return narrow(out);
  }

 private:
  static Tensor widen(const Tensor& t) { return t.dtype() == DType::kBF16 ? convert(t, DType::kF32) : t; }
  static Tensor narrow(const Tensor& t) { return convert(t, DType::kBF16); }
  static void store(Tensor& target, const Tensor& wide) {
    if (target.dtype() != DType::kBF16) return;  // an FP8 cache: widen() passed it itself, the op wrote it
    Tensor narrowed = narrow(wide);
    std::memcpy(target.raw(), narrowed.raw(), narrowed.nbytes());
  }
  static Tensor quantize_fp8_activations(const Tensor& x) {  // x [T, K] f32
    Tensor out = x.clone();
    int64_t T = x.dim(0), K = x.dim(1);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t begin = 0; begin < K; begin += kWeightBlock) {
        float* block = out.data<float>() + t * K + begin;
        int64_t width = std::min(kWeightBlock, K - begin);
        float amax = 0.0f;
        for (int64_t c = 0; c < width; ++c) amax = std::max(amax, std::fabs(block[c]));
        if (amax == 0.0f) continue;
        float scale = amax / kFp8E4M3Max;
        for (int64_t c = 0; c < width; ++c) block[c] = fp8e4m3_to_f32(f32_to_fp8e4m3(block[c] / scale)) * scale;
      }
    }
    return out;
  }
  Tensor product(const Tensor& x, const LinearWeight& weight) {  // f32 result
    Tensor input = widen(x);
    if (fp8_activations_ && weight.format == WeightFormat::kFp8Block) input = quantize_fp8_activations(input);
    return inner().linear(input, weight);
  }

  bool fp8_activations_;
};

// ------------------------------------------------------------------------------------------------
// The CPU backend with one deliberate fault.

enum class Fault {
  kLinearRelativeNoise,
  kFp8ActivationsScaledByTheNextToken,
  kRouteSwapsTwoExpertIds,
  kWriteCacheOneSlotOff,
  kExpandedAttentionWithoutCausalMask,
  kAbsorbedAttentionIgnoresRope,
  kAddInplaceWritesPastTheEnd,
  kSampleTokensIgnoresBannedTokens,
  kGatherRowsTakesTheNextRow,
  kMoeDropsTheLastExpert,
  kMoeTakesGlobalIdsAsStackIds,
  kMoeRunsOtherRanksIdsOnItsOwnExperts,
  kMoeTakesTheNextExpertsAwqFactors,
  kRopeOnePositionLate,
  kSiluMulThrows,
  kRmsNormOverwritesItsInput,
  kPlaceholdersTakeTheNextRow,
  kQueuedSamplingLeavesStaleDeviceTokens,
  kExpertMapTakesTheFirstReplicaAlways,
  kExpertCountsMissTheLastChoice,
};

class BrokenBackend final : public ForwardingBackend {
 public:
  explicit BrokenBackend(Fault fault) : ForwardingBackend(make_cpu_backend()), fault_(fault) {}
  std::string name() const override { return "broken-cpu"; }

  Tensor linear(const Tensor& x, const LinearWeight& weight) override {
    if (fault_ == Fault::kFp8ActivationsScaledByTheNextToken && weight.format == WeightFormat::kFp8Block)
      return inner().linear(fp8_with_the_next_tokens_scales(x), weight);
    Tensor y = inner().linear(x, weight);
    if (fault_ == Fault::kLinearRelativeNoise) {  // y *= 1 + 1e-2 * N(0, 1): nmse 1e-4
      std::mt19937 rng(1);
      std::normal_distribution<float> noise(0.0f, 1e-2f);
      for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] *= 1.0f + noise(rng);
    }
    return y;
  }
  Routing route(const Tensor& logits, const Tensor& bias, const RouterParams& params) override {
    Routing routing = inner().route(logits, bias, params);
    if (fault_ == Fault::kRouteSwapsTwoExpertIds) {  // the ids of a middle token's first two slots, weights kept
      int32_t* ids = routing.expert_ids.data<int32_t>() + (logits.dim(0) / 2) * params.top_k;
      std::swap(ids[0], ids[1]);
    }
    return routing;
  }
  void write_cache(Tensor& cache, const Tensor& latent, const AttentionBatch& batch) override {
    if (fault_ != Fault::kWriteCacheOneSlotOff) return inner().write_cache(cache, latent, batch);
    AttentionBatch shifted = batch;
    shifted.slot_mapping[0] += 1;
    inner().write_cache(cache, latent, shifted);
  }
  Tensor attention_expanded(const Tensor& q, const Tensor& kv, const Tensor& k_rope, const AttentionBatch& batch,
                            float scale) override {
    if (fault_ != Fault::kExpandedAttentionWithoutCausalMask)
      return inner().attention_expanded(q, kv, k_rope, batch, scale);
    AttentionBatch unmasked = batch;  // every token at its sequence's last position sees every key
    for (int b = 0; b < batch.num_sequences(); ++b)
      for (int32_t t = batch.query_start[b]; t < batch.query_start[b + 1]; ++t)
        unmasked.positions[t] = batch.context_lens[b] - 1;
    return inner().attention_expanded(q, kv, k_rope, unmasked, scale);
  }
  Tensor attention_absorbed(const Tensor& q, const Tensor& cache, const AttentionBatch& batch, float scale,
                            int64_t latent_width) override {
    if (fault_ != Fault::kAbsorbedAttentionIgnoresRope)
      return inner().attention_absorbed(q, cache, batch, scale, latent_width);
    Tensor no_rope = q.clone();
    int64_t width = q.dim(2);
    for (int64_t row = 0; row < q.dim(0) * q.dim(1); ++row)
      std::fill_n(no_rope.data<float>() + row * width + latent_width, width - latent_width, 0.0f);
    return inner().attention_absorbed(no_rope, cache, batch, scale, latent_width);
  }
  void add_inplace(Tensor& x, const Tensor& y) override {
    inner().add_inplace(x, y);
    // Only safe under the harness, which puts guard rows after x.
    if (fault_ == Fault::kAddInplaceWritesPastTheEnd) x.data<float>()[x.numel()] += 1.0f;
  }
  SampledTokens sample_tokens(Tensor& logits, const SamplingBatch& batch) override {
    if (fault_ != Fault::kSampleTokensIgnoresBannedTokens) return inner().sample_tokens(logits, batch);
    SamplingBatch unbanned = batch;
    unbanned.banned_tokens.clear();
    std::fill(unbanned.banned_start.begin(), unbanned.banned_start.end(), 0);
    return inner().sample_tokens(logits, unbanned);
  }
  void map_expert_ids(Tensor& expert_ids, const Tensor& replica_start, const Tensor& replica_slots) override {
    if (fault_ != Fault::kExpertMapTakesTheFirstReplicaAlways)
      return inner().map_expert_ids(expert_ids, replica_start, replica_slots);
    int32_t* ids = expert_ids.data<int32_t>();
    for (int64_t i = 0; i < expert_ids.numel(); ++i)
      ids[i] = replica_slots.data<int32_t>()[replica_start.data<int32_t>()[ids[i]]];
  }
  void count_expert_ids(const Tensor& expert_ids, Tensor& counts) override {
    if (fault_ != Fault::kExpertCountsMissTheLastChoice) return inner().count_expert_ids(expert_ids, counts);
    Tensor fewer = expert_ids.clone();
    fewer.data<int32_t>()[fewer.numel() - 1] = -1;
    inner().count_expert_ids(fewer, counts);
  }
  void resolve_placeholders(Tensor& token_ids, const Tensor& previous) override {
    if (fault_ != Fault::kPlaceholdersTakeTheNextRow) return inner().resolve_placeholders(token_ids, previous);
    int32_t* ids = token_ids.data<int32_t>();
    for (int64_t t = 0; t < token_ids.numel(); ++t)
      if (ids[t] < 0) ids[t] = previous.data<int32_t>()[(-ids[t]) % previous.numel()];
  }
  std::unique_ptr<PendingTokens> queue_sample_tokens(Tensor& logits, const SamplingBatch& batch) override {
    if (fault_ != Fault::kQueuedSamplingLeavesStaleDeviceTokens) return inner().queue_sample_tokens(logits, batch);
    // The host gets this step's tokens, the device keeps the first row's token in every row.
    SampledTokens sampled = inner().sample_tokens(logits, batch);
    class Stale final : public PendingTokens {
     public:
      explicit Stale(SampledTokens sampled) : sampled_(std::move(sampled)), stale_(sampled_.tokens.clone()) {
        std::fill_n(stale_.data<int32_t>(), stale_.numel(), stale_.numel() ? stale_.data<int32_t>()[0] : 0);
      }
      const Tensor& device_tokens() const override { return stale_; }
      SampledTokens wait() override { return sampled_; }

     private:
      SampledTokens sampled_;
      Tensor stale_;
    };
    return std::make_unique<Stale>(std::move(sampled));
  }
  Tensor gather_rows(const Tensor& x, const std::vector<int32_t>& rows) override {
    if (fault_ != Fault::kGatherRowsTakesTheNextRow) return inner().gather_rows(x, rows);
    std::vector<int32_t> shifted = rows;
    shifted[0] = static_cast<int32_t>((shifted[0] + 1) % x.dim(0));
    return inner().gather_rows(x, shifted);
  }
  Tensor moe_experts(const Tensor& x, const Routing& routing, const ExpertStack& experts) override {
    if (fault_ == Fault::kMoeDropsTheLastExpert) {
      Routing dropped{routing.expert_ids, routing.weights.clone()};
      int64_t k = routing.weights.dim(1);
      for (int64_t t = 0; t < routing.weights.dim(0); ++t) dropped.weights.data<float>()[t * k + k - 1] = 0.0f;
      return inner().moe_experts(x, dropped, experts);
    }
    if (fault_ == Fault::kMoeTakesTheNextExpertsAwqFactors) {  // a pre-scale read at the wrong expert's row
      ExpertStack shifted = experts;
      for (LinearWeight* w : {&shifted.gate_up, &shifted.down}) {
        if (!w->pre_scale.defined()) continue;
        const int64_t E = w->pre_scale.dim(0), K = w->pre_scale.dim(1);
        Tensor next = Tensor::empty(DType::kF32, {E, K});
        for (int64_t e = 0; e < E; ++e)
          std::copy_n(w->pre_scale.data<float>() + (e + 1) % E * K, K, next.data<float>() + e * K);
        w->pre_scale = next;
      }
      return inner().moe_experts(x, routing, shifted);
    }
    if (fault_ == Fault::kMoeTakesGlobalIdsAsStackIds) {  // a plan that does not subtract first_expert
      ExpertStack from_zero = experts;
      from_zero.first_expert = 0;
      return inner().moe_experts(x, routing, from_zero);
    }
    if (fault_ == Fault::kMoeRunsOtherRanksIdsOnItsOwnExperts) {  // a plan that wraps instead of skipping
      Routing wrapped{routing.expert_ids.clone(), routing.weights};
      int64_t first = experts.first_expert, E = experts.num_experts();
      for (int64_t i = 0; i < wrapped.expert_ids.numel(); ++i) {
        int32_t& e = wrapped.expert_ids.data<int32_t>()[i];
        e = static_cast<int32_t>(first + ((e - first) % E + E) % E);
      }
      return inner().moe_experts(x, wrapped, experts);
    }
    return inner().moe_experts(x, routing, experts);
  }
  void rope_inplace(Tensor& x, int64_t begin, const std::vector<int32_t>& positions, const RopeTable& table) override {
    if (fault_ != Fault::kRopeOnePositionLate) return inner().rope_inplace(x, begin, positions, table);
    std::vector<int32_t> late = positions;
    for (int32_t& p : late) p = std::min<int32_t>(p + 1, static_cast<int32_t>(table.cos.dim(0) - 1));
    inner().rope_inplace(x, begin, late, table);
  }
  Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) override {
    Tensor y = inner().rms_norm(x, weight, eps);
    if (fault_ == Fault::kRmsNormOverwritesItsInput) x.data<float>()[0] = 0.0f;  // a const input used as scratch
    return y;
  }
  Tensor silu_mul(const Tensor& x) override {
    if (fault_ == Fault::kSiluMulThrows) throw Error("silu_mul: not implemented on this backend");
    return inner().silu_mul(x);
  }

 private:
  // x [T, K] quantized to e4m3 per token and 128 columns (scale = amax / 448), then dequantized with
  // token (t + 1) % T's scales: what a kernel reading a token-major scale table as group-major does.
  static Tensor fp8_with_the_next_tokens_scales(const Tensor& x) {
    int64_t T = x.dim(0), K = x.dim(1), groups = (K + kWeightBlock - 1) / kWeightBlock;
    std::vector<float> scales(T * groups);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t g = 0; g < groups; ++g) {
        float amax = 0.0f;
        for (int64_t c = g * kWeightBlock; c < std::min(K, (g + 1) * kWeightBlock); ++c)
          amax = std::max(amax, std::fabs(x.data<float>()[t * K + c]));
        scales[t * groups + g] = amax > 0.0f ? amax / kFp8E4M3Max : 1.0f;
      }
    }
    Tensor out = x.clone();
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t c = 0; c < K; ++c) {
        float own = scales[t * groups + c / kWeightBlock], next = scales[((t + 1) % T) * groups + c / kWeightBlock];
        out.data<float>()[t * K + c] = fp8e4m3_to_f32(f32_to_fp8e4m3(x.data<float>()[t * K + c] / own)) * next;
      }
    }
    return out;
  }

  Fault fault_;
};

struct FaultCase {
  Fault fault;
  const char* op;    // the one op the harness must report failing
  const char* name;  // the test's name
};

const FaultCase kFaults[] = {
    {Fault::kLinearRelativeNoise, "linear", "LinearWithOnePercentRelativeNoise"},
    {Fault::kFp8ActivationsScaledByTheNextToken, "linear", "Fp8ActivationsDequantizedWithTheNextTokensScales"},
    {Fault::kRouteSwapsTwoExpertIds, "route", "RouteSwappingTwoExpertIdsOfOneToken"},
    {Fault::kWriteCacheOneSlotOff, "write_cache", "WriteCachePuttingOneRowInTheNextSlot"},
    {Fault::kExpandedAttentionWithoutCausalMask, "attention_expanded", "ExpandedAttentionWithoutTheCausalMask"},
    {Fault::kAbsorbedAttentionIgnoresRope, "attention_absorbed", "AbsorbedAttentionIgnoringTheRopeDims"},
    {Fault::kAddInplaceWritesPastTheEnd, "add_inplace", "AddInplaceWritingOneElementPastItsEnd"},
    {Fault::kSampleTokensIgnoresBannedTokens, "sample_tokens", "SampleTokensIgnoringBannedTokens"},
    {Fault::kGatherRowsTakesTheNextRow, "gather_rows", "GatherRowsTakingTheNextRow"},
    {Fault::kMoeDropsTheLastExpert, "moe_experts", "MoeExpertsDroppingTheLastChosenExpert"},
    {Fault::kMoeTakesGlobalIdsAsStackIds, "moe_experts", "MoeExpertsIgnoringTheStacksFirstExpert"},
    {Fault::kMoeRunsOtherRanksIdsOnItsOwnExperts, "moe_experts", "MoeExpertsWrappingOtherRanksIdsIntoTheStack"},
    {Fault::kMoeTakesTheNextExpertsAwqFactors, "moe_experts", "MoeExpertsTakingTheNextExpertsAwqFactors"},
    {Fault::kRopeOnePositionLate, "rope_inplace", "RopeOnePositionLate"},
    {Fault::kSiluMulThrows, "silu_mul", "SiluMulThrowing"},
    {Fault::kRmsNormOverwritesItsInput, "rms_norm", "RmsNormOverwritingItsInput"},
    {Fault::kPlaceholdersTakeTheNextRow, "resolve_placeholders", "PlaceholdersResolvedFromTheNextRow"},
    {Fault::kQueuedSamplingLeavesStaleDeviceTokens, "queue_sample_tokens", "QueuedSamplingLeavingStaleDeviceTokens"},
    {Fault::kExpertMapTakesTheFirstReplicaAlways, "map_expert_ids", "ExpertMapIgnoringEveryReplicaButTheFirst"},
    {Fault::kExpertCountsMissTheLastChoice, "count_expert_ids", "ExpertCountsMissingTheLastChoice"},
};

// ------------------------------------------------------------------------------------------------

// The names of Backend's virtual methods, read from backend.h itself, so that a new op without cases
// fails EveryOpOfTheBackendInterfaceHasCasesInBothTiers.
std::set<std::string> backend_virtual_methods() {
  std::ifstream file(source_path("src/backend/backend.h"));
  std::stringstream text;
  text << file.rdbuf();
  std::string source = text.str();
  std::set<std::string> names;
  for (size_t at = source.find("virtual "); at != std::string::npos; at = source.find("virtual ", at + 1)) {
    std::string head = source.substr(at, source.find('(', at) - at);  // "virtual Tensor rms_norm"
    if (head.find('~') != std::string::npos) continue;
    size_t end = head.find_last_not_of(" \t\n");
    size_t begin = head.find_last_of(" \t\n*&", end) + 1;
    names.insert(head.substr(begin, end + 1 - begin));
  }
  return names;
}

TEST(Conformance, EveryOpOfTheBackendInterfaceHasCasesInBothTiers) {
  std::set<std::string> declared = backend_virtual_methods();
  std::set<std::string> listed(conformance_ops().begin(), conformance_ops().end());
  listed.insert(backend_plumbing().begin(), backend_plumbing().end());
  EXPECT_EQ(declared, listed) << "backend.h's virtual methods and conformance_ops() + backend_plumbing() differ";
  for (Tier tier : {Tier::kSmall, Tier::kFull}) {
    std::set<std::string> covered;
    for (const Case& c : conformance_cases(tier)) {
      covered.insert(c.op);
      EXPECT_TRUE(listed.count(c.op)) << c.op << " is not a method of Backend";
    }
    for (const std::string& op : conformance_ops())
      EXPECT_TRUE(covered.count(op)) << op << " has no case in tier " << (tier == Tier::kFull ? "full" : "small");
  }
}

TEST(Conformance, CaseNamesAreUniqueWithinEachOpBecauseTheySeedTheInputs) {
  for (Tier tier : {Tier::kSmall, Tier::kFull}) {
    std::set<std::string> seen;
    for (const Case& c : conformance_cases(tier)) EXPECT_TRUE(seen.insert(c.op + "/" + c.name).second) << c.name;
  }
}

TEST(Conformance, TheCpuBackendPassesEveryCaseAgainstItself) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  ConformanceReport report = run_conformance(*cpu, Tier::kSmall, std::cout);
  EXPECT_TRUE(report.passed());
  EXPECT_GT(report.cases.size(), 50u);
}

TEST(Conformance, ShardsSplitTheFilteredCasesBetweenThemWithoutOverlap) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  ConformanceOptions options;
  options.ops = {"rms_norm", "add_inplace", "silu_mul"};
  std::ostringstream log;
  std::vector<std::string> whole;
  for (const CaseResult& c : run_conformance(*cpu, options, log).cases) whole.push_back(c.op + "/" + c.name);
  ASSERT_GE(whole.size(), 6u);
  options.shards = 3;
  std::vector<std::string> joined;
  for (options.shard = 0; options.shard < 3; ++options.shard) {
    const ConformanceReport part = run_conformance(*cpu, options, log);
    EXPECT_TRUE(part.passed());
    EXPECT_GE(part.cases.size(), whole.size() / 3);
    EXPECT_LE(part.cases.size(), whole.size() / 3 + 1);
    for (const CaseResult& c : part.cases) joined.push_back(c.op + "/" + c.name);
  }
  std::sort(whole.begin(), whole.end());
  std::sort(joined.begin(), joined.end());
  EXPECT_EQ(joined, whole);  // every case once
  options.shard = 3;
  EXPECT_THROW(run_conformance(*cpu, options, log), Error);
}

TEST(Conformance, ABackendStoringActivationsInBf16PassesEveryCaseWithinTheBounds) {
  Bf16Backend bf16(false);
  std::ostringstream log;
  ConformanceReport report = run_conformance(bf16, Tier::kSmall, log);
  EXPECT_TRUE(report.passed()) << log.str();
}

TEST(Conformance, Fp8ActivationsInFp8ProductsStayWithinTheFp8Bounds) {
  Bf16Backend w8a8(true);
  ConformanceOptions options;
  options.ops = {"linear", "moe_experts"};
  std::ostringstream log;
  ConformanceReport report = run_conformance(w8a8, options, log);
  EXPECT_TRUE(report.passed()) << log.str();
  std::cout << log.str();
}

class ABackendBrokenInOneOp : public testing::TestWithParam<FaultCase> {};

TEST_P(ABackendBrokenInOneOp, IsReportedFailingInThatOpAlone) {
  BrokenBackend broken(GetParam().fault);
  std::ostringstream log;
  ConformanceReport report = run_conformance(broken, Tier::kSmall, log);
  EXPECT_EQ(report.failing_ops(), std::vector<std::string>{GetParam().op}) << log.str();
}

INSTANTIATE_TEST_SUITE_P(EachFault, ABackendBrokenInOneOp, testing::ValuesIn(kFaults),
                         [](const testing::TestParamInfo<FaultCase>& info) { return std::string(info.param.name); });

TEST(Conformance, AnOpThatThrowsFailsItsCasesWithTheMessageAndTheRunGoesOn) {
  BrokenBackend broken(Fault::kSiluMulThrows);
  std::ostringstream log;
  ConformanceOptions options;
  options.ops = {"rms_norm", "silu_mul", "add_inplace"};
  ConformanceReport report = run_conformance(broken, options, log);
  ASSERT_GE(report.cases.size(), 4u);
  for (const CaseResult& c : report.cases) {
    EXPECT_EQ(c.passed(), c.op != "silu_mul") << c.op << " " << c.name;
    if (c.op == "silu_mul") {
      EXPECT_EQ(c.error, "candidate: silu_mul: not implemented on this backend");
    }
  }
  EXPECT_NE(log.str().find("not implemented on this backend"), std::string::npos);
}

TEST(Conformance, PerfModeReportsTheCandidatesMedianTimeForEveryCase) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  ConformanceOptions options;
  options.perf = true;
  options.ops = {"rms_norm", "write_cache"};
  std::ostringstream log;
  ConformanceReport report = run_conformance(*cpu, options, log);
  ASSERT_FALSE(report.cases.empty());
  for (const CaseResult& c : report.cases) EXPECT_GE(c.median_us, 0.0) << c.name;
  EXPECT_NE(log.str().find("median_us"), std::string::npos);
}

TEST(Conformance, TheTablePrintsEveryCheckWithItsBoundAndTheSummaryNamesTheFailingOps) {
  BrokenBackend broken(Fault::kGatherRowsTakesTheNextRow);
  ConformanceOptions options;
  options.ops = {"gather_rows", "add_inplace"};
  std::ostringstream log;
  run_conformance(broken, options, log);
  std::string table = log.str();
  EXPECT_NE(table.find("guard x"), std::string::npos) << table;
  EXPECT_NE(table.find("FAIL"), std::string::npos) << table;
  // The first mismatch is described: the whole first gathered row (512 wide) came from the next row.
  EXPECT_NE(table.find("-> 512 of 2560 differ, the first at [0, 0]"), std::string::npos) << table;
  EXPECT_NE(table.find("cases failed in gather_rows\n"), std::string::npos) << table;
}

Tensor host_f32(std::vector<float> values) {
  Tensor t = Tensor::empty(DType::kF32, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

Tensor host_i32(Shape shape, std::vector<int32_t> values) {
  Tensor t = Tensor::empty(DType::kI32, shape);
  std::copy(values.begin(), values.end(), t.data<int32_t>());
  return t;
}

TEST(Conformance, NmseIsTheRelativeSquaredErrorAndFailsOnAnyNonFiniteCandidateValue) {
  Tensor reference = host_f32({1.0f, -2.0f, 2.0f});
  EXPECT_DOUBLE_EQ(check_nmse("y", reference, host_f32({1.0f, -2.0f, 2.0f}), 0.0).value, 0.0);
  CheckResult off = check_nmse("y", reference, host_f32({1.0f, -2.0f, 2.3f}), 1e-2);
  EXPECT_NEAR(off.value, 0.09 / 9.0, 1e-7);
  EXPECT_TRUE(off.passed);
  CheckResult nan = check_nmse("y", reference, host_f32({1.0f, NAN, 2.0f}), 1.0);
  EXPECT_FALSE(nan.passed);
  EXPECT_NE(nan.detail.find("non-finite"), std::string::npos);
  EXPECT_FALSE(check_nmse("y", reference, host_f32({1.0f, -2.0f}), 1.0).passed);  // shape
}

TEST(Conformance, RoutingComparesExpertSetsInAnyOrderAndTheirWeightsByExpert) {
  Tensor ids = host_i32({2, 2}, {3, 7, 1, 4});
  Tensor weights = host_f32({0.6f, 0.4f, 0.7f, 0.3f}).view({2, 2});
  auto same_set_reordered = check_routing(ids, weights, host_i32({2, 2}, {7, 3, 1, 4}),
                                          host_f32({0.4f, 0.6f, 0.7f, 0.3f}).view({2, 2}), 1e-6);
  EXPECT_TRUE(same_set_reordered[0].passed && same_set_reordered[1].passed);
  auto swapped_ids = check_routing(ids, weights, host_i32({2, 2}, {7, 3, 1, 4}), weights, 1e-6);
  EXPECT_TRUE(swapped_ids[0].passed);
  EXPECT_FALSE(swapped_ids[1].passed);  // expert 7 now carries 0.6
  auto other_expert = check_routing(ids, weights, host_i32({2, 2}, {3, 7, 1, 5}), weights, 1e-6);
  EXPECT_EQ(other_expert[0].value, 1.0);
  EXPECT_NE(other_expert[0].detail.find("token 1"), std::string::npos);
}

}  // namespace
}  // namespace dsinfer::backend::conformance
