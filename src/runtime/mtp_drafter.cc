#include "runtime/mtp_drafter.h"

#include <algorithm>
#include <optional>

#include "model/batch_builder.h"

namespace dsinfer::runtime {
namespace {

// The attention sequence (piece) of token row `row`.
int piece_of(const backend::AttentionBatch& attention, int32_t row) {
  auto it = std::upper_bound(attention.query_start.begin(), attention.query_start.end(), row);
  return static_cast<int>(it - attention.query_start.begin()) - 1;
}

std::vector<int32_t> pages_of(const backend::AttentionBatch& attention, int piece) {
  return {attention.page_ids.begin() + attention.page_table_start[piece],
          attention.page_ids.begin() + attention.page_table_start[piece + 1]};
}

}  // namespace

MtpDrafter::MtpDrafter(const model::DeepseekModel& model, model::LatentCache& cache, SpeculativeConfig config)
    : model_(model), cache_(cache), config_(config) {
  config_.validate();
  const int needed = config_.mode == SpeculativeConfig::Mode::kEagle ? 1 : config_.num_tokens;
  DSINFER_CHECK(model_.num_mtp_modules() >= needed, "speculative decoding (", config_.describe(), ") needs ", needed,
                " MTP modules; the model has ", model_.num_mtp_modules());
}

std::vector<int32_t> MtpDrafter::top1(Tensor& logits) {
  const auto rows = static_cast<size_t>(logits.dim(0));
  backend::SamplingBatch greedy;
  greedy.rows.resize(rows);  // temperature 0: the most likely token
  greedy.history_start.assign(rows + 1, 0);
  greedy.banned_start.assign(rows + 1, 0);
  backend::SampledTokens sampled = model_.backend().sample_tokens(logits, greedy);
  return {sampled.tokens.data<int32_t>(), sampled.tokens.data<int32_t>() + rows};
}

SpeculativeResult MtpDrafter::draft(const model::ForwardBatch& batch, const Tensor& hidden,
                                    backend::SampledTokens sampled, const SpeculativeStep& step,
                                    model::DecodeGraphs* graphs) {
  const int64_t T = batch.num_tokens();
  const auto rows = static_cast<int64_t>(batch.logit_rows.size());
  DSINFER_CHECK(static_cast<int64_t>(step.follow.size()) == T && sampled.tokens.numel() == rows,
                "speculative step: ", step.follow.size(), " following tokens and ", sampled.tokens.numel(),
                " sampled rows for a batch of ", T, " tokens and ", rows, " sampling rows");
  const int32_t* tokens = sampled.tokens.data<int32_t>();
  const int64_t top_width = sampled.top_ids.defined() ? sampled.top_ids.dim(1) : 0;

  // Acceptance, and the token each sampling row emits (rows past a sequence's accepted count keep
  // their samples: their module rows are rolled back with them).
  SpeculativeResult result;
  std::vector<int32_t> emitted(tokens, tokens + rows);
  for (const SpeculativeStep::Sequence& s : step.sequences) {
    const auto D = static_cast<int64_t>(s.drafts.size());
    DSINFER_CHECK(s.first_row >= 0 && s.first_row + D < rows, "speculative step: rows ", s.first_row, " to ",
                  s.first_row + D, " outside the ", rows, " sampling rows");
    std::vector<TargetTop> relaxed;
    if (std::find(s.relaxed.begin(), s.relaxed.end(), 1) != s.relaxed.end()) {
      for (int64_t j = 0; j < D; ++j) {
        TargetTop top;
        if (s.relaxed[j] && top_width > 0) {
          const int64_t row = s.first_row + j;
          const auto width = static_cast<size_t>(std::min<int64_t>(top_width, config_.relaxed_topk));
          top.ids = {sampled.top_ids.data<int32_t>() + row * top_width, width};
          top.logprobs = {sampled.top_logprobs.data<float>() + row * top_width, width};
        }
        relaxed.push_back(top);
      }
    }
    Acceptance accepted = accept_drafts(s.drafts, {tokens + s.first_row, static_cast<size_t>(D + 1)}, config_, relaxed);
    for (size_t j = 0; j < accepted.tokens.size(); ++j) emitted[s.first_row + j] = accepted.tokens[j];
    result.accepted.push_back(std::move(accepted));
  }
  result.drafts.resize(step.sequences.size());
  result.sampled = std::move(sampled);  // `tokens` still points into it

  // 1. The module over every row of the step, each with the token that follows it.
  std::vector<int32_t> sampling_row(T, -1);
  for (int64_t r = 0; r < rows; ++r) sampling_row[batch.logit_rows[r]] = static_cast<int32_t>(r);
  model::ForwardBatch extend = batch;
  extend.scored_rows.clear();
  for (int64_t t = 0; t < T; ++t) {
    int32_t next = step.follow[t];
    if (next == SpeculativeStep::kFollowsSample) {
      DSINFER_CHECK(sampling_row[t] >= 0, "speculative step: row ", t, " follows a sample but samples nothing");
      next = emitted[sampling_row[t]];
    }
    extend.token_ids[t] = next;
  }
  // Its logits at each drafting sequence's last emitted row. A sequence may gain room tokens: this
  // step's accepted + 1, then the next step's drafts + 1.
  std::vector<size_t> drafting;
  std::vector<int64_t> wanted(step.sequences.size(), 0);
  extend.logit_rows.clear();
  for (size_t i = 0; i < step.sequences.size(); ++i) {
    const SpeculativeStep::Sequence& s = step.sequences[i];
    wanted[i] = std::clamp<int64_t>(s.room - (result.accepted[i].accepted + 1) - 1, 0, config_.num_tokens);
    if (wanted[i] == 0) continue;
    drafting.push_back(i);
    extend.logit_rows.push_back(batch.logit_rows[s.first_row + result.accepted[i].accepted]);
  }
  if (drafting.empty()) extend.logit_rows.push_back(0);  // the cache rows are what this pass is for
  std::optional<model::ForwardResult> replayed = graphs ? graphs->mtp_extend(extend) : std::nullopt;
  model::ForwardResult module = replayed ? std::move(*replayed) : model_.forward_mtp_on_device(0, hidden, extend, cache_);
  if (drafting.empty()) return result;
  std::vector<int32_t> first = top1(module.logits);
  std::vector<int32_t> position(step.sequences.size(), 0);
  for (size_t d = 0; d < drafting.size(); ++d) {
    result.drafts[drafting[d]].push_back(first[d]);
    position[drafting[d]] = batch.attention.positions[extend.logit_rows[d]];
  }

  // 2. Chained drafts, one position further each, from the previous module's residual.
  Tensor previous = model_.backend().gather_rows(module.residual, extend.logit_rows);
  std::vector<size_t> active = drafting;
  for (int c = 1; c < config_.num_tokens; ++c) {
    std::vector<size_t> next;
    std::vector<int32_t> kept;
    for (size_t a = 0; a < active.size(); ++a) {
      if (wanted[active[a]] <= c) continue;
      next.push_back(active[a]);
      kept.push_back(static_cast<int32_t>(a));
    }
    if (next.empty()) break;
    if (next.size() != active.size()) previous = model_.backend().gather_rows(previous, kept);
    model::BatchBuilder builder;
    for (size_t i : next) {
      const int32_t row = batch.logit_rows[step.sequences[i].first_row];
      builder.add(std::span(&result.drafts[i].back(), 1), position[i] + c,
                  pages_of(batch.attention, piece_of(batch.attention, row)), model::LogitRows::kLast);
    }
    model::ForwardBatch chain = builder.build();
    for (size_t k = 0; k < next.size(); ++k)
      DSINFER_CHECK(chain.logit_rows[k] == static_cast<int32_t>(k), "speculative step: a chained batch was reordered");
    const int module_index = config_.mode == SpeculativeConfig::Mode::kEagle ? 0 : c;
    model::ForwardResult step_result = model_.forward_mtp_on_device(module_index, previous, chain, cache_);
    std::vector<int32_t> drafts = top1(step_result.logits);
    for (size_t k = 0; k < next.size(); ++k) result.drafts[next[k]].push_back(drafts[k]);
    previous = step_result.residual;
    active = std::move(next);
  }
  return result;
}

}  // namespace dsinfer::runtime
