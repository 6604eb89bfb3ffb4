// DeepseekModel: the whole DeepSeek V2/V3 network built from config.json and a checkpoint.
//
//   x = embed_tokens(ids)                                    [T, hidden]
//   for each layer: x = DecoderLayer(x)                      (first_k_dense_replace dense, then MoE)
//   hidden = norm(x)                                          [T, hidden]
//   logits = lm_head(hidden[logit_rows])                      [rows, vocab]
// plus num_nextn_predict_layers MTP modules.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "model/expert_observer.h"
#include "model/kv_cache.h"
#include "model/mtp.h"

namespace dsinfer::model {

enum class LoadFormat : uint8_t { kAuto, kDummy };

struct ModelOptions {
  bool load_mtp = true;
  int64_t max_positions = 0;  // rotary table length; 0: the config's max_position_embeddings
  // kDummy: random weights of the config's published layout, made on the device (no checkpoint).
  LoadFormat load_format = LoadFormat::kAuto;
  // Keep only the first N decoder layers (the real widths of a model too big for one GPU); 0: all.
  // With a real checkpoint the MTP modules are then not loaded (their layer index moved).
  int64_t num_layers = 0;
  // The rank this model is one shard of (parallel/rank_plan.h), with the groups it sums over; null:
  // the whole model on one rank. Must outlive the model.
  const parallel::RankPlan* plan = nullptr;
  // How the latent cache stores its rows (--kv-cache-dtype); the backend must support it.
  CacheFormat cache_format = CacheFormat::kCompute;
  // Dummy weights only: routed experts as int4 (W4A8) in groups of this many columns, with AWQ
  // factors on their inputs, as `dsinfer quantize --method w4a8 --awq` writes them; 0: in the
  // config's stored format (docs/w4a8.md).
  int64_t dummy_int4_group_size = 0;
  // Sees every MoE layer's routed-expert inputs (dsinfer quantize --awq's calibration); null: none.
  // Must outlive the model.
  ExpertObserver* expert_observer = nullptr;
};

class DeepseekModel {
 public:
  // checkpoint: null for dummy weights.
  DeepseekModel(io::ModelConfig config, const io::Checkpoint* checkpoint, backend::Backend& backend,
                const ModelOptions& options = {});
  // Reads DIR/config.json and the checkpoint in DIR (only config.json with LoadFormat::kDummy).
  static std::unique_ptr<DeepseekModel> load(const std::string& dir, backend::Backend& backend,
                                             const ModelOptions& options = {});

  const io::ModelConfig& config() const { return config_; }
  backend::Backend& backend() const { return backend_; }
  // Where this rank sits (the whole model on one rank unless ModelOptions::plan said otherwise).
  const parallel::RankPlace& place() const { return plan_.place; }
  int64_t max_positions() const { return rope_.cos.dim(0); }
  int num_mtp_modules() const { return static_cast<int>(mtp_.size()); }
  // Cache layers: one per decoder layer, then one per MTP module.
  int64_t num_cache_layers() const { return config_.num_hidden_layers + num_mtp_modules(); }
  // A cached row's values (the latent, then the rope key), and how they are stored: the cache
  // tensor's dtype and its row's elements of it (backend/cache_layout.h).
  int64_t cache_width() const { return config_.kv_lora_rank + config_.qk_rope_head_dim; }
  CacheFormat cache_format() const { return cache_format_; }
  DType cache_dtype() const;
  int64_t cache_row() const;
  // Bytes of one KV page over every cache layer: what the page pool is sized by.
  int64_t page_bytes() const {
    return num_cache_layers() * kPageSize * cache_row() * static_cast<int64_t>(dtype_size(cache_dtype()));
  }
  LatentCache make_cache(int64_t pages) const;

