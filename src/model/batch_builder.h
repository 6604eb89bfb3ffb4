// Builds a ForwardBatch from sequences: their new tokens, where the first one sits, their pages.
//
// Slots and positions follow from the pages: token at position p of a sequence lives in slot
// pages[p / page_size] * page_size + p % page_size.
#pragma once

#include <span>
#include <vector>

#include "model/forward_batch.h"
#include "model/kv_cache.h"

namespace dsinfer::model {

enum class LogitRows : uint8_t { kNone, kLast, kAll };

class BatchBuilder {
 public:
  explicit BatchBuilder(int page_size = kPageSize);

  // Room for this many sequences, tokens and page ids, so that building allocates once.
  void reserve(size_t sequences, size_t tokens, size_t page_ids);
  // Adds a sequence's `tokens`, the first at position `start`; `pages` must cover start + size.
  void add(std::span<const int32_t> tokens, int32_t start, const std::vector<int32_t>& pages, LogitRows logits);
  // The same with the logits of the given token offsets within the sequence, in that order.
  void add(std::span<const int32_t> tokens, int32_t start, const std::vector<int32_t>& pages,
           std::span<const int32_t> logit_offsets);
  // Scores rows [first, first + targets.size()) of the sequence added last, row first + i against
  // targets[i] with the top_n most likely tokens (ForwardBatch::scored_rows; they follow their rows
  // when build() moves the sequence).
  void score(int32_t first, std::span<const int32_t> targets, int32_t top_n);
  // row_order, when given, gets each added row's row in the batch, rows in the order add() took them:
  // build() moves short pieces ahead of the prompts (below), and what a caller keeps per row must
  // move with them.
  ForwardBatch build(AttentionMode mode = AttentionMode::kAuto, std::vector<int32_t>* row_order = nullptr);

 private:
  ForwardBatch batch_;
};

}  // namespace dsinfer::model
