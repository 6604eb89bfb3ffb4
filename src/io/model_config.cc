// config.json read into ModelConfig: every field typed and range-checked, family defaults applied,
// and the MoE and attention settings checked against each other.
#include "io/model_config.h"

#include <cmath>
#include <initializer_list>
#include <utility>

#include "core/error.h"
#include "core/file.h"

namespace dsinfer::io {
namespace {

// A JSON value as it appears in a message, cut to a line.
std::string brief(const Json& value) {
  std::string text = value.dump();
  return text.size() > 80 ? text.substr(0, 80) + "..." : text;
}

// Typed access to the members of one JSON object of config.json. A member that is absent or null
// takes its default (Hugging Face writes null for "not set"). Errors name the field by its path:
// "DIR/config.json: rope_scaling.factor must be a positive number, got \"40\"".
class Fields {
 public:
  Fields(const Json& object, std::string_view source, std::string prefix = "")
      : object_(object), source_(source), prefix_(std::move(prefix)) {}

  const Json* get(std::string_view key) const {
    const Json* value = object_.find(key);
    return value != nullptr && !value->is_null() ? value : nullptr;
  }
  bool has(std::string_view key) const { return get(key) != nullptr; }

  // Throws "SOURCE: PREFIX.KEY <problem>".
  template <typename... Args>
  [[noreturn]] void fail(std::string_view key, Args&&... problem) const {
    throw Error(str_cat(source_, ": ", prefix_, key, " ", std::forward<Args>(problem)...));
  }

  // The nested object at key; nullopt when absent or null.
  std::optional<Fields> object(std::string_view key) const {
    const Json* value = get(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_object()) fail(key, "must be an object, got ", brief(*value));
    return Fields(*value, source_, str_cat(prefix_, key, "."));
  }

  int64_t required_int(std::string_view key, int64_t min) const {
    if (!has(key)) fail(key, "is missing");
    return integer(key, 0, min);
  }

  // min: 0 (counts, ranks that may be absent) or 1 (sizes).
  int64_t integer(std::string_view key, int64_t fallback, int64_t min = 0) const {
    const Json* value = get(key);
    if (value == nullptr) return fallback;
    if (!value->is_int() || value->as_int() < min) {
      fail(key, "must be ", min > 0 ? "a positive integer" : "a non-negative integer", ", got ", brief(*value));
    }
    return value->as_int();
  }

  double positive_number(std::string_view key, double fallback) const {
    double value = number(key, fallback);
    if (value <= 0) fail(key, "must be a positive number, got ", brief(*get(key)));
    return value;
  }

  double non_negative_number(std::string_view key, double fallback) const {
    double value = number(key, fallback);
    if (value < 0) fail(key, "must be a non-negative number, got ", brief(*get(key)));
    return value;
  }

  bool boolean(std::string_view key, bool fallback) const {
    const Json* value = get(key);
    if (value == nullptr) return fallback;
    if (!value->is_bool()) fail(key, "must be true or false, got ", brief(*value));
    return value->as_bool();
  }

  std::string string(std::string_view key, std::string fallback) const {
    const Json* value = get(key);
    if (value == nullptr) return fallback;
    if (!value->is_string()) fail(key, "must be a string, got ", brief(*value));
    return value->as_string();
  }

  // One of a fixed set of spellings, mapped to its value: "scoring_func 'tanh' is not supported
  // (expected softmax or sigmoid)".
  template <typename T>
  T choice(std::string_view key, T fallback,
           std::initializer_list<std::pair<std::string_view, T>> options) const {
    if (!has(key)) return fallback;
    std::string spelling = string(key, "");
    std::string expected;  // "a, b or c"
    size_t listed = 0;
    for (const auto& [name, value] : options) {
      if (name == spelling) return value;
      expected += str_cat(listed == 0 ? "" : listed + 1 == options.size() ? " or " : ", ", name);
      ++listed;
    }
    fail(key, "'", spelling, "' is not supported (expected ", expected, ")");
  }

 private:
  double number(std::string_view key, double fallback) const {
    const Json* value = get(key);
    if (value == nullptr) return fallback;
    if (!value->is_number() || !std::isfinite(value->as_double()))
      fail(key, "must be a number, got ", brief(*value));
    return value->as_double();
  }

