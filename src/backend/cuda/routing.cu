// The MoE router: per token, scores -> biased choice -> group mask -> top-k -> weights, one kernel
// from the router GEMM's logits to the experts' ids and weights (no intermediate in global memory).
//
// logits [T, E] f32, bias [E] f32 or null -> expert_ids [T, k] int32, weights [T, k] f32. V3: E = 256,
// 8 groups, 4 kept, k = 8.
// Roofline: reads 4E bytes and writes 8k bytes per token (V3: 1 KB + 64 B); a few hundred
// instructions per token, so the op is latency bound at decode (one launch, one DRAM round trip) and
// far below the router GEMM before it at prefill.
//
// Two kernels, one chosen by shape (the same function, the same picks; see Exactness):
//   route_warp_kernel (E <= 256, k <= 32: every DeepSeek model): one warp per token, 4 tokens per
//     128-thread block. Lane l holds experts l, l + 32, ... (ceil(E / 32) <= 8 in registers; the
//     loads are coalesced). The group scores come from the choices staged in the warp's slice of
//     shared memory (padded one float every 32, so the lanes scanning different groups hit different
//     banks): lane g scans group g in index order with the CPU's update rules. Top-k is k rounds of a
//     warp arg-max (two redux.sync: the largest value as an order-preserving key, then the lowest
//     index holding it), the winner's lane marking it taken; lane r
//     keeps round r's expert and score and writes output slot r. No block barrier anywhere.
//     Dynamic shared memory: 4 warps x (E + E / 32 + 2 n_group) x 4 bytes (V3: 4.4 KB).
//   route_block_kernel (the rest, E up to 2048): one block per token, threads = E rounded up to a
//     warp (at most 512, looping beyond); top-k by counting each element's rank (E^2 / threads
//     compares per thread). Dynamic shared memory holds scores [E], choice [E], group scores and kept
//     flags [n_group] and the chosen experts [k].
//
// Exactness. Selection must reproduce the CPU's picks, so every comparison follows moe.cc:
//   - group scores are computed by one thread per group, scanning its experts in order with the
//     CPU's own update rules (sum of the two largest for noaux_tc, the largest for group-limited);
//   - "a before b" is (value_a > value_b) or (value_a == value_b and a < b), for groups and experts.
//     Without NaNs this order is total, so the block kernel's ranks are a permutation and ranks
//     0..k-1 are exactly the CPU's sorted top-k list, and the warp kernel's k arg-maxes are that list
//     in the same order;
//   - NaN choices (no order on the CPU either) rank as -inf, so every output slot is still written;
//   - the weight sum runs in the CPU's order (output slot order, float).
// Scores themselves come from CUDA's expf (within 2 ulp of the CPU's), so a near-tie between two
// experts can resolve differently; exact ties (equal logits) resolve the same way. The softmax total
// is summed in double, as on the CPU, in a different order (the last bits of a weight may differ).
#include "backend/cuda/routing.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "backend/cuda/cuda_check.h"

namespace dsinfer::backend::cuda {
namespace {

constexpr int kMaxThreads = 512;
// Shared memory is at most (2E + 2 n_group + k) * 4 <= 5 * 2048 * 4 = 40 KB, under the 48 KB a launch
// gets without opting in.
constexpr int kMaxExperts = 2048;

// Block-wide reductions; every thread gets the result. blockDim.x must be a multiple of 32. Each is
// called at most once per kernel (its partials array is not safely reusable by a second call).
__device__ __forceinline__ float block_max(float value) {
  __shared__ float warp_values[32];
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  if (threadIdx.x % 32 == 0) warp_values[threadIdx.x / 32] = value;
  __syncthreads();
  float result = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) result = fmaxf(result, warp_values[w]);
  return result;
}

__device__ __forceinline__ double block_sum(double value) {
  __shared__ double warp_values[32];
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  if (threadIdx.x % 32 == 0) warp_values[threadIdx.x / 32] = value;
  __syncthreads();
  double result = 0.0;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) result += warp_values[w];
  return result;
}

// Whether element (value_a, a) comes before (value_b, b) in the CPU's top_indices order.
__device__ __forceinline__ bool before(float value_a, int a, float value_b, int b) {
  return value_a > value_b || (value_a == value_b && a < b);
}

// The CPU's group scores: one pass over the group in index order.
__device__ float sum_of_top_two(const float* values, int n) {
  float first = -INFINITY, second = -INFINITY;
  for (int i = 0; i < n; ++i) {
    const float v = values[i];
    if (v > first) {
      second = first;
      first = v;
    } else if (v > second) {
      second = v;
    }
  }
  return first + second;
}

