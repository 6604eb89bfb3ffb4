#include "model/deepseek_model.h"

#include <algorithm>

#include "core/log.h"

#include "model/rope_table.h"

namespace dsinfer::model {

DeepseekModel::DeepseekModel(io::ModelConfig config, const io::Checkpoint* checkpoint, backend::Backend& backend,
                             const ModelOptions& options)
    : config_(std::move(config)),
      backend_(backend),
      plan_(options.plan ? *options.plan : parallel::RankPlan{}),
      cache_format_(options.cache_format) {
  plan_.place.config.check_fits(config_);
  DSINFER_CHECK(backend_.supports_cache_dtype(cache_dtype()), "--kv-cache-dtype ", cache_format_name(cache_format_),
                ": the ", backend_.name(), " backend has no such KV cache; its FP8 cache is --kv-cache-dtype fp8 "
                "(e4m3 rows, FP8 MLA decode), and the CPU backend has every format");
  DSINFER_CHECK(cache_format_ != CacheFormat::kFp8DsMla ||
                    (config_.qk_rope_head_dim == backend::kDsMlaRope && config_.kv_lora_rank % backend::kDsMlaTile == 0),
                "--kv-cache-dtype fp8_ds_mla stores DeepSeek V3.2's rows: a latent of a multiple of 128 and a rope key "
                "of 64; this model has ", config_.kv_lora_rank, " and ", config_.qk_rope_head_dim);
  WeightLoader weights = checkpoint ? WeightLoader(*checkpoint, config_, backend_, options.plan)
                                    : WeightLoader(config_, io::stored_format(config_), backend_, options.plan);
  DSINFER_CHECK(!config_.attention_bias, weights.source(), ": attention_bias is not supported");
  weights.set_expert_observer(options.expert_observer);
  int64_t positions = options.max_positions > 0 ? options.max_positions : config_.max_position_embeddings;
  rope_ = make_rope_table(config_, positions);
  rope_.cos = backend_.to_device(rope_.cos);
  rope_.sin = backend_.to_device(rope_.sin);

  weights.expect_shape("model.embed_tokens.weight", {config_.vocab_size, config_.hidden_size});
  embed_ = weights.linear("model.embed_tokens.weight");
  DSINFER_CHECK(embed_.format == backend::WeightFormat::kDense, weights.source(),
                ": model.embed_tokens.weight must be stored as bf16 or f32");
  norm_ = weights.f32("model.norm.weight");
  if (weights.contains("lm_head.weight")) {
    weights.expect_shape("lm_head.weight", {config_.vocab_size, config_.hidden_size});
    lm_head_ = weights.linear("lm_head.weight");
  } else {
    DSINFER_CHECK(config_.tie_word_embeddings, weights.source(), ": tensor lm_head.weight is missing");
    lm_head_ = embed_;
  }
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i)
    layers_.push_back(std::make_unique<DecoderLayer>(weights, i));
  if (options.load_mtp) {
    for (int64_t k = 0; k < config_.num_nextn_predict_layers; ++k)
      mtp_.push_back(std::make_unique<MtpModule>(weights, config_.num_hidden_layers + k, embed_, lm_head_));
  }
  backend_.synchronize();
  double seconds = weights.seconds();
  log_info("loaded ", weights.source(), plan_.sharded() ? str_cat(" (rank ", plan_.place.rank, " of ",
           plan_.place.config.describe(), ")") : std::string(), ": ", static_cast<double>(weights.loaded_bytes()) / 1e9, " GB on ",
           backend_.name(), " in ", seconds, " s (", static_cast<double>(weights.loaded_bytes()) / 1e9 / seconds,
           " GB/s)");
}

