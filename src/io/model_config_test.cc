// config.json: the published DeepSeek-V3, V2-Lite and Kimi-K2 configs, transformers v5 spelling,
// and errors that name the field.
#include "io/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/file.h"
#include "io/test_util.h"

namespace dsinfer::io {
namespace {

using test_util::ScratchDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// deepseek-ai/DeepSeek-V3 config.json (as published; auto_map and similar keys left out).
constexpr const char* kDeepseekV3 = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 3, "hidden_act": "silu",
  "hidden_size": 7168, "initializer_range": 0.02, "intermediate_size": 18432, "kv_lora_rank": 512,
  "max_position_embeddings": 163840, "model_type": "deepseek_v3", "moe_intermediate_size": 2048,
  "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": true,
  "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
  "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
  "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                          "weight_block_size": [128, 128]},
  "rms_norm_eps": 1e-06, "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                                          "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                                          "type": "yarn"},
  "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": false,
  "topk_group": 4, "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "transformers_version": "4.33.1",
  "use_cache": true, "v_head_dim": 128, "vocab_size": 129280
})";

// deepseek-ai/DeepSeek-V2-Lite config.json: no q_lora_rank, softmax routing over 64 experts.
constexpr const char* kDeepseekV2Lite = R"({
  "architectures": ["DeepseekV2ForCausalLM"], "attention_bias": false, "bos_token_id": 100000,
  "eos_token_id": 100001, "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": 2048,
  "intermediate_size": 10944, "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v2",
  "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 64, "n_shared_experts": 2,
  "norm_topk_prob": false, "num_attention_heads": 16, "num_experts_per_tok": 6, "num_hidden_layers": 27,
  "num_key_value_heads": 16, "q_lora_rank": null, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
  "rms_norm_eps": 1e-06, "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707,
                                          "mscale_all_dim": 0.707, "original_max_position_embeddings": 4096,
                                          "type": "yarn"},
  "rope_theta": 10000, "routed_scaling_factor": 1.0, "scoring_func": "softmax", "tie_word_embeddings": false,
  "topk_group": 1, "topk_method": "greedy", "torch_dtype": "bfloat16", "v_head_dim": 128, "vocab_size": 102400
})";

// moonshotai/Kimi-K2-Instruct config.json: the V3 architecture under its own model_type.
constexpr const char* kKimiK2 = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "bos_token_id": 163584, "eos_token_id": 163585,
  "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": 7168, "intermediate_size": 18432,
  "kv_lora_rank": 512, "max_position_embeddings": 131072, "model_type": "kimi_k2", "moe_intermediate_size": 2048,
  "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 384, "n_shared_experts": 1, "norm_topk_prob": true,
  "num_attention_heads": 64, "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 64,
  "num_nextn_predict_layers": 0, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
  "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                          "weight_block_size": [128, 128]},
  "rms_norm_eps": 1e-06, "rope_scaling": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0,
                                          "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                                          "type": "yarn"},
  "rope_theta": 50000.0, "routed_scaling_factor": 2.827, "scoring_func": "sigmoid", "topk_group": 1,
  "topk_method": "noaux_tc", "v_head_dim": 128, "vocab_size": 163840
})";

ModelConfig parse(const Json& json) { return parse_model_config(json, "ckpt/config.json"); }

