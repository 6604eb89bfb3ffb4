#include "model/decode_graphs.h"

#include <algorithm>

#include "core/log.h"

namespace dsinfer::model {

struct DecodeGraphs::Graph {
  int rows = 0;
  std::unique_ptr<backend::StepGraph> graph;
  Tensor hidden;  // [rows, hidden]: the graph's output, rewritten by each replay
};

std::vector<int> decode_graph_buckets(int max_batch) {
  std::vector<int> sizes;
  for (int size : {1, 2, 4})
    if (size <= max_batch) sizes.push_back(size);
  for (int size = 8; size <= max_batch; size += size < 64 ? 8 : size < 256 ? 16 : 32) sizes.push_back(size);
  if (max_batch >= 1 && sizes.back() != max_batch) sizes.push_back(max_batch);
  return sizes;
}

DecodeGraphs::DecodeGraphs(const DeepseekModel& model, LatentCache& cache, const DecodeGraphOptions& options)
    : model_(model), cache_(cache), options_(options) {
  if (options.max_batch <= 0) return;
  DSINFER_CHECK(options.scratch_page >= 0 && options.scratch_page < cache.num_pages(),
                "decode graphs: the scratch page ", options.scratch_page, " is not a page of the cache (",
                cache.num_pages(), " pages)");
  backend::Backend& backend = model.backend();
  if (!backend.capture([] {})) return;  // a backend without graphs (the CPU)
  std::vector<int> sizes = decode_graph_buckets(options.max_batch);
  for (auto size = sizes.rbegin(); size != sizes.rend(); ++size) {
    pad(ForwardBatch{}, *size);
    model.prepare(padded_);
    (void)model.hidden_states(padded_, cache);  // warm-up: library plans and kernel attributes, outside capture
    auto graph = std::make_unique<Graph>();
    graph->rows = *size;
    graph->graph = backend.capture([&] { graph->hidden = model.hidden_states(padded_, cache); });
    graphs_.push_back(std::move(graph));
  }
  backend.synchronize();
  std::reverse(graphs_.begin(), graphs_.end());
  log_info("captured ", graphs_.size(), " decode graphs (batch 1 to ", options.max_batch, "), ",
           static_cast<double>(backend.memory_info().graph_pool_bytes) / (1 << 20), " MiB graph pool");
}

DecodeGraphs::~DecodeGraphs() = default;

std::vector<int> DecodeGraphs::buckets() const {
  std::vector<int> sizes;
  for (const auto& graph : graphs_) sizes.push_back(graph->rows);
  return sizes;
}

int DecodeGraphs::bucket_for(const ForwardBatch& batch) const {
  const int sequences = batch.attention.num_sequences();
  if (graphs_.empty() || batch.eager || sequences == 0 || batch.num_tokens() != sequences || batch.mixed() ||
      batch.absorbed_sequences != sequences || graphs_.back()->rows < sequences)
    return 0;
  for (const auto& graph : graphs_)
    if (graph->rows >= sequences) return graph->rows;
  return 0;
}

std::optional<Tensor> DecodeGraphs::logits(const ForwardBatch& batch, const Tensor* previous) {
  const int rows = bucket_for(batch);
  if (rows == 0) return std::nullopt;
  auto it = std::find_if(graphs_.begin(), graphs_.end(), [&](const auto& g) { return g->rows == rows; });
  // The slots the graph writes are not checked by its ops on replay: check them here.
  const int64_t slots = cache_.num_pages() * cache_.page_size();
  for (int64_t slot : batch.attention.slot_mapping)
    DSINFER_CHECK(slot >= 0 && slot < slots, "decode step: cache slot ", slot, " outside the cache of ", slots);
  pad(batch, rows);
  model_.prepare(padded_, previous);  // padding rows are token 0, never a placeholder
  Graph& graph = **it;
  if (!graph.graph->replay()) {
    // The step metadata moved (a larger step grew its device buffer): record this bucket again
    // over the new addresses. Capturing runs nothing, so the step still runs once, by the replay.
    log_info("decode graph for batch ", rows, ": step metadata moved; capturing it again");
    graph.graph = model_.backend().capture([&] { graph.hidden = model_.hidden_states(padded_, cache_); });
    DSINFER_CHECK(graph.graph->replay(), "decode graph for batch ", rows, ": a fresh capture does not replay");
    ++recaptures_;
  }
  ++replays_;
  return model_.logits(graph.hidden, padded_);
}

void DecodeGraphs::pad(const ForwardBatch& batch, int rows) {
  const int real = batch.attention.num_sequences();
  const int32_t page_size = static_cast<int32_t>(cache_.page_size());
  const backend::AttentionBatch& from = batch.attention;
  ForwardBatch& out = padded_;
  backend::AttentionBatch& to = out.attention;
  out.token_ids.assign(batch.token_ids.begin(), batch.token_ids.end());
  out.token_ids.resize(rows, 0);
  out.logit_rows = batch.logit_rows;  // the eager head reads the real rows only
  out.mode = AttentionMode::kAbsorbed;
  out.absorbed_sequences = rows;
  out.absorbed_tokens = rows;
  to.page_size = page_size;
  to.query_start.resize(rows + 1);
  for (int b = 0; b <= rows; ++b) to.query_start[b] = b;
  to.context_lens.assign(from.context_lens.begin(), from.context_lens.end());
  to.context_lens.resize(rows, 1);
  to.positions.assign(from.positions.begin(), from.positions.end());
  to.positions.resize(rows, 0);
  to.slot_mapping.assign(from.slot_mapping.begin(), from.slot_mapping.end());
  to.slot_mapping.resize(rows, int64_t{options_.scratch_page} * page_size);
  to.page_ids.assign(from.page_ids.begin(), from.page_ids.end());
  to.page_ids.resize(to.page_ids.size() + (rows - real), options_.scratch_page);
  if (real == 0) {
    to.page_table_start.assign(1, 0);
  } else {
    to.page_table_start.assign(from.page_table_start.begin(), from.page_table_start.end());
  }
  for (int b = real; b < rows; ++b) to.page_table_start.push_back(to.page_table_start.back() + 1);
}

}  // namespace dsinfer::model