__device__ float max_of(const float* values, int n) {
  float best = values[0];
  for (int i = 1; i < n; ++i)
    if (best < values[i]) best = values[i];
  return best;
}

__global__ void __launch_bounds__(kMaxThreads)
    route_block_kernel(const float* __restrict__ logits, const float* __restrict__ bias, int num_experts,
                 RouterParams params, int32_t* __restrict__ expert_ids, float* __restrict__ weights) {
  const int E = num_experts, k = params.top_k, n_group = params.n_group;
  extern __shared__ float shared[];
  float* scores = shared;                                     // [E] unbiased: the weights
  float* choice = scores + E;                                 // [E] biased and masked: the selection
  float* group_scores = choice + E;                           // [n_group]
  int* group_kept = reinterpret_cast<int*>(group_scores + n_group);  // [n_group] 0 or 1
  int* chosen = group_kept + n_group;                         // [k] experts, best first

  const int64_t t = blockIdx.x;
  const float* row = logits + t * E;

  // Scores. Each thread writes scores[e] and choice[e] for its own experts e = threadIdx.x + m * blockDim.x.
  if (params.scoring == Scoring::kSigmoid) {
    for (int e = threadIdx.x; e < E; e += blockDim.x) scores[e] = 1.0f / (1.0f + expf(-row[e]));
  } else {
    float local_max = -INFINITY;
    for (int e = threadIdx.x; e < E; e += blockDim.x) local_max = fmaxf(local_max, row[e]);
    const float max_logit = block_max(local_max);
    double local_total = 0.0;  // the CPU sums the float exponentials in double
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
      const float exponential = expf(row[e] - max_logit);
      scores[e] = exponential;
      local_total += exponential;
    }
    const double total = block_sum(local_total);
    for (int e = threadIdx.x; e < E; e += blockDim.x) scores[e] = static_cast<float>(scores[e] / total);
  }
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const float c = bias != nullptr ? scores[e] + bias[e] : scores[e];
    choice[e] = isnan(c) ? -INFINITY : c;
  }
  __syncthreads();

  // Group mask: keep the best topk_group groups, fill the others.
  if (params.selection != ExpertSelection::kGreedy) {
    const bool noaux = params.selection == ExpertSelection::kNoauxTc;
    const int per_group = E / n_group;
    for (int g = threadIdx.x; g < n_group; g += blockDim.x) {
      const float* members = choice + g * per_group;
      const float score = noaux ? sum_of_top_two(members, per_group) : max_of(members, per_group);
      group_scores[g] = isnan(score) ? -INFINITY : score;  // inf + -inf: rank it last, as for experts
    }
    __syncthreads();
    for (int g = threadIdx.x; g < n_group; g += blockDim.x) {
      int rank = 0;
      for (int h = 0; h < n_group; ++h) rank += before(group_scores[h], h, group_scores[g], g);
      group_kept[g] = rank < params.topk_group;
    }
    __syncthreads();
    const float fill = noaux ? -INFINITY : 0.0f;
    for (int e = threadIdx.x; e < E; e += blockDim.x)
      if (!group_kept[e / per_group]) choice[e] = fill;
    __syncthreads();
  }

  // Top-k: the expert of rank r (r < k) goes to output slot r. All threads read choice[f] for the
  // same f at once: a shared-memory broadcast.
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const float value = choice[e];
    int rank = 0;
    for (int f = 0; f < E; ++f) rank += before(choice[f], f, value, e);
    if (rank < k) chosen[rank] = e;
  }
  __syncthreads();

  // Weights, in one thread so the sum runs in the CPU's order (k is small: 8 for V3).
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int i = 0; i < k; ++i) total += scores[chosen[i]];
    const float norm = params.normalize ? 1.0f / (total + 1e-20f) : 1.0f;
    for (int i = 0; i < k; ++i) {
      expert_ids[t * k + i] = chosen[i];
      weights[t * k + i] = scores[chosen[i]] * norm * params.scaling_factor;
    }
  }
}


// ---- one warp per token (E <= 32 * kPerLane, k <= 32) ----

constexpr int kWarpTokens = 4;  // warps (tokens) per block
constexpr int kWarpMaxExperts = 256;
constexpr int kWarpMaxTopK = 32;  // lane r keeps output slot r
constexpr unsigned kFullMask = 0xffffffffu;

