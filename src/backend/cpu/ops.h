// The CPU reference ops, as free functions. CpuBackend (cpu_backend.cc) forwards to these; tests
// and tools may call them directly. Every op computes in float32; see backend/backend.h for the
// contract of each.
#pragma once

#include <vector>

#include "backend/backend.h"

namespace dsinfer::backend::cpu {

void fill_uniform(Tensor& t, uint64_t seed, float low, float high);
Tensor embedding(const Tensor& table, const Tensor& ids);
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps);
Tensor add_rms_norm_inplace(Tensor& residual, const Tensor& x, const Tensor& weight, float eps);
void add_inplace(Tensor& x, const Tensor& y);
Tensor silu_mul(const Tensor& x);
Tensor concat_last(const Tensor& a, const Tensor& b);
Tensor slice_last(const Tensor& x, int64_t begin, int64_t end);
Tensor gather_rows(const Tensor& x, const std::vector<int32_t>& rows);
Tensor concat_rows(const Tensor& a, const Tensor& b);

Tensor linear(const Tensor& x, const LinearWeight& weight);
Tensor grouped_linear(const Tensor& x, const Tensor& weight);
Tensor absorb_query(const Tensor& q, const Tensor& w_uk_t);

void rope_inplace(Tensor& x, int64_t begin, const std::vector<int32_t>& positions, const RopeTable& table);

void write_cache(Tensor& cache, const Tensor& latent, const AttentionBatch& batch);
Tensor gather_cache(const Tensor& cache, const AttentionBatch& batch);
Tensor attention_expanded(const Tensor& q, const Tensor& kv, const Tensor& k_rope,
                          const AttentionBatch& batch, float scale);
Tensor attention_absorbed(const Tensor& q, const Tensor& cache, const AttentionBatch& batch, float scale,
                          int64_t latent_width);

Routing route(const Tensor& logits, const Tensor& bias, const RouterParams& params);
Tensor moe_experts(const Tensor& x, const Routing& routing, const ExpertStack& experts);

SampledTokens sample_tokens(Tensor& logits, const SamplingBatch& batch);
void resolve_placeholders(Tensor& token_ids, const Tensor& previous);
void map_expert_ids(Tensor& expert_ids, const Tensor& replica_start, const Tensor& replica_slots);
void count_expert_ids(const Tensor& expert_ids, Tensor& counts);
void write_latent_cache(Tensor& cache, const Tensor& kv_a, const Tensor& norm_weight, float eps, const RopeTable& table,
                        const AttentionBatch& batch);

// Checks used by every op: dtype and rank, with the op's name in the message.
void expect_f32(const Tensor& t, const char* op, const char* what, int rank);

}  // namespace dsinfer::backend::cpu
