// A stand-in model for engine tests and benchmarks: its "KV cache" stores the token written to
// each slot, and the logits of a row favour one token chosen by a hash of the whole context read
// back through the page table. Any paging mistake (a page shared wrongly, a slot overwritten, a
// stale prefix) changes the context it reads and so the tokens it produces, which the tests
// compare against the same hash over the true token sequence.
//
// It takes the overlap scheduler's form (StepExecutor::launch/collect) like a device executor, so
// the engine's overlapped path is tested here: a launched batch's placeholders are resolved from the
// tokens of the step launched before it, and collect hands back the oldest launched step's tokens.
// It scores a batch's scored rows (prompt_logprobs) from the same logits, so each row's most likely
// token tells which context it read.
//
// For timing the engine (bench/engine_overhead_bench.cc) it can also stand in for a device that
// leaves the CPU's caches alone: `light` reads only the last context slot instead of all of them,
// and greedy rows are answered from the token the step chose rather than by scanning the logits.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "runtime/executor.h"

namespace dsinfer::runtime {

class HashingExecutor final : public StepExecutor {
 public:
  HashingExecutor(int64_t vocab, int64_t pages, int64_t max_model_len, std::vector<int32_t> eos_ids,
                  int32_t first_token = 16, bool light = false, bool overlaps = true);

  backend::SampledTokens run(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) override;
  bool overlaps() const override { return overlaps_; }
  void launch(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) override;
  backend::SampledTokens collect() override;
  std::vector<PromptLogprob> take_scores() override;
  int64_t vocab_size() const override { return vocab_; }
  int64_t max_model_len() const override { return max_model_len_; }
  int64_t num_pages() const override { return pages_; }
  std::vector<int32_t> eos_token_ids() const override { return eos_ids_; }

  // The token the executor favours after `context` (what greedy decoding produces).
  int32_t next_token(const std::vector<int32_t>& context) const;
  // Greedy continuation of `prompt` for `count` tokens.
  std::vector<int32_t> expected(std::vector<int32_t> prompt, int64_t count) const;
  // Tokens the last run() read through page tables (for tests of the engine's batches).
  int64_t tokens_run() const { return tokens_run_; }
  // Placeholders resolved so far (tests check that the overlapped path was taken).
  int64_t placeholders_resolved() const { return placeholders_resolved_; }

 private:
  backend::SampledTokens run_tokens(const model::ForwardBatch& batch, std::span<const int32_t> token_ids,
                                    const backend::SamplingBatch& sampling);
  // The token a row gives 5.0 besides the favoured one's 10.0.
  int32_t runner_up(int32_t favoured) const {
    return first_token_ + (favoured + 1 - first_token_) % (vocab_ - first_token_);
  }
  // What row `row` of the batch reads back through its sequence's page table, up to its position.
  std::vector<int32_t> context_of(const backend::AttentionBatch& attention, int32_t row) const;
  // The scores of the batch's scored rows, from the logits a row of that context gets.
  std::vector<PromptLogprob> score(const model::ForwardBatch& batch) const;

  int64_t vocab_, pages_, max_model_len_;
  std::vector<int32_t> eos_ids_;
  int32_t first_token_;
  bool light_;
  std::vector<int32_t> slots_;  // token written to each cache slot, -1 if none
  Tensor logits_;
  Tensor light_tokens_;               // light greedy steps: the favoured tokens, reused
  std::vector<int32_t> favoured_;     // per logits row of the last step: the token given 10.0
  std::vector<int64_t> written_;      // logits entries set by the last step (cleared by the next)
  int64_t tokens_run_ = 0;
  bool overlaps_;
  std::deque<backend::SampledTokens> launched_;  // oldest first
  std::deque<std::vector<PromptLogprob>> launched_scores_;  // per launched step, oldest first
  std::vector<PromptLogprob> collected_scores_;             // of the step collected (or run) last
  Tensor last_tokens_;                           // the tokens the last launched step sampled
  std::vector<int32_t> resolved_ids_;            // a launched batch's ids, placeholders resolved
  int64_t placeholders_resolved_ = 0;
};

}  // namespace dsinfer::runtime
