// Multi-head latent attention (MLA), DeepSeek-V2/V3.
//
//   q      = q_b(rms(q_a(x)))  or q_proj(x) without q_lora     [T, H, dn + dr]
//   kv_a   = kv_a_proj_with_mqa(x)                               [T, L + dr]
//   latent = [rms(kv_a[:, :L]), rope(kv_a[:, L:])]               [T, L + dr] -> cache
//   expanded: k_nope, v = kv_b(latent[:, :L]) per head; softmax(q.k) v
//   absorbed: q_nope -> latent space through kv_b's key half; attention over the cache rows;
//             the latent output -> v space through kv_b's value half
//   out    = o_proj(attention)                                   [T, hidden]
// with L = kv_lora_rank (512), dr = qk_rope_head_dim (64), dn = qk_nope_head_dim (128),
// dv = v_head_dim (128) in DeepSeek-V3.
//
// With tensor parallelism a rank holds H / tp heads of q_b (or q_proj), kv_b and o_proj's columns;
// the latent cache and kv_a are whole on every rank, and o_proj's partial sums are all-reduced over
// the attention group (parallel/parallel_config.h).
#pragma once

#include <string>

#include "model/forward_batch.h"
#include "model/weights.h"

namespace dsinfer::model {

class MlaAttention {
 public:
  // prefix: "model.layers.N.self_attn."
  MlaAttention(const WeightLoader& weights, const std::string& prefix);

  // x [T, hidden] (normed) -> [T, hidden]. Writes this step's latents into `cache` first. Each
  // sequence attends in the form ForwardBatch gives it (forward_batch.h: absorbed for decodes and
  // short verifications, expanded for prompt chunks), so its numbers do not depend on the batch.
  Tensor forward(const Tensor& x, const ForwardBatch& batch, Tensor& cache,
                 const backend::RopeTable& rope) const;

 private:
  Tensor expanded(const Tensor& q, const Tensor& cache, const backend::AttentionBatch& batch) const;
  Tensor absorbed(const Tensor& q, const Tensor& cache, const backend::AttentionBatch& batch) const;

  backend::Backend& backend_;
  parallel::Communicator* group_;  // the attention group o_proj's partial sums are added over
  int64_t heads_, latent_, rope_dim_, nope_dim_, v_dim_;
  float scale_;
  backend::LinearWeight q_a_, q_b_, q_proj_;  // q_a/q_b when q_lora_rank > 0, else q_proj
  backend::LinearWeight kv_a_, kv_b_, o_proj_;
  Tensor q_a_norm_, kv_a_norm_;               // f32
  Tensor w_uk_t_;  // [H, L, dn] compute dtype: kv_b's key half, transposed per head (absorbs q_nope)
  Tensor w_uv_;    // [H, dv, L] compute dtype: kv_b's value half (maps latent outputs to v space)
};

// MLA uses a fixed epsilon for its inner norms (q_a_layernorm, kv_a_layernorm), as the reference
// implementations do, whatever rms_norm_eps says.
inline constexpr float kMlaNormEps = 1e-6f;

}  // namespace dsinfer::model
