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
//     128-thread block. Lane l holds experts l, l + 32, ... (ceil(E / 32) <= 8 in registers); the
//     logits and the bias are loaded together before any use (one DRAM round trip at decode).
//     Sigmoid: the division's fast path for all 8 at once (no per-element branch). Group scores: with
//     groups of 32 (V3: group j is every lane's slot j) by warp reductions in registers (redux.sync
//     max of order keys, the second largest likewise), lane g ranking group g, one ballot giving the
//     kept groups; other group sizes stage the choices in the warp's slice of shared memory (padded
//     one float every 32) and lane g scans group g in index order with the CPU's update rules.
//     Top-k: each lane sorts its candidates (a bitonic network on 64-bit words: order key, then the
//     expert), then k rounds of one redux.sync max of the lanes' heads (a second, the lowest expert,
//     only on a tie of keys) and a pop by the winning lane; lane r keeps round r's expert and score,
//     and the weight sum accumulates in round order. No block barrier, no loop over experts.
//     Dynamic shared memory only when staging: 4 warps x (E + E / 32 + 2 n_group) x 4 bytes.
//   route_block_kernel (the rest, E up to 2048): one block per token, threads = E rounded up to a
//     warp (at most 512, looping beyond); top-k by counting each element's rank (E^2 / threads
//     compares per thread). Dynamic shared memory holds scores [E], choice [E], group scores and kept
//     flags [n_group] and the chosen experts [k].
//
// Exactness. Selection must reproduce the CPU's picks, so every comparison follows moe.cc:
//   - group scores are the CPU's (sum of the two largest for noaux_tc, the largest for group-limited):
//     scanned in index order by one thread per group, or (groups of 32) the same two values by warp
//     reductions, where only the sign of a zero score can differ, which no comparison sees;
//   - "a before b" is (value_a > value_b) or (value_a == value_b and a < b), for groups and experts.
//     Without NaNs this order is total, so the block kernel's ranks are a permutation and ranks
//     0..k-1 are exactly the CPU's sorted top-k list, and the warp kernel's k rounds pick that list
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

// The float whose order_key is `key` (the inverse of order_key; -0 comes back as +0).
__device__ __forceinline__ float key_value(unsigned key) {
  return __uint_as_float((key & 0x80000000u) != 0 ? key & 0x7fffffffu : ~key);
}

// 1.0f / d for 1 <= d < 2^126, the same bits as the division: its fast path as nvcc emits it for
// sm_90 (MUFU.RCP, then one FMA correction; the division branches to a subroutine only for d
// outside this range: zero, subnormal, >= 2^126, inf or NaN).
__device__ __forceinline__ float reciprocal_fast_path(float d) {
  float approximate;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(approximate) : "f"(d));
  const float error = __fmaf_rn(d, approximate, -1.0f);
  return __fmaf_rn(approximate, -error, approximate);
}

