#include "model/mla.h"

#include <algorithm>

namespace dsinfer::model {
MlaAttention::MlaAttention(const WeightLoader& weights, const std::string& prefix)
    : backend_(weights.backend()), group_(weights.plan().attention) {
  const io::ModelConfig& config = weights.config();
  // With tensor parallelism this rank holds heads [first, first + heads_) of every head-major weight.
  const parallel::Range heads = weights.plan().place.heads(config.num_attention_heads);
  const int64_t all_heads = config.num_attention_heads, first = heads.begin;
  heads_ = heads.size();
  latent_ = config.kv_lora_rank;
  rope_dim_ = config.qk_rope_head_dim;
  nope_dim_ = config.qk_nope_head_dim;
  v_dim_ = config.v_head_dim;
  scale_ = static_cast<float>(config.softmax_scale());
  int64_t hidden = config.hidden_size, qk_dim = nope_dim_ + rope_dim_;

  const int64_t kv_dim = nope_dim_ + v_dim_;
  auto head_rows = [&](int64_t width) { return WeightShard{parallel::Range{first * width, (first + heads_) * width}, {}}; };
  if (config.q_lora_rank > 0) {
    weights.expect_shape(prefix + "q_a_proj.weight", {config.q_lora_rank, hidden});
    weights.expect_shape(prefix + "q_b_proj.weight", {all_heads * qk_dim, config.q_lora_rank});
    q_a_ = weights.linear(prefix + "q_a_proj.weight");
    q_a_norm_ = weights.f32(prefix + "q_a_layernorm.weight");
    q_b_ = weights.linear(prefix + "q_b_proj.weight", head_rows(qk_dim));
  } else {
    weights.expect_shape(prefix + "q_proj.weight", {all_heads * qk_dim, hidden});
    q_proj_ = weights.linear(prefix + "q_proj.weight", head_rows(qk_dim));
  }
  weights.expect_shape(prefix + "kv_a_proj_with_mqa.weight", {latent_ + rope_dim_, hidden});
  weights.expect_shape(prefix + "kv_b_proj.weight", {all_heads * kv_dim, latent_});
  weights.expect_shape(prefix + "o_proj.weight", {hidden, all_heads * v_dim_});
  kv_a_ = weights.linear(prefix + "kv_a_proj_with_mqa.weight");
  kv_a_norm_ = weights.f32(prefix + "kv_a_layernorm.weight");
  kv_b_ = weights.linear(prefix + "kv_b_proj.weight", head_rows(kv_dim));
  o_proj_ = weights.linear(prefix + "o_proj.weight",
                           WeightShard{{}, parallel::Range{first * v_dim_, (first + heads_) * v_dim_}});

  // Split kv_b ([H * (dn + dv), L]: per head dn key rows then dv value rows) for the absorbed form.
  Tensor kv_b = weights.host_f32(prefix + "kv_b_proj.weight");
  Tensor w_uk_t = Tensor::empty(DType::kF32, {heads_, latent_, nope_dim_});
  Tensor w_uv = Tensor::empty(DType::kF32, {heads_, v_dim_, latent_});
  const float* source = kv_b.data<float>() + first * kv_dim * latent_;
  for (int64_t h = 0; h < heads_; ++h) {
    const float* head = source + h * kv_dim * latent_;
    for (int64_t i = 0; i < nope_dim_; ++i)
      for (int64_t l = 0; l < latent_; ++l)
        w_uk_t.data<float>()[(h * latent_ + l) * nope_dim_ + i] = head[i * latent_ + l];
    std::copy_n(head + nope_dim_ * latent_, v_dim_ * latent_, w_uv.data<float>() + h * v_dim_ * latent_);
  }
  w_uk_t_ = weights.to_compute(w_uk_t);
  w_uv_ = weights.to_compute(w_uv);
}

Tensor MlaAttention::forward(const Tensor& x, const ForwardBatch& batch, Tensor& cache,
                             const backend::RopeTable& rope) const {
  int64_t T = x.dim(0);
  Tensor q = q_proj_.data.defined()
                 ? backend_.linear(x, q_proj_)
                 : backend_.linear(backend_.rms_norm(backend_.linear(x, q_a_), q_a_norm_, kMlaNormEps), q_b_);
  q = q.view({T, heads_, nope_dim_ + rope_dim_});                   // [T, H, dn + dr]
  backend_.rope_inplace(q, nope_dim_, batch.attention.positions, rope);

  // The cache rows: the normalised latent, then the rotated shared key (one fused op).
  backend_.write_latent_cache(cache, backend_.linear(x, kv_a_), kv_a_norm_, kMlaNormEps, rope, batch.attention);

  // Each form reads its own slice of the step: absorbed sequences come first (BatchBuilder).
  Tensor out;                                                               // [T, H, dv]
  if (!batch.mixed()) {
    bool absorbed_only = batch.absorbed_sequences == batch.attention.num_sequences();
    out = absorbed_only ? absorbed(q, cache, batch.attention) : expanded(q, cache, batch.attention);
  } else {
    int64_t split = batch.absorbed_tokens;
    Tensor decodes = absorbed(q.slice(0, split), cache, batch.absorbed_part);
    Tensor prompts = expanded(q.slice(split, T), cache, batch.expanded_part);
    out = backend_.concat_rows(decodes.view({split, heads_ * v_dim_}), prompts.view({T - split, heads_ * v_dim_}));
  }
  Tensor partial = backend_.linear(out.view({T, heads_ * v_dim_}), o_proj_);  // [T, hidden], this rank's heads
  parallel::sum_over(group_, partial);
  return partial;
}

Tensor MlaAttention::expanded(const Tensor& q, const Tensor& cache, const backend::AttentionBatch& batch) const {
  Tensor rows = backend_.gather_cache(cache, batch);                         // [S, L + dr]
  int64_t S = rows.dim(0);
  Tensor kv = backend_.linear(backend_.slice_last(rows, 0, latent_), kv_b_);  // [S, H * (dn + dv)]
  Tensor k_rope = backend_.slice_last(rows, latent_, latent_ + rope_dim_);  // [S, dr]
  return backend_.attention_expanded(q, kv.view({S, heads_, nope_dim_ + v_dim_}), k_rope, batch, scale_);
}

Tensor MlaAttention::absorbed(const Tensor& q, const Tensor& cache, const backend::AttentionBatch& batch) const {
  Tensor query = backend_.absorb_query(q, w_uk_t_);                                      // [T, H, L + dr]
  Tensor out_latent = backend_.attention_absorbed(query, cache, batch, scale_, latent_);  // [T, H, L]
  return backend_.grouped_linear(out_latent, w_uv_);                                      // [T, H, dv]
}

}  // namespace dsinfer::model
