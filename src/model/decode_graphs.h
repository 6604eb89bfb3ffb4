// CUDA graphs for decode steps (DESIGN.md, "The device step"): the layers of a decode step are
// recorded once per batch-size bucket and replayed, so the host launches one graph instead of every
// kernel of every layer.
//
// A decode step of B sequences (each adds one token, attending in the absorbed form) runs as the
// graph of the smallest bucket Bp >= B. The batch is padded to Bp rows: padding rows are token 0 at
// position 0 with a one-token context in a scratch page that no sequence owns, so they write their
// latent there and read nothing else. The graph computes the final hidden states of all Bp rows; the
// head then runs eagerly on the real logit rows only (so no graph keeps a [Bp, vocab] output alive).
// What the graph reads per step is the metadata begin_step uploads, which lands at the same device
// addresses for every step of a bucket (StepGraph::replay checks; when a larger step has moved the
// metadata, the bucket is captured again). Mixed and prefill steps, and decode batches above the
// largest bucket, run eagerly.
//
// Speculative decoding (runtime/speculative.h) verifies N draft tokens a sequence in a step of
// 1 + N rows each: a second set of graphs, with tokens_per_sequence = 1 + N, takes those steps (a
// padding sequence then has 1 + N rows at positions 0..N of the scratch page). With mtp_extend each
// of its buckets also records MTP module 0's block over the same rows, reading the step's final
// hidden states where the bucket's graph left them: the drafter's pass over the step
// (runtime/mtp_drafter.h), whose head, like the model's, runs eagerly over the real rows.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "model/deepseek_model.h"

namespace dsinfer::model {

struct DecodeGraphOptions {
  int max_batch = 256;          // the largest bucket (SGLang's --cuda-graph-max-bs); 0: no graphs
  int32_t scratch_page = -1;    // a page of `cache` that no sequence owns: the padding rows' slot
  int tokens_per_sequence = 1;  // rows each sequence adds: 1 (decode) up to kMaxAbsorbedQueryLen
  bool mtp_extend = false;      // also record MTP module 0's block over each bucket's rows
};

// The bucket sizes up to max_batch: 1, 2, 4, 8, then every 8 up to 64, every 16 up to 256, every
// 32 beyond, and max_batch itself.
std::vector<int> decode_graph_buckets(int max_batch);

class DecodeGraphs {
 public:
  // Captures one graph per bucket, largest first, each after one eager warm-up run of the same
  // padded step (its writes go to the scratch page). Captures nothing when the backend has no graphs.
  DecodeGraphs(const DeepseekModel& model, LatentCache& cache, const DecodeGraphOptions& options);
  ~DecodeGraphs();

  bool empty() const { return graphs_.empty(); }
  std::vector<int> buckets() const;
  // The bucket (in sequences) that runs `batch`, whose every sequence must add tokens_per_sequence
  // rows (0: none; the step runs eagerly).
  int bucket_for(const ForwardBatch& batch) const;
  // forward_on_device(batch, previous) by replaying its bucket's graph, or nothing when no bucket
  // takes the step: then run it eagerly. `previous` as DeepseekModel::prepare takes it (the
  // placeholders are resolved in the uploaded ids, before the replay reads them). The hidden states
  // are the graph's [T, hidden] (the batch's T rows), rewritten by the bucket's next replay.
  std::optional<ForwardResult> forward(const ForwardBatch& batch, const Tensor* previous = nullptr);
  std::optional<Tensor> logits(const ForwardBatch& batch, const Tensor* previous = nullptr);
  // With mtp_extend: DeepseekModel::forward_mtp_on_device(0, hidden, extend, cache, previous) for the step
  // forward() replayed last, whose rows `extend` has (each with the token that follows it, and the
  // drafter's logit rows), by replaying the bucket's MTP graph; nothing when forward() did not replay
  // that step (then run this eagerly too). Its hidden states and residual have the bucket's padding
  // rows after the real ones.
  std::optional<ForwardResult> mtp_extend(const ForwardBatch& extend, const Tensor* previous = nullptr);
  int64_t replays() const { return replays_; }  // steps run by a graph so far
  int64_t recaptures() const { return recaptures_; }  // buckets captured again since construction

 private:
  struct Graph;
  // Fills padded_ with `batch` (empty: padding only) padded to `sequences` of tokens_per_sequence rows.
  void pad(const ForwardBatch& batch, int sequences);
  // Records the bucket's main graph, or its MTP block (reading graph.hidden), over padded_.
  void capture_main(Graph& graph);
  void capture_mtp(Graph& graph);

  const DeepseekModel& model_;
  LatentCache& cache_;
  DecodeGraphOptions options_;
  ForwardBatch padded_;  // the step being replayed (begin_step reads its arrays until the next step)
  std::vector<std::unique_ptr<Graph>> graphs_;  // ascending bucket size
  Graph* last_ = nullptr;  // the graph forward() replayed last, for mtp_extend
  int64_t last_rows_ = 0;  // and its step's real rows
  int64_t replays_ = 0;
  int64_t recaptures_ = 0;
};

}  // namespace dsinfer::model