std::unique_ptr<DeepseekModel> DeepseekModel::load(const std::string& dir, backend::Backend& backend,
                                                   const ModelOptions& options) {
  io::ModelConfig config = io::load_model_config(dir);
  DSINFER_CHECK(options.dummy_int4_group_size >= 0, "dummy_int4_group_size must be >= 0, not ",
                options.dummy_int4_group_size);
  if (options.dummy_int4_group_size > 0) {
    DSINFER_CHECK(options.load_format == LoadFormat::kDummy, "int4 routed experts in place of the stored ones are "
                  "made only for dummy weights (a W4A8 checkpoint says so itself: dsinfer quantize --method w4a8)");
    config.quantization.int4_group_size = options.dummy_int4_group_size;
  }
  ModelOptions effective = options;
  if (options.num_layers > 0 && options.num_layers != config.num_hidden_layers) {
    config = io::truncate_layers(config, options.num_layers);
    // A real checkpoint stores MTP module k at the full layer count + k; layer N is a plain layer.
    if (options.load_format != LoadFormat::kDummy) effective.load_mtp = false;
  }
  std::unique_ptr<DeepseekModel> model;
  if (options.load_format == LoadFormat::kDummy) {
    model = std::make_unique<DeepseekModel>(std::move(config), nullptr, backend, effective);
  } else {
    io::Checkpoint checkpoint = io::Checkpoint::open(dir);
    model = std::make_unique<DeepseekModel>(std::move(config), &checkpoint, backend, effective);
  }
  model->source_dir_ = dir;
  model->load_format_ = options.load_format;
  return model;
}

void DeepseekModel::place_experts(const std::vector<parallel::ExpertPlacement>& placements) {
  DSINFER_CHECK(!source_dir_.empty(), "place_experts: the model was not made by DeepseekModel::load");
  parallel::RankPlan plan = plan_;
  plan.placements = &placements;
  auto place = [&](const WeightLoader& weights) {
    for (size_t i = 0; i < layers_.size(); ++i)
      if (Moe* moe = layers_[i]->ffn().moe()) moe->place_experts(weights, plan.placement(static_cast<int64_t>(i)));
    backend_.synchronize();
  };
  if (load_format_ == LoadFormat::kDummy) {
    place(WeightLoader(config_, io::stored_format(config_), backend_, &plan));
  } else {
    io::Checkpoint checkpoint = io::Checkpoint::open(source_dir_);
    place(WeightLoader(checkpoint, config_, backend_, &plan));
  }
}

DType DeepseekModel::cache_dtype() const {
  switch (cache_format_) {
    case CacheFormat::kFp8:
      return DType::kF8E4M3;
    case CacheFormat::kFp8DsMla:
      return DType::kU8;
    default:
      return backend_.compute_dtype();
  }
}

int64_t DeepseekModel::cache_row() const {
  return cache_format_ == CacheFormat::kFp8DsMla ? backend::ds_mla_row_bytes(config_.kv_lora_rank) : cache_width();
}

LatentCache DeepseekModel::make_cache(int64_t pages) const {
  return LatentCache(backend_, num_cache_layers(), pages, cache_row(), cache_dtype());
}

void DeepseekModel::validate(const ForwardBatch& batch, int64_t previous_rows) const {
  for (int32_t id : batch.token_ids) {
    if (id < 0 && -static_cast<int64_t>(id) <= previous_rows) continue;  // a placeholder for a sampled token
    DSINFER_CHECK(id >= 0 && id < config_.vocab_size, "token id ", id, " is outside the vocabulary of ",
                  config_.vocab_size, previous_rows > 0 ? str_cat(" and names no row of the previous step's ",
                                                                  previous_rows, " tokens")
                                                        : std::string());
  }
  for (int32_t position : batch.attention.positions)
    DSINFER_CHECK(position < max_positions(), "position ", position, " exceeds the model's ", max_positions(),
                  " positions");
}

ForwardResult DeepseekModel::forward(const ForwardBatch& batch, LatentCache& cache) const {
  ForwardResult result = forward_on_device(batch, cache);
  result.logits = backend_.to_host(result.logits);
  return result;
}

ForwardResult DeepseekModel::forward_on_device(const ForwardBatch& batch, LatentCache& cache,
                                                const Tensor* previous) const {
  prepare(batch, previous);
  ForwardResult result;
  result.hidden = hidden_states(batch, cache);
  result.logits = logits(result.hidden, batch);
  return result;
}

