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
    attention.slot_mapping.push_back(static_cast<int64_t>(pages[position / page_size]) * page_size +
                                     position % page_size);
  }
  attention.query_start.push_back(first_row + count);
  attention.context_lens.push_back(start + count);
  attention.add_pages(pages);
  if (logits == LogitRows::kLast) batch_.logit_rows.push_back(first_row + count - 1);
  if (logits == LogitRows::kAll)
    for (int32_t i = 0; i < count; ++i) batch_.logit_rows.push_back(first_row + i);
}

ForwardBatch BatchBuilder::build(AttentionMode mode) {
  batch_.mode = mode;
  ForwardBatch out = std::move(batch_);
  batch_ = ForwardBatch();
  batch_.attention.page_size = out.attention.page_size;
  batch_.attention.query_start.push_back(0);
  return out;
}

}  // namespace dsinfer::model