std::string parse_error(const Json& json) {
  try {
    parse(json);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

Json v3() { return Json::parse(kDeepseekV3); }

Json without(Json json, std::string_view key) {
  std::erase_if(json.as_object(), [&](const Json::Member& member) { return member.first == key; });
  return json;
}

Json with(Json json, std::string_view key, Json value) {
  json[key] = std::move(value);
  return json;
}

TEST(ModelConfig, ParsesDeepseekV3) {
  ModelConfig config = parse(v3());
  EXPECT_EQ(config.model_type, "deepseek_v3");
  EXPECT_EQ(config.family, ModelFamily::kDeepseekV3);
  EXPECT_EQ(config.vocab_size, 129280);
  EXPECT_EQ(config.hidden_size, 7168);
  EXPECT_EQ(config.intermediate_size, 18432);
  EXPECT_EQ(config.num_hidden_layers, 61);
  EXPECT_EQ(config.num_nextn_predict_layers, 1);
  EXPECT_EQ(config.num_attention_heads, 128);
  EXPECT_EQ(config.num_key_value_heads, 128);
  EXPECT_EQ(config.rms_norm_eps, 1e-6);
  EXPECT_EQ(config.max_position_embeddings, 163840);
  EXPECT_FALSE(config.tie_word_embeddings);
  EXPECT_EQ(config.q_lora_rank, 1536);
  EXPECT_EQ(config.kv_lora_rank, 512);
  EXPECT_EQ(config.qk_head_dim(), 192);
  EXPECT_EQ(config.v_head_dim, 128);
  EXPECT_TRUE(config.rope_interleave);
  EXPECT_EQ(config.n_routed_experts, 256);
  EXPECT_EQ(config.n_shared_experts, 1);
  EXPECT_EQ(config.num_experts_per_tok, 8);
  EXPECT_EQ(config.moe_intermediate_size, 2048);
  EXPECT_EQ(config.first_k_dense_replace, 3);
  EXPECT_EQ(config.n_group, 8);
  EXPECT_EQ(config.topk_group, 4);
  EXPECT_TRUE(config.norm_topk_prob);
  EXPECT_EQ(config.routed_scaling_factor, 2.5);
  EXPECT_EQ(config.scoring_func, ScoringFunc::kSigmoid);
  EXPECT_EQ(config.topk_method, TopkMethod::kNoauxTc);
  EXPECT_EQ(config.rope.theta, 10000.0);
  EXPECT_EQ(config.rope.type, "yarn");
  EXPECT_EQ(config.rope.factor, 40.0);
  EXPECT_EQ(config.rope.original_max_position_embeddings, 4096);
  EXPECT_EQ(config.rope.beta_fast, 32.0);
  EXPECT_EQ(config.rope.beta_slow, 1.0);
  EXPECT_EQ(config.rope.mscale_all_dim, 1.0);
  EXPECT_FALSE(config.rope.attention_factor.has_value());
  EXPECT_TRUE(config.quantization.fp8_block);
  EXPECT_EQ(config.quantization.block_n, 128);
  EXPECT_EQ(config.quantization.block_k, 128);
  EXPECT_EQ(config.bos_token_id, 0);
  EXPECT_THAT(config.eos_token_ids, ElementsAre(1));
}

TEST(ModelConfig, DeepseekV3SoftmaxScaleCarriesYarnMscale) {
  double mscale = 0.1 * std::log(40.0) + 1.0;
  EXPECT_NEAR(parse(v3()).softmax_scale(), mscale * mscale / std::sqrt(192.0), 1e-12);
  Json plain = with(v3(), "rope_scaling", nullptr);
  EXPECT_EQ(parse(plain).rope.type, "default");
  EXPECT_NEAR(parse(plain).softmax_scale(), 1.0 / std::sqrt(192.0), 1e-12);
}

TEST(ModelConfig, DeepseekV3MoeLayers) {
  ModelConfig config = parse(v3());
  EXPECT_FALSE(config.is_moe_layer(0));
  EXPECT_FALSE(config.is_moe_layer(2));
  EXPECT_TRUE(config.is_moe_layer(3));
  EXPECT_TRUE(config.is_moe_layer(61));  // the MTP layer
  config.moe_layer_freq = 2;
  EXPECT_FALSE(config.is_moe_layer(5));
  EXPECT_TRUE(config.is_moe_layer(6));
  EXPECT_FALSE(parse(with(v3(), "n_routed_experts", nullptr)).is_moe_layer(10));
}

// docs/w4a8.md: compressed-tensors' pack-quantized int4, as dsinfer quantize writes it and as
// Kimi-K2-Thinking ships it (group 32, every Linear targeted, no activation scheme).
TEST(ModelConfig, ReadsCompressedTensorsInt4) {
  ModelConfig ours = parse(with(v3(), "quantization_config", Json::parse(R"({
      "quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": [],
      "config_groups": {"group_0": {"targets": ["re:.*mlp\\.experts\\.\\d+\\.(gate|up|down)_proj$"],
        "weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 128,
                    "dynamic": false},
        "input_activations": null}}})")));
  EXPECT_EQ(ours.quantization.int4_group_size, 128);
  EXPECT_FALSE(ours.quantization.fp8_block);
  ModelConfig kimi = parse(with(v3(), "quantization_config", Json::parse(R"({
      "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
      "kv_cache_scheme": null, "ignore": ["lm_head"],
      "config_groups": {"group_0": {"input_activations": null, "output_activations": null, "targets": ["Linear"],
        "weights": {"actorder": null, "block_structure": null, "dynamic": false, "group_size": 32, "num_bits": 4,
                    "observer": "minmax", "observer_kwargs": {}, "strategy": "group", "symmetric": true,
                    "type": "int"}}}})")));
  EXPECT_EQ(kimi.quantization.int4_group_size, 32);
  EXPECT_EQ(parse(v3()).quantization.int4_group_size, 0);
}

TEST(ModelConfig, ParsesDeepseekV2Lite) {
  ModelConfig config = parse(Json::parse(kDeepseekV2Lite));
  EXPECT_EQ(config.family, ModelFamily::kDeepseekV2);
  EXPECT_EQ(config.q_lora_rank, 0);
  EXPECT_EQ(config.kv_lora_rank, 512);
  EXPECT_EQ(config.qk_rope_head_dim, 64);
  EXPECT_EQ(config.qk_nope_head_dim, 128);
  EXPECT_EQ(config.v_head_dim, 128);
  EXPECT_EQ(config.n_routed_experts, 64);
  EXPECT_EQ(config.num_experts_per_tok, 6);
  EXPECT_EQ(config.n_shared_experts, 2);
  EXPECT_EQ(config.first_k_dense_replace, 1);
  EXPECT_EQ(config.n_group, 1);
  EXPECT_EQ(config.topk_group, 1);
  EXPECT_FALSE(config.norm_topk_prob);
  EXPECT_EQ(config.scoring_func, ScoringFunc::kSoftmax);
  EXPECT_EQ(config.topk_method, TopkMethod::kGreedy);
  EXPECT_FALSE(config.quantization.fp8_block);
  EXPECT_EQ(config.num_nextn_predict_layers, 0);
  EXPECT_TRUE(config.is_moe_layer(1));
  double mscale = 0.1 * 0.707 * std::log(40.0) + 1.0;
  EXPECT_NEAR(config.softmax_scale(), mscale * mscale / std::sqrt(192.0), 1e-12);
}

TEST(ModelConfig, DeepseekV2Defaults) {
  Json json = Json::parse(kDeepseekV2Lite);
  for (const char* key : {"scoring_func", "topk_method", "norm_topk_prob", "n_group", "topk_group"})
    json = without(json, key);
  ModelConfig config = parse(json);
  EXPECT_EQ(config.scoring_func, ScoringFunc::kSoftmax);
  EXPECT_EQ(config.topk_method, TopkMethod::kGreedy);
  EXPECT_FALSE(config.norm_topk_prob);
  EXPECT_EQ(config.n_group, 1);
}

TEST(ModelConfig, ParsesKimiK2) {
  ModelConfig config = parse(Json::parse(kKimiK2));
  EXPECT_EQ(config.model_type, "kimi_k2");
  EXPECT_EQ(config.family, ModelFamily::kDeepseekV3);
  EXPECT_EQ(config.n_routed_experts, 384);
  EXPECT_EQ(config.num_attention_heads, 64);
  EXPECT_EQ(config.routed_scaling_factor, 2.827);
  EXPECT_EQ(config.rope.theta, 50000.0);
  EXPECT_EQ(config.rope.factor, 32.0);
  EXPECT_EQ(config.rope.beta_fast, 1.0);
  EXPECT_EQ(config.bos_token_id, 163584);
  EXPECT_TRUE(config.quantization.fp8_block);
}

TEST(ModelConfig, ParsesTransformersV5RopeParameters) {
  Json json = without(without(v3(), "rope_scaling"), "rope_theta");
  json = without(json, "num_nextn_predict_layers");
  json["num_mtp_layers"] = 1;
  json["rope_parameters"] = Json::parse(R"({"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0,
      "original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0,
      "mscale_all_dim": 1.0, "attention_factor": 1.25, "truncate": false})");
  json["eos_token_id"] = Json(Json::Array{Json(1), Json(2)});
  ModelConfig config = parse(json);
  EXPECT_EQ(config.rope.type, "yarn");
  EXPECT_EQ(config.rope.factor, 40.0);
  EXPECT_EQ(config.rope.attention_factor, 1.25);
  EXPECT_FALSE(config.rope.truncate);
  EXPECT_EQ(config.num_nextn_predict_layers, 1);
  EXPECT_THAT(config.eos_token_ids, ElementsAre(1, 2));
}

TEST(ModelConfig, OptionalFieldsTakeDefaults) {
  Json json = v3();
  for (const char* key : {"num_key_value_heads", "q_lora_rank", "rms_norm_eps", "num_nextn_predict_layers",
                          "quantization_config", "bos_token_id", "eos_token_id", "topk_group",
                          "norm_topk_prob", "scoring_func", "topk_method", "routed_scaling_factor"})
    json = without(json, key);
  json["n_group"] = nullptr;
  ModelConfig config = parse(json);
  EXPECT_EQ(config.num_key_value_heads, 128);
  EXPECT_EQ(config.q_lora_rank, 0);
  EXPECT_EQ(config.rms_norm_eps, 1e-6);
  EXPECT_EQ(config.num_nextn_predict_layers, 0);
  EXPECT_FALSE(config.quantization.fp8_block);
  EXPECT_FALSE(config.bos_token_id.has_value());
  EXPECT_TRUE(config.eos_token_ids.empty());
  EXPECT_EQ(config.n_group, 1);
  EXPECT_EQ(config.topk_group, 1);
  EXPECT_TRUE(config.norm_topk_prob);
  EXPECT_EQ(config.scoring_func, ScoringFunc::kSigmoid);
  EXPECT_EQ(config.topk_method, TopkMethod::kNoauxTc);
  EXPECT_EQ(config.routed_scaling_factor, 1.0);
}

TEST(ModelConfig, QuantizationBlockSizeDefaults) {
  Json json = v3();
  json["quantization_config"] = Json::parse(R"({"quant_method": "fp8"})");
  ModelConfig config = parse(json);
  EXPECT_TRUE(config.quantization.fp8_block);
  EXPECT_EQ(config.quantization.block_n, 128);
  EXPECT_EQ(config.quantization.block_k, 128);
}

// One broken config, and what the error must say.
struct BadConfig {
  const char* name;
  Json json;
  std::string expected;
};

Json moe(int64_t experts, int64_t per_token, int64_t groups, int64_t topk_groups) {
  Json json = v3();
  json["n_routed_experts"] = experts;
  json["num_experts_per_tok"] = per_token;
  json["n_group"] = groups;
  json["topk_group"] = topk_groups;
  return json;
}

const BadConfig kBadConfigs[] = {
    {"MissingField", without(v3(), "kv_lora_rank"), "ckpt/config.json: kv_lora_rank is missing"},
    {"NullRequiredField", with(v3(), "hidden_size", nullptr), "ckpt/config.json: hidden_size is missing"},
    {"WrongType", with(v3(), "hidden_size", "7168"),
     "ckpt/config.json: hidden_size must be a positive integer, got \"7168\""},
    {"NotPositive", with(v3(), "num_attention_heads", 0),
     "num_attention_heads must be a positive integer, got 0"},
    {"NegativeOptional", with(v3(), "n_shared_experts", -1),
     "n_shared_experts must be a non-negative integer, got -1"},
    {"BoolWrongType", with(v3(), "tie_word_embeddings", 1),
     "tie_word_embeddings must be true or false, got 1"},
    {"EpsNotPositive", with(v3(), "rms_norm_eps", 0), "rms_norm_eps must be a positive number, got 0"},
    {"ModelTypeMissing", without(v3(), "model_type"), "ckpt/config.json: model_type is missing"},
    {"UnknownModelType", with(v3(), "model_type", "llama"),
     "ckpt/config.json: model_type 'llama' is not supported (expected deepseek_v3, kimi_k2 or deepseek_v2)"},
    {"BadRopeType", with(v3(), "rope_scaling", Json::parse(R"({"type": "linear", "factor": 2.0})")),
     "ckpt/config.json: rope_scaling.type 'linear' is not supported"},
    {"BadRopeParametersType", with(v3(), "rope_parameters", Json::parse(R"({"rope_type": "dynamic"})")),
     "ckpt/config.json: rope_parameters.rope_type 'dynamic' is not supported"},
    {"RopeScalingNotObject", with(v3(), "rope_scaling", "yarn"),
     "rope_scaling must be an object, got \"yarn\""},
    {"RopeFactorWrongType", with(v3(), "rope_scaling", Json::parse(R"({"type": "yarn", "factor": "40"})")),
     "rope_scaling.factor must be a number, got \"40\""},
    {"BadQuantMethod", with(v3(), "quantization_config", Json::parse(R"({"quant_method": "awq"})")),
     "ckpt/config.json: quantization_config.quant_method 'awq' is not supported (expected fp8 or compressed-tensors)"},
    {"Int4NotPackQuantized",
     with(v3(), "quantization_config", Json::parse(R"({"quant_method": "compressed-tensors", "format": "float-quantized",
       "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group",
       "group_size": 128}}}})")),
     "quantization_config.format 'float-quantized' is not supported (expected pack-quantized)"},
    {"Int4EightBits",
     with(v3(), "quantization_config", Json::parse(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
       "config_groups": {"g": {"weights": {"num_bits": 8, "type": "int", "symmetric": true, "strategy": "group",
       "group_size": 128}}}})")),
     "quantization_config.config_groups.g.weights.num_bits must be 4 (int4 weights)"},
    {"Int4Asymmetric",
     with(v3(), "quantization_config", Json::parse(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
       "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int", "symmetric": false, "strategy": "group",
       "group_size": 128}}}})")),
     "weights.symmetric must be true (int4 without zero points)"},
    {"Int4PerChannel",
     with(v3(), "quantization_config", Json::parse(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
       "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "channel"}}}})")),
     "weights.strategy 'channel' is not supported (expected group)"},
    {"Int4DynamicActivations",
     with(v3(), "quantization_config", Json::parse(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
       "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group",
       "group_size": 32}, "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": true}}}})")),
     "input_activations.strategy 'token' is not supported (expected tensor)"},
    {"QuantMethodMissing", with(v3(), "quantization_config", Json::parse(R"({"fmt": "e4m3"})")),
     "quantization_config.quant_method is missing"},
    {"BadFp8Format",
     with(v3(), "quantization_config", Json::parse(R"({"quant_method": "fp8", "fmt": "e5m2"})")),
     "quantization_config.fmt 'e5m2' is not supported (expected e4m3)"},
    {"BadBlockSize",
     with(v3(), "quantization_config", Json::parse(R"({"quant_method": "fp8", "weight_block_size": [128]})")),
     "quantization_config.weight_block_size must be [rows, columns] of positive integers, got [128]"},
    {"BadScoringFunc", with(v3(), "scoring_func", "tanh"),
     "scoring_func 'tanh' is not supported (expected softmax or sigmoid)"},
    {"BadTopkMethod", with(v3(), "topk_method", "gready"), "topk_method 'gready' is not supported"},
    {"BadActivation", with(v3(), "hidden_act", "gelu"), "hidden_act 'gelu' is not supported (expected silu)"},
    {"MoeWithoutExpertsPerToken", without(v3(), "num_experts_per_tok"), "num_experts_per_tok is missing"},
    {"MoeWithoutExpertSize", without(v3(), "moe_intermediate_size"), "moe_intermediate_size is missing"},
    {"MoreExpertsPerTokenThanExperts", moe(8, 9, 1, 1),
     "num_experts_per_tok (9) exceeds n_routed_experts (8)"},
    {"ExpertsNotDivisibleByGroups", moe(256, 8, 7, 4),
     "n_routed_experts (256) is not divisible by n_group (7)"},
    {"MoreTopkGroupsThanGroups", moe(256, 8, 8, 9), "topk_group (9) exceeds n_group (8)"},
    {"TooFewExpertsInTopkGroups", moe(256, 8, 64, 1),
     "num_experts_per_tok (8) exceeds the 4 experts in topk_group (1) of n_group (64) groups"},
    {"HeadsNotDivisibleByKvHeads", with(v3(), "num_key_value_heads", 3),
     "num_attention_heads (128) is not divisible by num_key_value_heads (3)"},
    {"BadEos", with(v3(), "eos_token_id", "</s>"),
     "eos_token_id must be a token id or a list of them, got \"</s>\""},
    {"NotAnObject", Json(Json::Array{}), "ckpt/config.json: expected a JSON object, got array"},
};

