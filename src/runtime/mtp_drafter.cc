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

// The CPU samples as it is asked: its "device" tokens are on the host already, and a CPU batch takes no
// placeholders (DeepseekModel::prepare), so they are written into `batch` here. Returns what is left
// for the device to resolve (null on the CPU).
const Tensor* resolve_on_host(model::ForwardBatch& batch, const Tensor* tokens) {
  if (!tokens || tokens->device() != Device::kCpu) return tokens;
  for (int32_t& id : batch.token_ids)
    if (id < 0) id = tokens->data<int32_t>()[-id - 1];
  return nullptr;
}

}  // namespace

MtpDrafter::MtpDrafter(const model::DeepseekModel& model, model::LatentCache& cache, SpeculativeConfig config)
    : model_(model), cache_(cache), config_(config) {
  config_.validate();
  const int needed = config_.mode == SpeculativeConfig::Mode::kEagle ? 1 : config_.num_tokens;
  DSINFER_CHECK(model_.num_mtp_modules() >= needed, "speculative decoding (", config_.describe(), ") needs ", needed,
                " MTP modules; the model has ", model_.num_mtp_modules());
}

std::unique_ptr<backend::PendingTokens> MtpDrafter::queue_top1(Tensor& logits) {
  const auto rows = static_cast<size_t>(logits.dim(0));
  backend::SamplingBatch greedy;
  greedy.rows.resize(rows);  // temperature 0: the most likely token
  greedy.history_start.assign(rows + 1, 0);
  greedy.banned_start.assign(rows + 1, 0);
  return model_.backend().queue_sample_tokens(logits, greedy);
}

void MtpDrafter::accept(const SpeculativeStep& step, SpeculativeResult& result) const {
  const backend::SampledTokens& sampled = result.sampled;
  const int32_t* tokens = sampled.tokens.data<int32_t>();
  const int64_t rows = sampled.tokens.numel();
  const int64_t top_width = sampled.top_ids.defined() ? sampled.top_ids.dim(1) : 0;
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
    result.accepted.push_back(
        accept_drafts(s.drafts, {tokens + s.first_row, static_cast<size_t>(D + 1)}, config_, relaxed));
  }
}