// A top-k candidate as one 64-bit word, larger = earlier in the "before" order: the choice's
// order_key in the high half, 0xffff - expert in the low half (a tie goes to the lower index). 0 is
// an empty slot (below every expert: order keys of floats are never 0).
__device__ __forceinline__ uint64_t candidate(float choice, int expert) {
  return static_cast<uint64_t>(order_key(choice)) << 32 | (0xffffu - static_cast<unsigned>(expert));
}
__device__ __forceinline__ int candidate_expert(uint64_t c) {
  return static_cast<int>(0xffffu - (static_cast<unsigned>(c) & 0xffffu));
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
  const bool has_bias = bias != nullptr;

  // Lane `lane` holds experts lane + 32 j. The logits and the bias are loaded together, before any
  // use (one DRAM round trip at decode, not two).
  float score[kPerLane], bias_of[kPerLane], choice[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    score[j] = e < E ? row[e] : 0.0f;
    bias_of[j] = has_bias && e < E ? bias[e] : 0.0f;
  }
  if (params.scoring == Scoring::kSigmoid) {
    // 1 / d for d = 1 + exp(-x): the division's own fast path, all kPerLane at once, and the division
    // itself (with its per-element slow-path branch) only when some d is outside it.
    float denominator[kPerLane];
    bool outside = false;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      denominator[j] = 1.0f + expf(-score[j]);
      outside |= !(denominator[j] < 0x1p126f);  // NaN too
    }
    if (outside) {
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) score[j] = 1.0f / denominator[j];
    } else {
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) score[j] = reciprocal_fast_path(denominator[j]);
    }
  } else {
    float max_logit = -INFINITY;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (lane + 32 * j < E) max_logit = fmaxf(max_logit, score[j]);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      max_logit = fmaxf(max_logit, __shfl_xor_sync(kFullMask, max_logit, offset));
    double total = 0.0;  // the CPU sums the float exponentials in double
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      score[j] = expf(score[j] - max_logit);
      if (lane + 32 * j < E) total += score[j];
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
    const float c = has_bias && lane + 32 * j < E ? score[j] + bias_of[j] : score[j];
    choice[j] = isnan(c) ? -INFINITY : c;
  }

  // Group mask: keep the best topk_group groups, fill the others.
  if (params.selection != ExpertSelection::kGreedy) {
    const bool noaux = params.selection == ExpertSelection::kNoauxTc;
    const float fill = noaux ? -INFINITY : 0.0f;
    if (E == 32 * kPerLane && n_group == kPerLane) {
      // Groups of 32 (V3): group j is slot j of every lane. Its largest choice is a warp max of
      // order keys; the second largest the max of the others, or the largest again when two lanes
      // hold it (moe.cc's scan gives the same two values in any order: only a zero's sign may
      // differ, which no comparison sees). The kPerLane reductions are independent.
      float group_score[kPerLane];
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const unsigned key = order_key(choice[j]);
        const unsigned first = __reduce_max_sync(kFullMask, key);
        const unsigned holders = __ballot_sync(kFullMask, key == first);
        const unsigned rest = __reduce_max_sync(kFullMask, key == first ? 0u : key);
        const unsigned second = __popc(holders) > 1 ? first : rest;
        const float s = noaux ? key_value(first) + key_value(second) : key_value(first);
        group_score[j] = isnan(s) ? -INFINITY : s;  // inf + -inf: rank it last
      }
      // Lane g ranks group g; the kept groups come back as the bits of one ballot.
      float mine = -INFINITY;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (lane == j) mine = group_score[j];
      int rank = 0;
#pragma unroll
      for (int h = 0; h < kPerLane; ++h) rank += before(group_score[h], h, mine, lane);
      const unsigned kept = __ballot_sync(kFullMask, lane < n_group && rank < params.topk_group);
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (!(kept >> j & 1u)) choice[j] = fill;
    } else {
      // Other group sizes: the choices staged in the warp's slice of shared memory, lane g scanning
      // group g in index order.
      float* staged = shared + warp * warp_slice_floats(E, n_group);  // [padded(E)]
      float* group_scores = staged + padded(E - 1) + 1;                // [n_group]
      float* group_kept = group_scores + n_group;                      // [n_group] 0 or 1
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int e = lane + 32 * j;
        if (e < E) staged[padded(e)] = choice[j];
      }
      __syncwarp();
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
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int e = lane + 32 * j;
        if (e < E && group_kept[e / per_group] == 0.0f) choice[j] = fill;
      }
    }
  }

  // Top-k. Each lane sorts its own candidates best first (a bitonic network on the 64-bit words,
  // unique but for empty slots), so its best untaken one is always its head. Round r: the warp's best
  // head (a max of order keys; on a tie of keys, a min of expert ids), whose lane pops it; lane r
  // keeps round r's expert and score.
  uint64_t cand[kPerLane];
  float cand_score[kPerLane];  // the unbiased score of cand[j]'s expert
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    cand[j] = e < E ? candidate(choice[j], e) : 0;
    cand_score[j] = score[j];
  }
#pragma unroll
  for (int size = 2; size <= kPerLane; size *= 2) {
#pragma unroll
    for (int stride = size / 2; stride > 0; stride /= 2) {
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int partner = i ^ stride;
        if (partner > i) {
          const bool descending = (i & size) == 0;  // size == kPerLane: all descending
          if (descending ? cand[i] < cand[partner] : cand[i] > cand[partner]) {
            const uint64_t c = cand[i];
            cand[i] = cand[partner];
            cand[partner] = c;
            const float s = cand_score[i];
            cand_score[i] = cand_score[partner];
            cand_score[partner] = s;
          }
        }
      }
    }
  }
  int my_expert = 0;
  float my_score = 0.0f;
  float total = 0.0f;  // the CPU's weight sum: output slot order, float
  for (int r = 0; r < k; ++r) {
    const unsigned key = static_cast<unsigned>(cand[0] >> 32);
    const unsigned top = __reduce_max_sync(kFullMask, key);  // k <= E: a real expert's key
    const unsigned holders = __ballot_sync(kFullMask, key == top);
    int winner = __ffs(static_cast<int>(holders)) - 1;
    if ((holders & (holders - 1)) != 0)  // equal choices in several lanes: the lowest expert wins
      winner = __reduce_min_sync(kFullMask, key == top ? candidate_expert(cand[0]) : INT_MAX) & 31;
    const int expert = __shfl_sync(kFullMask, candidate_expert(cand[0]), winner);
    const float expert_score = __shfl_sync(kFullMask, cand_score[0], winner);
    total += expert_score;
    if (lane == r) {
      my_expert = expert;
      my_score = expert_score;
    }
    if (lane == winner) {
#pragma unroll
      for (int j = 0; j + 1 < kPerLane; ++j) {
        cand[j] = cand[j + 1];
        cand_score[j] = cand_score[j + 1];
      }
      cand[kPerLane - 1] = 0;
      cand_score[kPerLane - 1] = 0.0f;
    }
  }

  // Weights: every lane has the same float sum.
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
  // No staging without groups, or with groups of 32 filling every lane's slots (reduced in registers).
  const bool staged = params.selection != ExpertSelection::kGreedy &&
                      !(num_experts == 32 * kPerLane && params.n_group == kPerLane);
  const size_t shared_bytes =
      !staged
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
