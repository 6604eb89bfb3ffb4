#include "runtime/prompt_scores.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/parallel.h"

namespace dsinfer::runtime {
namespace {

// Whether token a (logit x) comes before token b (logit y) in the top list: higher logit, then lower id.
bool ranks_before(float x, int32_t a, float y, int32_t b) { return x > y || (x == y && a < b); }

}  // namespace

PromptLogprob score_logits(std::span<const float> logits, int32_t target, int top_n) {
  const auto V = static_cast<int64_t>(logits.size());
  DSINFER_CHECK(target >= 0 && target < V, "prompt logprobs: token ", target, " is outside the vocabulary of ", V);
  const float* row = logits.data();
  // The sampler's normaliser, term for term (cpu/sampling.cc), so that the two logprobs agree.
  const float max_logit = *std::max_element(row, row + V);
  double total = 0.0;
  for (int64_t i = 0; i < V; ++i) total += std::exp(static_cast<double>(row[i] - max_logit));
  const auto log_normalizer = static_cast<float>(max_logit + std::log(total));

  PromptLogprob out;
  out.token_id = target;
  const float chosen = row[target];
  out.logprob = chosen - log_normalizer;
  out.rank = static_cast<int32_t>(std::count_if(row, row + V, [chosen](float logit) { return logit >= chosen; }));
  // The top n by insertion into a short sorted list: n is at most 20, and most tokens fall below
  // its last entry at the first comparison.
  const auto n = static_cast<size_t>(std::clamp<int64_t>(top_n, 0, V));
  std::vector<std::pair<int32_t, float>>& top = out.top;
  top.reserve(n);
  for (int64_t i = 0; n > 0 && i < V; ++i) {
    const auto id = static_cast<int32_t>(i);
    if (top.size() == n && !ranks_before(row[i], id, top.back().second, top.back().first)) continue;
    if (top.size() == n) top.pop_back();
    auto at = std::find_if(top.begin(), top.end(),
                           [&](const auto& entry) { return ranks_before(row[i], id, entry.second, entry.first); });
    top.insert(at, {id, row[i]});
  }
  for (auto& entry : top) entry.second -= log_normalizer;
  return out;
}

std::vector<PromptLogprob> score_rows(const model::DeepseekModel& model, const Tensor& hidden,
                                      std::span<const model::ScoredRow> rows) {
  std::vector<PromptLogprob> scores(rows.size());
  for (size_t begin = 0; begin < rows.size(); begin += kScoreSliceRows) {
    const size_t count = std::min<size_t>(rows.size() - begin, kScoreSliceRows);
    std::vector<int32_t> slice(count);
    for (size_t i = 0; i < count; ++i) slice[i] = rows[begin + i].row;
    Tensor logits = model.backend().to_host(model.row_logits(hidden, slice));  // [count, V] f32
    DSINFER_CHECK(logits.dtype() == DType::kF32 && logits.rank() == 2 && logits.dim(0) == static_cast<int64_t>(count),
                  "prompt logprobs: the head gave ", logits.shape().to_string(), " for ", count, " rows");
    const int64_t V = logits.dim(1);
    const float* data = logits.data<float>();
    parallel_for(static_cast<int64_t>(count), 1, [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) {
        const model::ScoredRow& row = rows[begin + static_cast<size_t>(i)];
        scores[begin + static_cast<size_t>(i)] =
            score_logits(std::span<const float>(data + i * V, static_cast<size_t>(V)), row.target, row.top_n);
      }
    });
  }
  return scores;
}

}  // namespace dsinfer::runtime
