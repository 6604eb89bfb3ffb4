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
#include "model/kv_cache.h"
#include "model/mtp.h"

namespace dsinfer::model {

struct ModelOptions {
  bool load_mtp = true;
  int64_t max_positions = 0;  // rotary table length; 0: the config's max_position_embeddings
};

class DeepseekModel {
 public:
  DeepseekModel(io::ModelConfig config, const io::Checkpoint& checkpoint, backend::Backend& backend,
                const ModelOptions& options = {});
  // Reads DIR/config.json and the checkpoint in DIR.
  static std::unique_ptr<DeepseekModel> load(const std::string& dir, backend::Backend& backend,
                                             const ModelOptions& options = {});

  const io::ModelConfig& config() const { return config_; }
  backend::Backend& backend() const { return backend_; }
  int64_t max_positions() const { return rope_.cos.dim(0); }
  int num_mtp_modules() const { return static_cast<int>(mtp_.size()); }
  // Cache layers: one per decoder layer, then one per MTP module.
  int64_t num_cache_layers() const { return config_.num_hidden_layers + num_mtp_modules(); }
  int64_t cache_width() const { return config_.kv_lora_rank + config_.qk_rope_head_dim; }
  LatentCache make_cache(int64_t pages) const;

  ForwardResult forward(const ForwardBatch& batch, LatentCache& cache) const;
  // MTP module `module` (0-based); see MtpModule::forward.
  ForwardResult forward_mtp(int module, const Tensor& previous_hidden, const ForwardBatch& batch,
                            LatentCache& cache) const;

 private:
  void validate(const ForwardBatch& batch) const;

  io::ModelConfig config_;
  backend::Backend& backend_;
  backend::RopeTable rope_;
  backend::LinearWeight embed_, lm_head_;
  Tensor norm_;
  std::vector<std::unique_ptr<DecoderLayer>> layers_;
  std::vector<std::unique_ptr<MtpModule>> mtp_;
};

}  // namespace dsinfer::model
