#include "model/decode_graphs.h"

#include <algorithm>
#include <utility>

#include "core/log.h"

namespace dsinfer::model {

struct DecodeGraphs::Graph {
  int sequences = 0;
  std::unique_ptr<backend::StepGraph> graph;
  Tensor hidden;  // [rows, hidden]: the graph's output, rewritten by each replay
  std::unique_ptr<backend::StepGraph> mtp;  // with mtp_extend: MTP module 0's block, reading `hidden`
  Tensor residual;  // [rows, hidden]: the MTP graph's output
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
  DSINFER_CHECK(options.tokens_per_sequence >= 1 && options.tokens_per_sequence <= kMaxAbsorbedQueryLen &&
                    options.tokens_per_sequence <= cache.page_size(),
                "decode graphs: ", options.tokens_per_sequence, " tokens a sequence (1 to ", kMaxAbsorbedQueryLen,
                ", the absorbed form's)");
  DSINFER_CHECK(!options.mtp_extend || model.num_mtp_modules() > 0, "decode graphs: an MTP pass without MTP modules");
  backend::Backend& backend = model.backend();
  if (!backend.capture([] {})) return;  // a backend without graphs (the CPU)
  std::vector<int> sizes = decode_graph_buckets(options.max_batch);
  for (auto size = sizes.rbegin(); size != sizes.rend(); ++size) {
    auto graph = std::make_unique<Graph>();
    graph->sequences = *size;
    pad(ForwardBatch{}, *size);
    model.prepare(padded_);
    (void)model.hidden_states(padded_, cache);  // warm-up: library plans and kernel attributes, outside capture
    capture_main(*graph);
    if (options.mtp_extend) {
      // The module's warm-up reads the hidden states the graph computes.
      DSINFER_CHECK(graph->graph->replay(), "decode graphs: a fresh capture does not replay");
      (void)model.mtp_block(0, graph->hidden, padded_, cache);
      capture_mtp(*graph);
    }
    graphs_.push_back(std::move(graph));
  }
  backend.synchronize();
  std::reverse(graphs_.begin(), graphs_.end());
  log_info("captured ", graphs_.size(), " decode graphs (batch 1 to ", options.max_batch, ", ",
           options.tokens_per_sequence, options.tokens_per_sequence == 1 ? " token" : " tokens", " a sequence",
           options.mtp_extend ? ", with the MTP pass" : "", "), ",
           static_cast<double>(backend.memory_info().graph_pool_bytes) / (1 << 20), " MiB graph pool");
}

DecodeGraphs::~DecodeGraphs() = default;

std::vector<int> DecodeGraphs::buckets() const {
  std::vector<int> sizes;
  for (const auto& graph : graphs_) sizes.push_back(graph->sequences);
  return sizes;
}

int DecodeGraphs::bucket_for(const ForwardBatch& batch) const {
  const int sequences = batch.attention.num_sequences();
  const int q = options_.tokens_per_sequence;
  if (graphs_.empty() || batch.eager || sequences == 0 || batch.num_tokens() != int64_t{sequences} * q ||
      batch.mixed() || batch.absorbed_sequences != sequences || graphs_.back()->sequences < sequences)
    return 0;
  const std::vector<int32_t>& starts = batch.attention.query_start;
  for (int b = 0; b < sequences; ++b)
    if (starts[b + 1] - starts[b] != q) return 0;
  for (const auto& graph : graphs_)
    if (graph->sequences >= sequences) return graph->sequences;
  return 0;
}

std::optional<ForwardResult> DecodeGraphs::forward(const ForwardBatch& batch, const Tensor* previous) {
  last_ = nullptr;
  const int sequences = bucket_for(batch);
  if (sequences == 0) return std::nullopt;
  auto it = std::find_if(graphs_.begin(), graphs_.end(), [&](const auto& g) { return g->sequences == sequences; });
  // The slots the graph writes are not checked by its ops on replay: check them here.
  const int64_t slots = cache_.num_pages() * cache_.page_size();
  for (int64_t slot : batch.attention.slot_mapping)
    DSINFER_CHECK(slot >= 0 && slot < slots, "decode step: cache slot ", slot, " outside the cache of ", slots);
  pad(batch, sequences);
  model_.prepare(padded_, previous);  // padding rows are token 0, never a placeholder
  Graph& graph = **it;
  if (!graph.graph->replay()) {
    // The step metadata moved (a larger step grew its device buffer): record this bucket again
    // over the new addresses. Capturing runs nothing, so the step still runs once, by the replay.
    log_info("decode graph for batch ", sequences, ": step metadata moved; capturing it again");
    capture_main(graph);
    if (graph.mtp) capture_mtp(graph);  // its recorded addresses moved with the main graph's
    DSINFER_CHECK(graph.graph->replay(), "decode graph for batch ", sequences, ": a fresh capture does not replay");
    ++recaptures_;
  }
  ++replays_;
  last_ = &graph;
  last_rows_ = batch.num_tokens();
  ForwardResult result;
  result.hidden = graph.hidden.slice(0, last_rows_);
  result.logits = model_.logits(graph.hidden, padded_);
  return result;
}

std::optional<Tensor> DecodeGraphs::logits(const ForwardBatch& batch, const Tensor* previous) {
  std::optional<ForwardResult> result = forward(batch, previous);
  if (!result) return std::nullopt;
  return result->logits;
}

std::optional<ForwardResult> DecodeGraphs::mtp_extend(const ForwardBatch& extend, const Tensor* previous) {
  Graph* graph = std::exchange(last_, nullptr);  // one pass a replayed step
  if (!graph || !graph->mtp || extend.num_tokens() != last_rows_ || bucket_for(extend) != graph->sequences)
    return std::nullopt;
  pad(extend, graph->sequences);
  model_.prepare(padded_, previous);
  if (!graph->mtp->replay()) {
    log_info("MTP graph for batch ", graph->sequences, ": step metadata moved; capturing it again");
    capture_mtp(*graph);
    DSINFER_CHECK(graph->mtp->replay(), "MTP graph for batch ", graph->sequences, ": a fresh capture does not replay");
    ++recaptures_;
  }
  return model_.mtp_head(0, graph->residual, padded_);
}

void DecodeGraphs::capture_main(Graph& graph) {
  graph.graph = model_.backend().capture([&] { graph.hidden = model_.hidden_states(padded_, cache_); });
}

void DecodeGraphs::capture_mtp(Graph& graph) {
  graph.mtp = model_.backend().capture([&] { graph.residual = model_.mtp_block(0, graph.hidden, padded_, cache_); });
}

void DecodeGraphs::pad(const ForwardBatch& batch, int sequences) {
  const int real = batch.attention.num_sequences();
  const int q = options_.tokens_per_sequence;
  const int rows = sequences * q;
  const int32_t page_size = static_cast<int32_t>(cache_.page_size());
  const int64_t scratch = int64_t{options_.scratch_page} * page_size;
  const backend::AttentionBatch& from = batch.attention;
  ForwardBatch& out = padded_;
  backend::AttentionBatch& to = out.attention;
  out.token_ids.assign(batch.token_ids.begin(), batch.token_ids.end());
  out.token_ids.resize(rows, 0);
  out.logit_rows = batch.logit_rows;  // the eager head reads the real rows only
  out.mode = AttentionMode::kAbsorbed;
  out.absorbed_sequences = sequences;
  out.absorbed_tokens = rows;
  to.page_size = page_size;
  to.query_start.resize(sequences + 1);
  for (int b = 0; b <= sequences; ++b) to.query_start[b] = b * q;
  to.context_lens.assign(from.context_lens.begin(), from.context_lens.end());
  to.context_lens.resize(sequences, q);
  to.positions.assign(from.positions.begin(), from.positions.end());
  to.slot_mapping.assign(from.slot_mapping.begin(), from.slot_mapping.end());
  for (int b = real; b < sequences; ++b)
    for (int j = 0; j < q; ++j) {
      to.positions.push_back(j);
      to.slot_mapping.push_back(scratch + j);
    }
  to.page_ids.assign(from.page_ids.begin(), from.page_ids.end());
  to.page_ids.resize(to.page_ids.size() + (sequences - real), options_.scratch_page);
  if (real == 0) {
    to.page_table_start.assign(1, 0);
  } else {
    to.page_table_start.assign(from.page_table_start.begin(), from.page_table_start.end());
  }
  for (int b = real; b < sequences; ++b) to.page_table_start.push_back(to.page_table_start.back() + 1);
}

}  // namespace dsinfer::model
