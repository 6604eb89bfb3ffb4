#include "runtime/testing_executor.h"

#include <algorithm>
#include <utility>

#include "backend/cpu/ops.h"
#include "model/kv_cache.h"
#include "runtime/prompt_scores.h"

namespace dsinfer::runtime {
namespace {

uint64_t mix(uint64_t hash, uint64_t value) {
  hash ^= value + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
  return hash;
}

}  // namespace

HashingExecutor::HashingExecutor(int64_t vocab, int64_t pages, int64_t max_model_len, std::vector<int32_t> eos_ids,
                                 int32_t first_token, bool light, bool overlaps)
    : vocab_(vocab), pages_(pages), max_model_len_(max_model_len), eos_ids_(std::move(eos_ids)),
      first_token_(first_token), light_(light), slots_(pages * model::kPageSize, -1), overlaps_(overlaps) {}

int32_t HashingExecutor::next_token(const std::vector<int32_t>& context) const {
  uint64_t hash = 1469598103934665603ull;
  for (int32_t token : context) hash = mix(hash, static_cast<uint64_t>(token));
  return first_token_ + static_cast<int32_t>(hash % static_cast<uint64_t>(vocab_ - first_token_));
}

std::vector<int32_t> HashingExecutor::expected(std::vector<int32_t> prompt, int64_t count) const {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < count; ++i) {
    out.push_back(next_token(prompt));
    prompt.push_back(out.back());
  }
  return out;
}

backend::SampledTokens HashingExecutor::run(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) {
  for (int32_t id : batch.token_ids) DSINFER_CHECK(id >= 0, "run: token id ", id, " (a placeholder outside launch)");
  backend::SampledTokens sampled = run_tokens(batch, batch.token_ids, sampling);
  collected_scores_ = score(batch);
  return sampled;
}

void HashingExecutor::launch(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) {
  DSINFER_CHECK(launched_.size() < kMaxLaunchedSteps, "at most ", kMaxLaunchedSteps,
                " steps may be launched and not collected");
  resolved_ids_.assign(batch.token_ids.begin(), batch.token_ids.end());
  const auto placeholders = std::count_if(resolved_ids_.begin(), resolved_ids_.end(), [](int32_t id) { return id < 0; });
  if (placeholders > 0) {
    DSINFER_CHECK(overlaps_ && last_tokens_.defined(), "launch: placeholders with no step launched before");
    Tensor ids = Tensor::wrap(resolved_ids_.data(), DType::kI32, {static_cast<int64_t>(resolved_ids_.size())},
                              Device::kCpu, nullptr);
    backend::cpu::resolve_placeholders(ids, last_tokens_);  // the CPU definition; refuses a row past the end
    placeholders_resolved_ += placeholders;
  }
  backend::SampledTokens sampled = run_tokens(batch, resolved_ids_, sampling);
  // The results are copied: light mode reuses its token buffer in the next step.
  backend::SampledTokens kept = sampled;
  kept.tokens = sampled.tokens.clone();
  last_tokens_ = kept.tokens;
  launched_.push_back(std::move(kept));
  launched_scores_.push_back(score(batch));
}

backend::SampledTokens HashingExecutor::collect() {
  DSINFER_CHECK(!launched_.empty(), "collect: no step was launched");
  backend::SampledTokens oldest = std::move(launched_.front());
  launched_.pop_front();
  collected_scores_ = std::move(launched_scores_.front());
  launched_scores_.pop_front();
  return oldest;
}

std::vector<PromptLogprob> HashingExecutor::take_scores() { return std::exchange(collected_scores_, {}); }

std::vector<int32_t> HashingExecutor::context_of(const backend::AttentionBatch& attention, int32_t row) const {
  int b = 0;
  while (attention.query_start[b + 1] <= row) ++b;
  std::vector<int32_t> context;
  for (int32_t p = light_ ? attention.positions[row] : 0; p <= attention.positions[row]; ++p) {
    int64_t slot =
        static_cast<int64_t>(attention.pages(b)[p / model::kPageSize]) * model::kPageSize + p % model::kPageSize;
    context.push_back(slots_.at(slot));
  }
  return context;
}

