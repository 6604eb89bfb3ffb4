// config.json of a DeepSeek V2/V3-architecture checkpoint, typed and validated.
//
// Accepts model_type deepseek_v3, deepseek_v2 and kimi_k2 (the V3 architecture). Both spellings of
// the RoPE settings are read: the published `rope_theta` + `rope_scaling` and transformers v5's
// `rope_parameters`. Errors name the field: "config.json: kv_lora_rank is missing".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"

namespace dsinfer::io {

enum class ModelFamily : uint8_t { kDeepseekV2, kDeepseekV3 };
enum class ScoringFunc : uint8_t { kSoftmax, kSigmoid };
// greedy: top-k of all scores; group_limited_greedy (V2): keep the topk_group groups with the best
// single score; noaux_tc (V3): biased scores, groups ranked by the sum of their best two.
enum class TopkMethod : uint8_t { kGreedy, kGroupLimitedGreedy, kNoauxTc };

struct RopeConfig {
  double theta = 10000.0;
  std::string type = "default";  // "default" or "yarn"
  // YaRN (type == "yarn").
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;          // 0: absent
  double mscale_all_dim = 0.0;  // 0: absent
  std::optional<double> attention_factor;  // explicit cos/sin scale; else derived from factor/mscale
  bool truncate = true;
};

struct QuantizationConfig {
  bool fp8_block = false;  // quant_method "fp8", fmt "e4m3": weights carry NAME.weight_scale_inv
  int64_t block_n = 128;   // weight_block_size[0]: rows (output features) per scale
  int64_t block_k = 128;   // weight_block_size[1]: columns (input features) per scale
  std::string activation_scheme = "dynamic";
  // quant_method "compressed-tensors", format "pack-quantized" (docs/w4a8.md): the linears that store
  // NAME.weight_packed are symmetric int4 in groups of this many columns; 0: none.
  int64_t int4_group_size = 0;
};

struct ModelConfig {
  std::string model_type;  // as written in config.json
  ModelFamily family = ModelFamily::kDeepseekV3;

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // dense MLP layers
  int64_t num_hidden_layers = 0;
  int64_t num_nextn_predict_layers = 0;  // MTP modules stored at layer num_hidden_layers + k
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  double rms_norm_eps = 1e-6;
  int64_t max_position_embeddings = 4096;
  bool tie_word_embeddings = false;
  bool attention_bias = false;

  // MLA.
  int64_t q_lora_rank = 0;  // 0: no low-rank query (V2-Lite: q_proj instead of q_a/q_b)
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool rope_interleave = true;
  RopeConfig rope;

  // MoE. n_routed_experts == 0 means a dense model.
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool norm_topk_prob = false;
  double routed_scaling_factor = 1.0;
  ScoringFunc scoring_func = ScoringFunc::kSigmoid;
  TopkMethod topk_method = TopkMethod::kNoauxTc;

  QuantizationConfig quantization;

  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // config.json's eos_token_id (an int or a list)

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  bool is_moe_layer(int64_t layer) const;  // MoE for layers >= first_k_dense_replace (every moe_layer_freq)
  // The attention softmax scale: qk_head_dim^-0.5, times mscale(factor, mscale_all_dim)^2 under YaRN.
  double softmax_scale() const;
};

// Parses and validates; `source` names the file in errors ("DIR/config.json").
ModelConfig parse_model_config(const Json& json, std::string_view source);
// Reads DIR/config.json.
ModelConfig load_model_config(const std::string& dir);

// `--num-layers N`: `config` cut to its first N decoder layers, to run the start of a model too big
// for one device. Only num_hidden_layers changes, so every kept layer keeps its kind (dense below
// first_k_dense_replace, then MoE every moe_layer_freq: DeepSeek-V3 with N = 4 has layers 0-2 dense
// and layer 3 MoE) and the MTP modules stay (num_nextn_predict_layers unchanged). The MTP module k
// then sits at layer index N + k, while a checkpoint of the full model stores it at the original
// num_hidden_layers + k: a loader of real weights must read "model.layers.<full + k>.*" for
// "model.layers.<N + k>.*". Throws dsinfer::Error unless 1 <= num_layers <= config.num_hidden_layers.
ModelConfig truncate_layers(const ModelConfig& config, int64_t num_layers);

}  // namespace dsinfer::io