void DeepseekModel::prepare(const ForwardBatch& batch, const Tensor* previous) const {
  const bool placeholders =
      previous && std::any_of(batch.token_ids.begin(), batch.token_ids.end(), [](int32_t id) { return id < 0; });
  DSINFER_CHECK(!placeholders || backend_.device() != Device::kCpu,
                "a batch with placeholder tokens runs on a device backend only (CPU steps are not overlapped)");
  validate(batch, placeholders ? previous->numel() : 0);
  backend_.begin_step(batch.step_context());
  if (placeholders) {
    Tensor ids = step_token_ids(backend_, batch);  // the uploaded copy, rewritten in place
    backend_.resolve_placeholders(ids, *previous);
  }
}

Tensor DeepseekModel::hidden_states(const ForwardBatch& batch, LatentCache& cache) const {
  Tensor residual = backend_.embedding(embed_.data, step_token_ids(backend_, batch));  // [T, hidden]
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->forward(residual, batch, cache.layer(i), rope_);
    if (batch.after_layer) batch.after_layer(static_cast<int64_t>(i));
  }
  return backend_.rms_norm(residual, norm_, static_cast<float>(config_.rms_norm_eps));  // [T, hidden]
}

Tensor DeepseekModel::logits(const Tensor& hidden, const ForwardBatch& batch) const {
  return head_logits(backend_, hidden, batch, lm_head_);
}

Tensor DeepseekModel::row_logits(const Tensor& hidden, const std::vector<int32_t>& rows) const {
  return backend_.linear_f32(backend_.gather_rows(hidden, rows), lm_head_);
}

Tensor DeepseekModel::expert_load() const {
  std::vector<const Moe*> layers;
  for (const auto& layer : layers_)
    if (const Moe* moe = layer->ffn().moe()) layers.push_back(moe);
  DSINFER_CHECK(!layers.empty() && layers.front()->expert_load().defined(),
                "expert_load: the model counts no expert loads (RankPlan::count_expert_load)");
  const int64_t E = config_.n_routed_experts;
  Tensor out = Tensor::empty(DType::kI64, {static_cast<int64_t>(layers.size()), E});
  for (size_t i = 0; i < layers.size(); ++i) {
    Tensor host = backend_.to_host(layers[i]->expert_load());
    std::copy_n(host.data<int64_t>(), E, out.data<int64_t>() + i * E);
  }
  return out;
}

ForwardResult DeepseekModel::forward_mtp(int module, const Tensor& previous_hidden, const ForwardBatch& batch,
                                         LatentCache& cache) const {
  ForwardResult result = forward_mtp_on_device(module, previous_hidden, batch, cache);
  result.logits = backend_.to_host(result.logits);
  return result;
}

ForwardResult DeepseekModel::forward_mtp_on_device(int module, const Tensor& previous_hidden,
                                                   const ForwardBatch& batch, LatentCache& cache,
                                                   const Tensor* previous_tokens) const {
  DSINFER_CHECK(module >= 0 && module < num_mtp_modules(), "MTP module ", module, " is not loaded (",
                num_mtp_modules(), " present)");
  prepare(batch, previous_tokens);
  return mtp_head(module, mtp_block(module, previous_hidden, batch, cache), batch);
}

Tensor DeepseekModel::mtp_block(int module, const Tensor& previous_hidden, const ForwardBatch& batch,
                                LatentCache& cache) const {
  DSINFER_CHECK(module >= 0 && module < num_mtp_modules(), "MTP module ", module, " is not loaded (",
                num_mtp_modules(), " present)");
  return mtp_[module]->block(previous_hidden, batch, cache.layer(config_.num_hidden_layers + module), rope_);
}

ForwardResult DeepseekModel::mtp_head(int module, const Tensor& residual, const ForwardBatch& batch) const {
  DSINFER_CHECK(module >= 0 && module < num_mtp_modules(), "MTP module ", module, " is not loaded (",
                num_mtp_modules(), " present)");
  return mtp_[module]->head(residual, batch);
}

}  // namespace dsinfer::model
