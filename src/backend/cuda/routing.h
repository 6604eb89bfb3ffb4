// The fused MoE router on the GPU: scores, biased group-limited selection, top-k, weights, in one
// kernel. It computes the CPU reference's function (backend/cpu/moe.cc) step for step, including its
// tie-breaking, so both pick the same experts in the same order whenever their scores agree.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"

namespace dsinfer::backend::cuda {

// logits [tokens, num_experts] f32; bias [num_experts] f32 (e_score_correction_bias) or null.
// -> expert_ids [tokens, top_k] int32 and weights [tokens, top_k] f32, both device memory.
// Per token, as on the CPU:
//   scores = sigmoid(logits) or softmax(logits); choice = scores + bias (when given);
//   noaux_tc: groups ranked by the sum of their two largest choices, the best topk_group kept, the
//     rest set to -inf; group-limited greedy: ranked by their largest choice, the rest set to 0;
//   expert_ids = the top_k largest choices, largest first, ties to the lower index (groups too);
//   weights = scores (unbiased) of those experts, divided by (their float sum + 1e-20) when
//     normalize, times scaling_factor.
// Throws when params do not fit num_experts (as the CPU does) or num_experts > 2048.
void route(const float* logits, const float* bias, int32_t* expert_ids, float* weights, int64_t tokens,
           int num_experts, const RouterParams& params, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