std::vector<PromptLogprob> HashingExecutor::score(const model::ForwardBatch& batch) const {
  std::vector<PromptLogprob> scores;
  if (batch.scored_rows.empty()) return scores;  // the benchmark's steps: nothing allocated
  std::vector<float> logits(static_cast<size_t>(vocab_));
  for (const model::ScoredRow& row : batch.scored_rows) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    const int32_t favoured = next_token(context_of(batch.attention, row.row));
    logits[static_cast<size_t>(favoured)] = 10.0f;
    logits[static_cast<size_t>(runner_up(favoured))] = 5.0f;
    scores.push_back(score_logits(logits, row.target, row.top_n));
  }
  return scores;
}

backend::SampledTokens HashingExecutor::run_tokens(const model::ForwardBatch& batch, std::span<const int32_t> token_ids,
                                                   const backend::SamplingBatch& sampling) {
  const backend::AttentionBatch& attention = batch.attention;
  for (size_t t = 0; t < token_ids.size(); ++t) slots_.at(attention.slot_mapping[t]) = token_ids[t];
  tokens_run_ = batch.num_tokens();
  // One buffer reused across steps, as a device backend reuses its logits memory: the engine's
  // own time is what the benchmark measures, not the allocator's.
  auto rows = static_cast<int64_t>(batch.logit_rows.size());
  // (Undefined, it has numel() 1: a first step of prompt chunks alone, with no row, allocates too.)
  if (!logits_.defined() || logits_.numel() < rows * vocab_) {
    logits_ = Tensor::empty(DType::kF32, {std::max<int64_t>(rows, 1) * 2, vocab_});  // zeroed
    written_.clear();
  }
  for (int64_t entry : written_) logits_.data<float>()[entry] = 0.0f;
  written_.clear();
  favoured_.clear();
  Tensor logits = logits_.slice(0, rows);
  for (size_t r = 0; r < batch.logit_rows.size(); ++r) {
    int32_t favoured = next_token(context_of(attention, batch.logit_rows[r]));
    int32_t second = runner_up(favoured);
    logits.data<float>()[r * vocab_ + favoured] = 10.0f;
    logits.data<float>()[r * vocab_ + second] = 5.0f;
    written_.push_back(r * vocab_ + favoured);
    written_.push_back(r * vocab_ + second);
    favoured_.push_back(favoured);
  }
  // Light mode assumes no logit processing (no penalties, greedy), so it answers with what it
  // favoured without scanning the logits, as a device would leave the host's caches alone.
  bool greedy = std::all_of(sampling.rows.begin(), sampling.rows.end(), [](const backend::SamplingRow& row) {
    return row.params.temperature <= 0.0f && row.top_logprobs < 0 && row.repetition_penalty == 1.0f &&
           row.frequency_penalty == 0.0f && row.presence_penalty == 0.0f;
  });
  if (light_ && greedy && sampling.banned_tokens.empty()) {
    // (An undefined tensor has rank 0 and so numel() 1: a first step with one row must allocate too.)
    if (!light_tokens_.defined() || light_tokens_.numel() < rows)
      light_tokens_ = Tensor::empty(DType::kI32, {std::max<int64_t>(rows, 1) * 2});
    std::copy(favoured_.begin(), favoured_.end(), light_tokens_.data<int32_t>());
    backend::SampledTokens out;
    out.tokens = light_tokens_.slice(0, rows);
    return out;
  }
  // The penalties and bans change more entries of the reused buffer: reset those next step too.
  for (int64_t r = 0; r < rows; ++r) {
    for (int32_t i = sampling.history_start[r]; i < sampling.history_start[r + 1]; ++i)
      if (sampling.history_tokens[i] >= 0 && sampling.history_tokens[i] < vocab_)
        written_.push_back(r * vocab_ + sampling.history_tokens[i]);
    for (int32_t i = sampling.banned_start[r]; i < sampling.banned_start[r + 1]; ++i)
      if (sampling.banned_tokens[i] >= 0 && sampling.banned_tokens[i] < vocab_)
        written_.push_back(r * vocab_ + sampling.banned_tokens[i]);
  }
  return backend::cpu::sample_tokens(logits, sampling);
}

}  // namespace dsinfer::runtime