// Floats of one warp's shared-memory slice: choices [E + E / 32] (padded), group scores and kept
// flags [n_group] each.
__host__ __device__ constexpr int warp_slice_floats(int experts, int n_group) {
  return experts + (experts + 31) / 32 + 2 * n_group;
}

// The choice of expert e in the padded staging array: one float of padding every 32, so the lanes
// scanning groups of 32 experts (V3) read from different banks.
__device__ __forceinline__ int padded(int e) { return e + (e >> 5); }

// A float's rank as an unsigned key: key(a) > key(b) exactly when a > b (no NaNs: choices have none),
// and -0 and +0 share a key (equal floats, ordered by index like any tie).
__device__ __forceinline__ unsigned order_key(float value) {
  const unsigned bits = __float_as_uint(value == 0.0f ? 0.0f : value);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

// The arg-max of the warp in the "before" order, given each lane's own first element in that order
// (`has` false: none left). Every lane gets the expert: the largest key (one redux.sync), then the
// lowest index among the lanes holding it (another).
__device__ __forceinline__ int warp_first(bool has, float value, int index) {
  const unsigned key = has ? order_key(value) : 0u;  // 0: below every float's key
  const unsigned top = __reduce_max_sync(kFullMask, key);
  return __reduce_min_sync(kFullMask, has && key == top ? index : INT_MAX);
}

template <int kPerLane>
__global__ void __launch_bounds__(kWarpTokens * 32)
    route_warp_kernel(const float* __restrict__ logits, const float* __restrict__ bias, int64_t tokens,
                      int num_experts, RouterParams params, int32_t* __restrict__ expert_ids,
                      float* __restrict__ weights) {
  extern __shared__ float shared[];
  const int E = num_experts, k = params.top_k, n_group = params.n_group;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarpTokens + warp;
  if (t >= tokens) return;  // the whole warp: nothing below synchronizes more than one warp
  const float* row = logits + t * E;

  // Lane `lane` holds experts lane + 32 j; slots past E are born taken.
  float score[kPerLane], choice[kPerLane];
  unsigned taken = 0;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    score[j] = e < E ? row[e] : 0.0f;
    if (e >= E) taken |= 1u << j;
  }
  if (params.scoring == Scoring::kSigmoid) {
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) score[j] = 1.0f / (1.0f + expf(-score[j]));
  } else {
    float max_logit = -INFINITY;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (!(taken >> j & 1u)) max_logit = fmaxf(max_logit, score[j]);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      max_logit = fmaxf(max_logit, __shfl_xor_sync(kFullMask, max_logit, offset));
    double total = 0.0;  // the CPU sums the float exponentials in double
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      score[j] = expf(score[j] - max_logit);
      if (!(taken >> j & 1u)) total += score[j];
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) total += __shfl_xor_sync(kFullMask, total, offset);
    // One correctly rounded reciprocal instead of kPerLane divisions (a double division is a
    // subroutine call whose saved registers spill); float(s * (1 / total)) can differ from the CPU's
    // float(s / total) only where the double product lands on a float rounding boundary.
    const double inverse_total = __drcp_rn(total);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) score[j] = static_cast<float>(score[j] * inverse_total);
  }
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    const float c = bias != nullptr && e < E ? score[j] + bias[e] : score[j];
    choice[j] = isnan(c) ? -INFINITY : c;
  }

  // Group mask: keep the best topk_group groups, fill the others.
  if (params.selection != ExpertSelection::kGreedy) {
    float* staged = shared + warp * warp_slice_floats(E, n_group);  // [padded(E)]
    float* group_scores = staged + padded(E - 1) + 1;                // [n_group]
    float* group_kept = group_scores + n_group;                      // [n_group] 0 or 1
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      if (e < E) staged[padded(e)] = choice[j];
    }
    __syncwarp();
    const bool noaux = params.selection == ExpertSelection::kNoauxTc;
    const int per_group = E / n_group;
    for (int g = lane; g < n_group; g += 32) {
      float first = -INFINITY, second = -INFINITY;  // moe.cc's sum_of_top_two / max_of, in index order
      for (int e = g * per_group; e < (g + 1) * per_group; ++e) {
        const float v = staged[padded(e)];
        if (v > first) {
          second = first;
          first = v;
        } else if (v > second) {
          second = v;
        }
      }
      const float group_score = noaux ? first + second : first;
      group_scores[g] = isnan(group_score) ? -INFINITY : group_score;  // inf + -inf: rank it last
    }
    __syncwarp();
    for (int g = lane; g < n_group; g += 32) {
      int rank = 0;
      for (int h = 0; h < n_group; ++h) rank += before(group_scores[h], h, group_scores[g], g);
      group_kept[g] = rank < params.topk_group ? 1.0f : 0.0f;
    }
    __syncwarp();
    const float fill = noaux ? -INFINITY : 0.0f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      if (e < E && group_kept[e / per_group] == 0.0f) choice[j] = fill;
    }
  }

  // Top-k: k rounds of the warp's arg-max over the experts not yet taken; lane r keeps round r's.
  int my_expert = 0;
  float my_score = 0.0f;
  for (int r = 0; r < k; ++r) {
    float best_value = -INFINITY;
    int best = INT_MAX;  // loses to every expert, -inf ones included
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      if (!(taken >> j & 1u) && before(choice[j], e, best_value, best)) {
        best_value = choice[j];
        best = e;
      }
    }
    best = warp_first(best != INT_MAX, best_value, best);  // k <= E: a real expert
    const int owner = best & 31, slot = best >> 5;
    float owned = 0.0f;  // the owner's unbiased score of `best` (a select chain: no local memory)
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (j == slot) owned = score[j];
    const float best_score = __shfl_sync(kFullMask, owned, owner);
    if (lane == owner) taken |= 1u << slot;
    if (lane == r) {
      my_expert = best;
      my_score = best_score;
    }
  }

  // Weights: the sum in output order (every lane computes the same float).
  float total = 0.0f;
  for (int i = 0; i < k; ++i) total += __shfl_sync(kFullMask, my_score, i);
  const float norm = params.normalize ? 1.0f / (total + 1e-20f) : 1.0f;
  if (lane < k) {
    expert_ids[t * k + lane] = my_expert;
    weights[t * k + lane] = my_score * norm * params.scaling_factor;
  }
}