  const Json& object_;
  std::string_view source_;
  std::string prefix_;
};

void read_dimensions(const Fields& fields, ModelConfig& config) {
  config.vocab_size = fields.required_int("vocab_size", 1);
  config.hidden_size = fields.required_int("hidden_size", 1);
  config.intermediate_size = fields.required_int("intermediate_size", 1);
  config.num_hidden_layers = fields.required_int("num_hidden_layers", 1);
  // transformers names the MTP layer count num_mtp_layers; the published configs num_nextn_predict_layers.
  bool mtp_spelling = !fields.has("num_nextn_predict_layers") && fields.has("num_mtp_layers");
  config.num_nextn_predict_layers =
      fields.integer(mtp_spelling ? "num_mtp_layers" : "num_nextn_predict_layers", 0);
  config.num_attention_heads = fields.required_int("num_attention_heads", 1);
  config.num_key_value_heads = fields.integer("num_key_value_heads", config.num_attention_heads, 1);
  config.rms_norm_eps = fields.positive_number("rms_norm_eps", 1e-6);
  config.max_position_embeddings =
      fields.integer("max_position_embeddings", config.max_position_embeddings, 1);
  config.tie_word_embeddings = fields.boolean("tie_word_embeddings", false);
  config.attention_bias = fields.boolean("attention_bias", false);
  fields.choice("hidden_act", 0, {{"silu", 0}});  // the only activation the model implements
}

void read_attention(const Fields& fields, ModelConfig& config) {
  config.q_lora_rank = fields.integer("q_lora_rank", 0);
  config.kv_lora_rank = fields.required_int("kv_lora_rank", 1);
  config.qk_nope_head_dim = fields.required_int("qk_nope_head_dim", 1);
  config.qk_rope_head_dim = fields.required_int("qk_rope_head_dim", 1);
  config.v_head_dim = fields.required_int("v_head_dim", 1);
  config.rope_interleave = fields.boolean("rope_interleave", true);
}

void read_moe(const Fields& fields, ModelConfig& config) {
  bool v3 = config.family == ModelFamily::kDeepseekV3;
  config.n_routed_experts = fields.integer("n_routed_experts", 0);
  bool moe = config.n_routed_experts > 0;
  config.num_experts_per_tok =
      moe ? fields.required_int("num_experts_per_tok", 1) : fields.integer("num_experts_per_tok", 0);
  config.moe_intermediate_size =
      moe ? fields.required_int("moe_intermediate_size", 1) : fields.integer("moe_intermediate_size", 0);
  config.n_shared_experts = fields.integer("n_shared_experts", 0);
  config.first_k_dense_replace = fields.integer("first_k_dense_replace", 0);
  config.moe_layer_freq = fields.integer("moe_layer_freq", 1, 1);
  config.n_group = fields.integer("n_group", 1, 1);
  config.topk_group = fields.integer("topk_group", 1, 1);
  config.norm_topk_prob = fields.boolean("norm_topk_prob", v3);
  config.routed_scaling_factor = fields.positive_number("routed_scaling_factor", 1.0);
  config.scoring_func =
      fields.choice("scoring_func", v3 ? ScoringFunc::kSigmoid : ScoringFunc::kSoftmax,
                    {{"softmax", ScoringFunc::kSoftmax}, {"sigmoid", ScoringFunc::kSigmoid}});
  config.topk_method = fields.choice("topk_method", v3 ? TopkMethod::kNoauxTc : TopkMethod::kGreedy,
                                     {{"greedy", TopkMethod::kGreedy},
                                      {"group_limited_greedy", TopkMethod::kGroupLimitedGreedy},
                                      {"noaux_tc", TopkMethod::kNoauxTc}});
}

// The keys shared by rope_scaling and rope_parameters; `fields` is one of them.
RopeConfig read_rope_keys(const Fields& fields, double theta, int64_t max_position_embeddings) {
  RopeConfig rope;
  rope.theta = theta;
  std::string_view type_key = fields.has("rope_type") ? "rope_type" : "type";
  rope.type = fields.choice<std::string>(type_key, "default", {{"default", "default"}, {"yarn", "yarn"}});
  if (rope.type != "yarn") return rope;  // the other keys only mean something under YaRN
  rope.factor = fields.positive_number("factor", 1.0);
  rope.original_max_position_embeddings =
      fields.integer("original_max_position_embeddings", max_position_embeddings, 1);
  rope.beta_fast = fields.positive_number("beta_fast", rope.beta_fast);
  rope.beta_slow = fields.positive_number("beta_slow", rope.beta_slow);
  rope.mscale = fields.non_negative_number("mscale", 0.0);
  rope.mscale_all_dim = fields.non_negative_number("mscale_all_dim", 0.0);
  if (fields.has("attention_factor")) rope.attention_factor = fields.positive_number("attention_factor", 1.0);
  rope.truncate = fields.boolean("truncate", true);
  return rope;
}

// transformers v5 keeps everything in rope_parameters; the published configs use top-level
// rope_theta plus a rope_scaling object (null or absent: plain RoPE).
RopeConfig read_rope(const Fields& fields, int64_t max_position_embeddings) {
  double theta = fields.positive_number("rope_theta", 10000.0);
  if (std::optional<Fields> parameters = fields.object("rope_parameters")) {
    theta = parameters->positive_number("rope_theta", theta);
    return read_rope_keys(*parameters, theta, max_position_embeddings);
  }
  if (std::optional<Fields> scaling = fields.object("rope_scaling")) {
    return read_rope_keys(*scaling, theta, max_position_embeddings);
  }
  RopeConfig rope;
  rope.theta = theta;
  return rope;
}

// compressed-tensors' pack-quantized int4 (docs/w4a8.md): the weights' scheme of every config group,
// which must be the one dsinfer runs (symmetric int4 in groups), all with one group size.
int64_t read_int4_groups(const Fields& config) {
  config.choice("format", 0, {{"pack-quantized", 0}});
  if (!config.has("format")) config.fail("format", "is missing (expected pack-quantized)");
  std::optional<Fields> groups = config.object("config_groups");
  if (!groups) config.fail("config_groups", "is missing");
  int64_t group_size = 0;
  const Json* all = config.get("config_groups");
  for (const auto& [name, value] : all->as_object()) {
    std::optional<Fields> group = groups->object(name);
    std::optional<Fields> weights = group->object("weights");
    if (!weights) group->fail("weights", "is missing");
    if (weights->integer("num_bits", 0) != 4) weights->fail("num_bits", "must be 4 (int4 weights)");
    weights->choice("type", 0, {{"int", 0}});
    if (!weights->boolean("symmetric", false)) weights->fail("symmetric", "must be true (int4 without zero points)");
    weights->choice("strategy", 0, {{"group", 0}});
    if (weights->boolean("dynamic", false)) weights->fail("dynamic", "must be false");
    const int64_t size = weights->required_int("group_size", 8);
    if (size % 8 != 0) weights->fail("group_size", "must be a multiple of 8, got ", size);
    if (group_size != 0 && size != group_size)
      weights->fail("group_size", size, " differs from another group's ", group_size);
    group_size = size;
    // Activations: none (dsinfer quantizes each token row to e4m3), or static per-tensor e4m3 scales.
    if (std::optional<Fields> inputs = group->object("input_activations")) {
      if (inputs->integer("num_bits", 0) != 8) inputs->fail("num_bits", "must be 8 (e4m3 activations)");
      inputs->choice("type", 0, {{"float", 0}});
      inputs->choice("strategy", 0, {{"tensor", 0}});
      if (inputs->boolean("dynamic", false)) inputs->fail("dynamic", "must be false (static input_scale tensors)");
    }
  }
  if (group_size == 0) config.fail("config_groups", "is empty");
  return group_size;
}

QuantizationConfig read_quantization(const Fields& fields) {
  QuantizationConfig quantization;
  std::optional<Fields> config = fields.object("quantization_config");
  if (!config) return quantization;
  if (!config->has("quant_method")) config->fail("quant_method", "is missing");
  enum class Method { kFp8, kCompressedTensors };
  const Method method =
      config->choice("quant_method", Method::kFp8, {{"fp8", Method::kFp8}, {"compressed-tensors", Method::kCompressedTensors}});
  if (method == Method::kCompressedTensors) {
    quantization.int4_group_size = read_int4_groups(*config);
    return quantization;
  }
  quantization.fp8_block = true;
  config->choice("fmt", 0, {{"e4m3", 0}});
  if (const Json* size = config->get("weight_block_size")) {
    bool valid = size->is_array() && size->size() == 2 && size->at(0).is_int() && size->at(1).is_int() &&
                 size->at(0).as_int() > 0 && size->at(1).as_int() > 0;
    if (!valid)
      config->fail("weight_block_size", "must be [rows, columns] of positive integers, got ", brief(*size));
    quantization.block_n = size->at(0).as_int();
    quantization.block_k = size->at(1).as_int();
  }
  quantization.activation_scheme = config->string("activation_scheme", quantization.activation_scheme);
  return quantization;
}

void read_special_tokens(const Fields& fields, ModelConfig& config) {
  if (fields.has("bos_token_id")) config.bos_token_id = fields.integer("bos_token_id", 0);
  const Json* eos = fields.get("eos_token_id");
  if (eos == nullptr) return;
  Json::Array ids = eos->is_array() ? eos->as_array() : Json::Array{*eos};
  for (const Json& id : ids) {
    if (!id.is_int() || id.as_int() < 0) {
      fields.fail("eos_token_id", "must be a token id or a list of them, got ", brief(*eos));
    }
    config.eos_token_ids.push_back(id.as_int());
  }
}

void check_consistency(const Fields& fields, const ModelConfig& config) {
  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    fields.fail("num_attention_heads", "(", config.num_attention_heads,
                ") is not divisible by num_key_value_heads (", config.num_key_value_heads, ")");
  }
  if (config.n_routed_experts == 0) return;
  if (config.num_experts_per_tok > config.n_routed_experts) {
    fields.fail("num_experts_per_tok", "(", config.num_experts_per_tok, ") exceeds n_routed_experts (",
                config.n_routed_experts, ")");
  }
  if (config.n_routed_experts % config.n_group != 0) {
    fields.fail("n_routed_experts", "(", config.n_routed_experts, ") is not divisible by n_group (",
                config.n_group, ")");
  }
  if (config.topk_group > config.n_group) {
    fields.fail("topk_group", "(", config.topk_group, ") exceeds n_group (", config.n_group, ")");
  }
  // Grouped selection picks experts only from the topk_group best groups.
  int64_t selectable = config.topk_group * (config.n_routed_experts / config.n_group);
  if (config.topk_method != TopkMethod::kGreedy && config.num_experts_per_tok > selectable) {
    fields.fail("num_experts_per_tok", "(", config.num_experts_per_tok, ") exceeds the ", selectable,
                " experts in topk_group (", config.topk_group, ") of n_group (", config.n_group, ") groups");
  }
}

// YaRN's attention temperature: 0.1 * mscale * ln(factor) + 1 when the context is stretched.
double yarn_mscale(double factor, double mscale) {
  return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

}  // namespace

bool ModelConfig::is_moe_layer(int64_t layer) const {
  return n_routed_experts > 0 && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
}

double ModelConfig::softmax_scale() const {
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim()));
  if (rope.type == "yarn" && rope.mscale_all_dim != 0.0) {
    double mscale = yarn_mscale(rope.factor, rope.mscale_all_dim);
    scale *= mscale * mscale;
  }
  return scale;
}

