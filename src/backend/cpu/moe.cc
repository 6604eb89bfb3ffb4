// MoE on the CPU: expert selection (route) and the routed experts' SiLU-gated MLPs.
//
// Selection follows the checkpoints' own definitions:
//   noaux_tc (V3): sigmoid scores; `bias` (e_score_correction_bias) is added for choosing only;
//     groups are ranked by the sum of their best two biased scores and the best topk_group kept;
//     weights are the unbiased scores of the chosen experts.
//   greedy (V2): top-k of the softmax scores.
//   group_limited_greedy (V2): groups ranked by their best single score.
// Then optional normalisation of the chosen weights and the routed_scaling_factor.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/ops.h"
#include "core/parallel.h"

namespace dsinfer::backend::cpu {
namespace {

// Indices of the k largest values, largest first; ties go to the lower index.
std::vector<int> top_indices(const std::vector<float>& values, int k) {
  std::vector<int> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  });
  order.resize(k);
  return order;
}

// Sets every expert outside the best `keep` groups to `fill`. group_score reduces one group.
template <typename GroupScore>
void keep_best_groups(std::vector<float>& choice, int n_group, int keep, float fill, GroupScore group_score) {
  int per_group = static_cast<int>(choice.size()) / n_group;
  std::vector<float> group_scores(n_group);
  for (int g = 0; g < n_group; ++g)
    group_scores[g] = group_score(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
  std::vector<bool> kept(n_group, false);
  for (int g : top_indices(group_scores, keep)) kept[g] = true;
  for (int g = 0; g < n_group; ++g)
    if (!kept[g]) std::fill(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group, fill);
}

float sum_of_top_two(std::vector<float>::iterator begin, std::vector<float>::iterator end) {
  float first = -INFINITY, second = -INFINITY;
  for (auto it = begin; it != end; ++it) {
    if (*it > first) {
      second = first;
      first = *it;
    } else if (*it > second) {
      second = *it;
    }
  }
  return first + second;
}

float max_of(std::vector<float>::iterator begin, std::vector<float>::iterator end) {
  return *std::max_element(begin, end);
}

}  // namespace

Routing route(const Tensor& logits, const Tensor& bias, const RouterParams& params) {
  expect_f32(logits, "route", "logits", 2);
  int64_t T = logits.dim(0);
  int E = static_cast<int>(logits.dim(1));
  int k = params.top_k;
  DSINFER_CHECK(k >= 1 && k <= E && params.n_group >= 1 && E % params.n_group == 0 &&
                    params.topk_group >= 1 && params.topk_group <= params.n_group,
                "route: top_k ", k, ", n_group ", params.n_group, ", topk_group ", params.topk_group,
                " do not fit ", E, " experts");
  bool biased = bias.defined();
  if (biased) {
    expect_f32(bias, "route", "bias", 1);
    DSINFER_CHECK(bias.dim(0) == E, "route: bias ", bias.shape().to_string(), " for ", E, " experts");
  }
  Routing routing{Tensor::empty(DType::kI32, {T, k}), Tensor::empty(DType::kF32, {T, k})};
  parallel_for(T, 8, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(E), choice(E);
    for (int64_t t = begin; t < end; ++t) {
      const float* row = logits.data<float>() + t * E;
      if (params.scoring == Scoring::kSigmoid) {
        for (int e = 0; e < E; ++e) scores[e] = 1.0f / (1.0f + std::exp(-row[e]));
      } else {
        float max_logit = *std::max_element(row, row + E);
        double total = 0.0;
        for (int e = 0; e < E; ++e) total += scores[e] = std::exp(row[e] - max_logit);
        for (int e = 0; e < E; ++e) scores[e] = static_cast<float>(scores[e] / total);
      }
      choice = scores;
      if (biased)
        for (int e = 0; e < E; ++e) choice[e] += bias.data<float>()[e];
      if (params.selection == ExpertSelection::kNoauxTc) {
        keep_best_groups(choice, params.n_group, params.topk_group, -INFINITY, sum_of_top_two);
      } else if (params.selection == ExpertSelection::kGroupLimitedGreedy) {
        keep_best_groups(choice, params.n_group, params.topk_group, 0.0f, max_of);
      }
      std::vector<int> chosen = top_indices(choice, k);
      float total = 0.0f;
      for (int i = 0; i < k; ++i) total += scores[chosen[i]];
      float norm = params.normalize ? 1.0f / (total + 1e-20f) : 1.0f;
      for (int i = 0; i < k; ++i) {
        routing.expert_ids.data<int32_t>()[t * k + i] = chosen[i];
        routing.weights.data<float>()[t * k + i] = scores[chosen[i]] * norm * params.scaling_factor;
      }
    }
  });
  return routing;
}

Tensor moe_experts(const Tensor& x, const Routing& routing, const ExpertStack& experts) {
  expect_f32(x, "moe_experts", "x", 2);
  int64_t T = x.dim(0), D = x.dim(1), k = routing.expert_ids.dim(1);
  int64_t E = experts.num_experts(), first = experts.first_expert;
  DSINFER_CHECK(first >= 0, "moe_experts: the stack's first expert is ", first, ", below 0");
  // Tokens grouped by the stack's experts: (token, slot) pairs, so each expert runs one batched
  // product. Slots routed to experts outside [first, first + E) are another rank's: skipped.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> assigned(E);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < k; ++i) {
      int32_t e = routing.expert_ids.data<int32_t>()[t * k + i];
      DSINFER_CHECK(e >= 0, "moe_experts: expert id ", e, " is negative");
      if (e >= first && e < first + E) assigned[e - first].emplace_back(t, i);
    }
  }
  Tensor out = Tensor::empty(DType::kF32, {T, D});
  for (int64_t e = 0; e < E; ++e) {
    const auto& rows = assigned[e];
    if (rows.empty()) continue;
    auto n = static_cast<int64_t>(rows.size());
    Tensor gathered = Tensor::empty(DType::kF32, {n, D});
    for (int64_t r = 0; r < n; ++r)
      std::copy_n(x.data<float>() + rows[r].first * D, D, gathered.data<float>() + r * D);
    Tensor hidden = silu_mul(linear(gathered, experts.gate_up.expert(e)));  // [n, I]
    Tensor down = linear(hidden, experts.down.expert(e));                    // [n, D]
    for (int64_t r = 0; r < n; ++r) {
      float weight = routing.weights.data<float>()[rows[r].first * k + rows[r].second];
      float* target = out.data<float>() + rows[r].first * D;
      const float* source = down.data<float>() + r * D;
      for (int64_t d = 0; d < D; ++d) target[d] += weight * source[d];
    }
  }
  return out;
}

}  // namespace dsinfer::backend::cpu