template <int kPerLane>
void launch_route_warp(const float* logits, const float* bias, int32_t* expert_ids, float* weights, int64_t tokens,
                       int num_experts, const RouterParams& params, cudaStream_t stream) {
  const int64_t blocks = (tokens + kWarpTokens - 1) / kWarpTokens;
  const size_t shared_bytes =
      params.selection == ExpertSelection::kGreedy
          ? 0
          : size_t{kWarpTokens} * static_cast<size_t>(warp_slice_floats(num_experts, params.n_group)) * sizeof(float);
  route_warp_kernel<kPerLane><<<static_cast<unsigned>(blocks), kWarpTokens * 32, shared_bytes, stream>>>(
      logits, bias, tokens, num_experts, params, expert_ids, weights);
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

void route(const float* logits, const float* bias, int32_t* expert_ids, float* weights, int64_t tokens,
           int num_experts, const RouterParams& params, cudaStream_t stream) {
  const int E = num_experts, k = params.top_k;
  DSINFER_CHECK(E >= 1 && E <= kMaxExperts, "route: ", E, " experts; the CUDA router supports 1 to ", kMaxExperts);
  DSINFER_CHECK(k >= 1 && k <= E && params.n_group >= 1 && E % params.n_group == 0 && params.topk_group >= 1 &&
                    params.topk_group <= params.n_group,
                "route: top_k ", k, ", n_group ", params.n_group, ", topk_group ", params.topk_group, " do not fit ",
                E, " experts");
  DSINFER_CHECK(tokens >= 0 && tokens <= INT32_MAX, "route: ", tokens, " tokens is too many");
  if (tokens == 0) return;
  if (E <= kWarpMaxExperts && k <= kWarpMaxTopK) {
    if (E <= 32) {
      launch_route_warp<1>(logits, bias, expert_ids, weights, tokens, E, params, stream);
    } else if (E <= 64) {
      launch_route_warp<2>(logits, bias, expert_ids, weights, tokens, E, params, stream);
    } else if (E <= 128) {
      launch_route_warp<4>(logits, bias, expert_ids, weights, tokens, E, params, stream);
    } else {
      launch_route_warp<8>(logits, bias, expert_ids, weights, tokens, E, params, stream);
    }
    return;
  }
  const int threads = std::min(kMaxThreads, (E + 31) / 32 * 32);
  const size_t shared_bytes = (2 * static_cast<size_t>(E) + 2 * static_cast<size_t>(params.n_group) + k) * 4;
  route_block_kernel<<<static_cast<unsigned>(tokens), threads, shared_bytes, stream>>>(logits, bias, E, params,
                                                                                     expert_ids, weights);
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