ModelConfig parse_model_config(const Json& json, std::string_view source) {
  DSINFER_CHECK(json.is_object(), source, ": expected a JSON object, got ", Json::type_name(json.type()));
  Fields fields(json, source);
  ModelConfig config;
  if (!fields.has("model_type")) fields.fail("model_type", "is missing");
  config.model_type = fields.string("model_type", "");
  config.family = fields.choice("model_type", ModelFamily::kDeepseekV3,
                                {{"deepseek_v3", ModelFamily::kDeepseekV3},
                                 {"kimi_k2", ModelFamily::kDeepseekV3},
                                 {"deepseek_v2", ModelFamily::kDeepseekV2}});
  read_dimensions(fields, config);
  read_attention(fields, config);
  read_moe(fields, config);
  config.rope = read_rope(fields, config.max_position_embeddings);
  config.quantization = read_quantization(fields);
  read_special_tokens(fields, config);
  check_consistency(fields, config);
  return config;
}

ModelConfig truncate_layers(const ModelConfig& config, int64_t num_layers) {
  DSINFER_CHECK(num_layers >= 1 && num_layers <= config.num_hidden_layers, "cannot keep the first ", num_layers,
                " decoder layers: the number of layers must be between 1 and ", config.num_hidden_layers,
                " (the config's num_hidden_layers)");
  ModelConfig truncated = config;
  truncated.num_hidden_layers = num_layers;
  return truncated;
}

ModelConfig load_model_config(const std::string& dir) {
  std::string path = dir + "/config.json";
  std::string text = read_file(path);  // its errors name the path
  Json json;
  try {
    json = Json::parse(text);
  } catch (const Error& error) {
    throw Error(str_cat(path, ": ", error.what()));
  }
  return parse_model_config(json, path);
}

}  // namespace dsinfer::io
