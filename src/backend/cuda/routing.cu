// The MoE router: per token, scores -> biased choice -> group mask -> top-k -> weights.
//
// logits [T, E] f32, bias [E] f32 or null -> expert_ids [T, k] int32, weights [T, k] f32. V3: E = 256,
// 8 groups, 4 kept, k = 8.
// Roofline: reads 4E bytes and writes 8k bytes per token; compute is the O(E^2) rank count below
// (E^2 / threads compares per thread: 256 for V3), a few microseconds per block, and blocks run
// concurrently, so the op is a small fraction of the router GEMM before it.
//
// Launch: one block per token, threads = E rounded up to a warp (at most 512, looping beyond);
// dynamic shared memory holds scores [E], choice [E], group scores and kept flags [n_group] and the
// chosen experts [k].
//
// Exactness. Selection must reproduce the CPU's picks, so every comparison follows moe.cc:
//   - group scores are computed by one thread per group, scanning its experts in order with the
//     CPU's own update rules (sum of the two largest for noaux_tc, the largest for group-limited);
//   - "a before b" is (value_a > value_b) or (value_a == value_b and a < b), for groups and experts;
//     an element's rank is the number of elements before it. Without NaNs this order is total, so
//     the ranks are a permutation and ranks 0..k-1 are exactly the CPU's sorted top-k list;
//   - NaN choices (no order on the CPU either) rank as -inf, so every output slot is still written;
//   - the weight sum runs in one thread in output order, as the CPU's loop does.
// Scores themselves come from CUDA's expf (within 2 ulp of the CPU's), so a near-tie between two
// experts can resolve differently; exact ties (equal logits) resolve the same way.
#include "backend/cuda/routing.h"

#include <algorithm>
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
    route_kernel(const float* __restrict__ logits, const float* __restrict__ bias, int num_experts,
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
  const int threads = std::min(kMaxThreads, (E + 31) / 32 * 32);
  const size_t shared_bytes = (2 * static_cast<size_t>(E) + 2 * static_cast<size_t>(params.n_group) + k) * 4;
  route_kernel<<<static_cast<unsigned>(tokens), threads, shared_bytes, stream>>>(logits, bias, E, params, expert_ids,
                                                                               weights);
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