  // One forward pass; the logits come back to the host (tests, tools).
  ForwardResult forward(const ForwardBatch& batch, LatentCache& cache) const;
  // The same with the logits left on the device, for the device-side sampler (the engine's path).
  // `previous`: the tokens sampled by the step launched just before (PendingTokens::device_tokens),
  // which the placeholders -(r + 1) among batch.token_ids stand for (the overlap scheduler's inputs);
  // null when the batch has none. Placeholders need a device backend: a CPU batch is never rewritten.
  ForwardResult forward_on_device(const ForwardBatch& batch, LatentCache& cache,
                                  const Tensor* previous = nullptr) const;
  // forward_on_device in its three parts, for CUDA graphs (model/decode_graphs.h), which record the
  // middle one: prepare validates the batch, uploads its metadata (Backend::begin_step) and resolves
  // its placeholders in the uploaded ids; hidden_states queues the embedding, the layers and the
  // final norm -> [T, hidden]; logits queues the head over hidden[batch.logit_rows] -> [rows, vocab] f32.
  void prepare(const ForwardBatch& batch, const Tensor* previous = nullptr) const;
  Tensor hidden_states(const ForwardBatch& batch, LatentCache& cache) const;
  Tensor logits(const Tensor& hidden, const ForwardBatch& batch) const;
  // The head over any rows of hidden -> [rows, vocab] f32 on the device: the rows of a step that
  // are scored, not sampled (ForwardBatch::scored_rows), a slice at a time.
  Tensor row_logits(const Tensor& hidden, const std::vector<int32_t>& rows) const;
  // EPLB's input: each MoE decoder layer's router choices per logical expert over every step so far,
  // [MoE layers, E] int64 on the host (the rank plan must count them: RankPlan::count_expert_load).
  Tensor expert_load() const;
  // EPLB's rebalancing: every MoE decoder layer's routed experts placed anew (placements by layer
  // index, as RankPlan::placements), this rank's loaded again from where the model's weights came
  // from (the checkpoint directory load() read, or dummy weights). Between steps, on the thread that
  // runs the model; throws for a model not made by load().
  void place_experts(const std::vector<parallel::ExpertPlacement>& placements);
  // MTP module `module` (0-based): MtpModule::block then head. The logits come back to the host.
  ForwardResult forward_mtp(int module, const Tensor& previous_hidden, const ForwardBatch& batch,
                            LatentCache& cache) const;
  // The same with the logits left on the device (the drafter's path: runtime/mtp_drafter.h), its
  // placeholders resolved from previous_tokens as prepare does.
  ForwardResult forward_mtp_on_device(int module, const Tensor& previous_hidden, const ForwardBatch& batch,
                                      LatentCache& cache, const Tensor* previous_tokens = nullptr) const;
  // Its two halves after a begin_step of `batch` (MtpModule::block and head): the block is what a
  // CUDA graph of the drafter's pass over a verification step records, the head runs eagerly over the
  // real logit rows (model/decode_graphs.h).
  Tensor mtp_block(int module, const Tensor& previous_hidden, const ForwardBatch& batch, LatentCache& cache) const;
  ForwardResult mtp_head(int module, const Tensor& residual, const ForwardBatch& batch) const;

 private:
  // Placeholders may name rows of a previous step of previous_rows tokens (0: none allowed).
  void validate(const ForwardBatch& batch, int64_t previous_rows = 0) const;

  io::ModelConfig config_;
  backend::Backend& backend_;
  parallel::RankPlan plan_;  // the plan the model was loaded with (its place and groups)
  std::string source_dir_;   // the directory load() read, for place_experts; empty otherwise
  LoadFormat load_format_ = LoadFormat::kAuto;
  backend::RopeTable rope_;
  backend::LinearWeight embed_, lm_head_;
  Tensor norm_;
  std::vector<std::unique_ptr<DecoderLayer>> layers_;
  std::vector<std::unique_ptr<MtpModule>> mtp_;
  CacheFormat cache_format_ = CacheFormat::kCompute;
};

}  // namespace dsinfer::model
