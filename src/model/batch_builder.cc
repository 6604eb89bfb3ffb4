#include "model/batch_builder.h"

namespace dsinfer::model {

BatchBuilder::BatchBuilder(int page_size) {
  batch_.attention.page_size = page_size;
  batch_.attention.query_start.push_back(0);
}

void BatchBuilder::reserve(size_t sequences, size_t tokens, size_t page_ids) {
  backend::AttentionBatch& attention = batch_.attention;
  batch_.token_ids.reserve(tokens);
  attention.positions.reserve(tokens);
  attention.slot_mapping.reserve(tokens);
  batch_.logit_rows.reserve(sequences);
  attention.query_start.reserve(sequences + 1);
  attention.context_lens.reserve(sequences);
  attention.page_table_start.reserve(sequences + 1);
  attention.page_ids.reserve(page_ids);
}

void BatchBuilder::add(std::span<const int32_t> tokens, int32_t start, const std::vector<int32_t>& pages,
                       std::span<const int32_t> logit_offsets) {
  const auto first_row = static_cast<int32_t>(batch_.token_ids.size());
  add(tokens, start, pages, LogitRows::kNone);
  for (int32_t offset : logit_offsets) {
    DSINFER_CHECK(offset >= 0 && offset < static_cast<int64_t>(tokens.size()), "logit row ", offset,
                  " of a sequence of ", tokens.size(), " tokens");
    batch_.logit_rows.push_back(first_row + offset);
  }
}

void BatchBuilder::add(std::span<const int32_t> tokens, int32_t start, const std::vector<int32_t>& pages,
                       LogitRows logits) {
  backend::AttentionBatch& attention = batch_.attention;
  int page_size = attention.page_size;
  auto count = static_cast<int32_t>(tokens.size());
  DSINFER_CHECK(count > 0, "a sequence in a batch needs at least one token");
  DSINFER_CHECK(static_cast<int64_t>(pages.size()) * page_size >= start + count, "sequence needs ",
                start + count, " cache slots but holds ", pages.size(), " pages of ", page_size);
  auto first_row = static_cast<int32_t>(batch_.token_ids.size());
  for (int32_t i = 0; i < count; ++i) {
    int32_t position = start + i;
    batch_.token_ids.push_back(tokens[i]);
    attention.positions.push_back(position);
    attention.slot_mapping.push_back(backend::cache_slot(pages.data(), page_size, position));
  }
  attention.query_start.push_back(first_row + count);
  attention.context_lens.push_back(start + count);
  attention.add_pages(pages);
  if (logits == LogitRows::kLast) batch_.logit_rows.push_back(first_row + count - 1);
  if (logits == LogitRows::kAll)
    for (int32_t i = 0; i < count; ++i) batch_.logit_rows.push_back(first_row + i);
}

void BatchBuilder::score(int32_t first, std::span<const int32_t> targets, int32_t top_n) {
  const backend::AttentionBatch& attention = batch_.attention;
  DSINFER_CHECK(attention.num_sequences() > 0, "score: no sequence was added");
  const int32_t begin = attention.query_start[attention.num_sequences() - 1];
  const int32_t count = attention.query_start.back() - begin;
  DSINFER_CHECK(first >= 0 && first + static_cast<int64_t>(targets.size()) <= count, "score: rows [", first, ", ",
                first + static_cast<int64_t>(targets.size()), ") of a sequence of ", count, " tokens");
  for (size_t i = 0; i < targets.size(); ++i)
    batch_.scored_rows.push_back({begin + first + static_cast<int32_t>(i), targets[i], top_n});
}

namespace {

// Sequences [first, last) of `from` as a batch of their own (token rows renumbered from 0).
backend::AttentionBatch part_of(const backend::AttentionBatch& from, int first, int last) {
  backend::AttentionBatch part;
  part.page_size = from.page_size;
  int32_t row_begin = from.query_start[first], row_end = from.query_start[last];
  part.positions.assign(from.positions.begin() + row_begin, from.positions.begin() + row_end);
  part.slot_mapping.assign(from.slot_mapping.begin() + row_begin, from.slot_mapping.begin() + row_end);
  part.query_start.push_back(0);
  for (int b = first; b < last; ++b) {
    part.query_start.push_back(from.query_start[b + 1] - row_begin);
    part.context_lens.push_back(from.context_lens[b]);
    part.add_pages(from.pages(b));
  }
  return part;
}

bool takes_absorbed(const ForwardBatch& batch, int b) {
  if (batch.mode != AttentionMode::kAuto) return batch.mode == AttentionMode::kAbsorbed;
  return batch.attention.query_start[b + 1] - batch.attention.query_start[b] <= kMaxAbsorbedQueryLen;
}

// The same batch with its sequences in `order`; logit_rows keep their order and follow their rows;
// new_row[r]: where row r went.
ForwardBatch reordered(const ForwardBatch& from, const std::vector<int>& order, std::vector<int32_t>& new_row) {
  const backend::AttentionBatch& a = from.attention;
  ForwardBatch out;
  out.mode = from.mode;
  out.attention.page_size = a.page_size;
  out.attention.query_start.push_back(0);
  new_row.resize(from.token_ids.size());
  for (int b : order) {
    for (int32_t row = a.query_start[b]; row < a.query_start[b + 1]; ++row) {
      new_row[row] = static_cast<int32_t>(out.token_ids.size());
      out.token_ids.push_back(from.token_ids[row]);
      out.attention.positions.push_back(a.positions[row]);
      out.attention.slot_mapping.push_back(a.slot_mapping[row]);
    }
    out.attention.query_start.push_back(static_cast<int32_t>(out.token_ids.size()));
    out.attention.context_lens.push_back(a.context_lens[b]);
    out.attention.add_pages(a.pages(b));
  }
  for (int32_t row : from.logit_rows) out.logit_rows.push_back(new_row[row]);
  for (ScoredRow scored : from.scored_rows) {
    scored.row = new_row[scored.row];
    out.scored_rows.push_back(scored);
  }
  return out;
}

}  // namespace

ForwardBatch BatchBuilder::build(AttentionMode mode, std::vector<int32_t>* row_order) {
  batch_.mode = mode;
  ForwardBatch out = std::move(batch_);
  batch_ = ForwardBatch();
  batch_.attention.page_size = out.attention.page_size;
  batch_.attention.query_start.push_back(0);

  // Absorbed-form sequences first (decodes come first from the scheduler already; this only moves
  // the odd short prompt chunk), so that each form reads a contiguous slice of the step.
  int sequences = out.attention.num_sequences();
  std::vector<int> absorbed, expanded;
  for (int b = 0; b < sequences; ++b) (takes_absorbed(out, b) ? absorbed : expanded).push_back(b);
  bool in_order = expanded.empty() || absorbed.empty() || absorbed.back() < expanded.front();
  std::vector<int32_t> moved;
  if (!in_order) {
    absorbed.insert(absorbed.end(), expanded.begin(), expanded.end());
    out = reordered(out, absorbed, moved);
  }
  if (row_order) {
    row_order->resize(out.token_ids.size());
    for (size_t row = 0; row < row_order->size(); ++row)
      (*row_order)[row] = in_order ? static_cast<int32_t>(row) : moved[row];
  }
  out.absorbed_sequences = static_cast<int32_t>(sequences - expanded.size());
  out.absorbed_tokens = out.attention.query_start[out.absorbed_sequences];
  if (out.mixed()) {
    out.absorbed_part = part_of(out.attention, 0, out.absorbed_sequences);
    out.expanded_part = part_of(out.attention, out.absorbed_sequences, sequences);
  }
  return out;
}

}  // namespace dsinfer::model