SpeculativeResult MtpDrafter::draft(const model::ForwardBatch& batch, const Tensor& hidden,
                                    std::unique_ptr<backend::PendingTokens> pending, const SpeculativeStep& step,
                                    model::DecodeGraphs* graphs) {
  const int64_t T = batch.num_tokens();
  const auto rows = static_cast<int64_t>(batch.logit_rows.size());
  DSINFER_CHECK(static_cast<int64_t>(step.follow.size()) == T, "speculative step: ", step.follow.size(),
                " following tokens for a batch of ", T, " tokens");
  std::vector<int32_t> sampling_row(T, -1);
  for (int64_t r = 0; r < rows; ++r) sampling_row[batch.logit_rows[r]] = static_cast<int32_t>(r);

  // 1. The module over every row of the step, each with the token that follows it, and its logits at
  // every sampling row (a sequence drafts from its last emitted one). Under strict acceptance a row
  // emits its own sample (up to the sequence's accepted count; the rows past it are rolled back with
  // their samples), so the pass reads the samples where the device left them and is queued before the
  // host has them: one wait for both. A relaxed draft emits itself, not the sample: a step with relaxed
  // rows waits for its samples and accepts first.
  const bool relaxed = std::any_of(step.sequences.begin(), step.sequences.end(), [](const auto& s) {
    return std::find(s.relaxed.begin(), s.relaxed.end(), 1) != s.relaxed.end();
  });
  SpeculativeResult result;
  auto wait_and_accept = [&] {
    result.sampled = pending->wait();
    DSINFER_CHECK(result.sampled.tokens.numel() == rows, "speculative step: ", result.sampled.tokens.numel(),
                  " sampled rows for a batch of ", rows, " sampling rows");
    accept(step, result);
  };
  std::vector<int32_t> emitted;
  if (relaxed) {
    wait_and_accept();
    const int32_t* tokens = result.sampled.tokens.data<int32_t>();
    emitted.assign(tokens, tokens + rows);
    for (size_t i = 0; i < step.sequences.size(); ++i)
      for (size_t j = 0; j < result.accepted[i].tokens.size(); ++j)
        emitted[step.sequences[i].first_row + j] = result.accepted[i].tokens[j];
  }
  model::ForwardBatch extend = batch;
  extend.scored_rows.clear();
  for (int64_t t = 0; t < T; ++t) {
    int32_t next = step.follow[t];
    if (next == SpeculativeStep::kFollowsSample) {
      DSINFER_CHECK(sampling_row[t] >= 0, "speculative step: row ", t, " follows a sample but samples nothing");
      next = relaxed ? emitted[sampling_row[t]] : -(sampling_row[t] + 1);  // a placeholder for the sample
    }
    extend.token_ids[t] = next;
  }
  if (extend.logit_rows.empty()) extend.logit_rows.push_back(0);  // the cache rows are what this pass is for
  const Tensor* samples = relaxed ? nullptr : &pending->device_tokens();
  samples = resolve_on_host(extend, samples);
  std::optional<model::ForwardResult> replayed = graphs ? graphs->mtp_extend(extend, samples) : std::nullopt;
  model::ForwardResult module =
      replayed ? std::move(*replayed) : model_.forward_mtp_on_device(0, hidden, extend, cache_, samples);
  std::unique_ptr<backend::PendingTokens> module_top1 = queue_top1(module.logits);
  if (!relaxed) wait_and_accept();
  backend::SampledTokens top = module_top1->wait();
  result.drafts.resize(step.sequences.size());

  // A sequence may gain room tokens: this step's accepted + 1, then the next step's drafts + 1.
  std::vector<size_t> drafting;
  std::vector<int64_t> wanted(step.sequences.size(), 0);
  std::vector<int32_t> drafting_rows;  // token rows: each drafting sequence's last emitted row
  std::vector<int32_t> position(step.sequences.size(), 0);
  for (size_t i = 0; i < step.sequences.size(); ++i) {
    const SpeculativeStep::Sequence& s = step.sequences[i];
    wanted[i] = std::clamp<int64_t>(s.room - (result.accepted[i].accepted + 1) - 1, 0, config_.num_tokens);
    if (wanted[i] == 0) continue;
    const int32_t row = s.first_row + result.accepted[i].accepted;
    drafting.push_back(i);
    drafting_rows.push_back(batch.logit_rows[row]);
    result.drafts[i].push_back(top.tokens.data<int32_t>()[row]);
    position[i] = batch.attention.positions[batch.logit_rows[row]];
  }
  if (drafting.empty()) return result;

  // 2. Chained drafts, one position further each, from the previous module's residual: each pass's
  // tokens are the previous pass's top-1 where the device left them (placeholders; the first pass's
  // are on the host), so every pass is queued at once and one wait brings all their drafts.
  Tensor previous = model_.backend().gather_rows(module.residual, drafting_rows);
  std::vector<size_t> active = drafting;
  std::vector<std::unique_ptr<backend::PendingTokens>> chained;  // each pass's top-1, queued
  std::vector<std::vector<size_t>> chained_sequences;             // and the sequences of its rows
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
    for (size_t k = 0; k < next.size(); ++k) {
      const size_t i = next[k];
      const int32_t row = batch.logit_rows[step.sequences[i].first_row];
      const int32_t token = c == 1 ? result.drafts[i].back() : -(kept[k] + 1);  // the last pass's row of it
      builder.add(std::span(&token, 1), position[i] + c, pages_of(batch.attention, piece_of(batch.attention, row)),
                  model::LogitRows::kLast);
    }
    model::ForwardBatch chain = builder.build();
    for (size_t k = 0; k < next.size(); ++k)
      DSINFER_CHECK(chain.logit_rows[k] == static_cast<int32_t>(k), "speculative step: a chained batch was reordered");
    const Tensor* last = chained.empty() ? nullptr : resolve_on_host(chain, &chained.back()->device_tokens());
    const int module_index = config_.mode == SpeculativeConfig::Mode::kEagle ? 0 : c;
    model::ForwardResult step_result = model_.forward_mtp_on_device(module_index, previous, chain, cache_, last);
    chained.push_back(queue_top1(step_result.logits));
    chained_sequences.push_back(next);
    previous = step_result.residual;
    active = std::move(next);
  }
  for (size_t c = 0; c < chained.size(); ++c) {
    backend::SampledTokens drafts = chained[c]->wait();
    for (size_t k = 0; k < chained_sequences[c].size(); ++k)
      result.drafts[chained_sequences[c][k]].push_back(drafts.tokens.data<int32_t>()[k]);
  }
  return result;
}

}  // namespace dsinfer::runtime