class ModelConfigBad : public ::testing::TestWithParam<BadConfig> {};

TEST_P(ModelConfigBad, ErrorNamesTheField) {
  EXPECT_THAT(parse_error(GetParam().json), HasSubstr(GetParam().expected));
}

INSTANTIATE_TEST_SUITE_P(Cases, ModelConfigBad, ::testing::ValuesIn(kBadConfigs),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(LoadModelConfig, ReadsConfigJsonFromTheDirectory) {
  ScratchDir dir;
  write_file(dir.file("config.json"), kKimiK2);
  EXPECT_EQ(load_model_config(dir.path()).model_type, "kimi_k2");
}

TEST(LoadModelConfig, ErrorsNameThePath) {
  ScratchDir dir;
  std::string path = dir.file("config.json");
  auto error_of = [&] {
    try {
      load_model_config(dir.path());
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("(no error)");
  };
  EXPECT_THAT(error_of(), HasSubstr(path + ": cannot open"));
  write_file(path, "{\n  \"vocab_size\": 12,\n  oops\n}");
  EXPECT_THAT(error_of(), HasSubstr(path + ": JSON parse error at line 3, column 3"));
  write_file(path, R"({"model_type": "deepseek_v3"})");
  EXPECT_THAT(error_of(), HasSubstr(path + ": vocab_size is missing"));
}

}  // namespace
}  // namespace dsinfer::io
