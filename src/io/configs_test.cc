// The real model configs under configs/: every config.json parses, with the numbers the model cards
// give; and truncate_layers (--num-layers) on them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "core/source_path.h"
#include "io/model_config.h"
#include "io/tensor_specs.h"

namespace dsinfer::io {
namespace {

using ::testing::HasSubstr;

ModelConfig load(const std::string& name) { return load_model_config(source_path("configs/" + name)); }

// The folders the tests below check one by one; a new folder must be added here too.
const std::set<std::string> kConfigs = {"deepseek-v3", "deepseek-r1", "deepseek-v2-lite", "kimi-k2", "moonlight-16b"};

TEST(Configs, EveryConfigParsesAndIsChecked) {
  std::set<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(source_path("configs"))) {
    if (!entry.is_directory()) continue;
    std::string name = entry.path().filename().string();
    found.insert(name);
    EXPECT_NO_THROW(load(name)) << name;
  }
  EXPECT_EQ(found, kConfigs);
}

// DeepSeek-V3 and R1 share the architecture and the FP8 checkpoint format.
void expect_deepseek_v3_shape(const ModelConfig& c) {
  EXPECT_EQ(c.model_type, "deepseek_v3");
  EXPECT_EQ(c.family, ModelFamily::kDeepseekV3);
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.intermediate_size, 18432);
  EXPECT_EQ(c.num_hidden_layers, 61);
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
  EXPECT_EQ(c.num_attention_heads, 128);
  EXPECT_EQ(c.num_key_value_heads, 128);
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.qk_nope_head_dim, 128);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.v_head_dim, 128);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 2048);
  EXPECT_EQ(c.first_k_dense_replace, 3);
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 4);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.scoring_func, ScoringFunc::kSigmoid);
  EXPECT_EQ(c.topk_method, TopkMethod::kNoauxTc);
  EXPECT_EQ(c.max_position_embeddings, 163840);
  EXPECT_EQ(c.rope.type, "yarn");
  EXPECT_EQ(c.rope.theta, 10000.0);
  EXPECT_EQ(c.rope.factor, 40.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 4096);
  EXPECT_EQ(c.rope.mscale_all_dim, 1.0);
  EXPECT_TRUE(c.quantization.fp8_block);
  EXPECT_EQ(c.quantization.block_n, 128);
  EXPECT_EQ(c.quantization.block_k, 128);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{1});
}

TEST(Configs, DeepseekV3) { expect_deepseek_v3_shape(load("deepseek-v3")); }

TEST(Configs, DeepseekR1) { expect_deepseek_v3_shape(load("deepseek-r1")); }

TEST(Configs, DeepseekV2Lite) {
  ModelConfig c = load("deepseek-v2-lite");
  EXPECT_EQ(c.model_type, "deepseek_v2");
  EXPECT_EQ(c.family, ModelFamily::kDeepseekV2);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.intermediate_size, 10944);
  EXPECT_EQ(c.num_hidden_layers, 27);
  EXPECT_EQ(c.num_nextn_predict_layers, 0);
  EXPECT_EQ(c.num_attention_heads, 16);
  EXPECT_EQ(c.vocab_size, 102400);
  EXPECT_EQ(c.q_lora_rank, 0);  // null: q_proj
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.n_routed_experts, 64);
  EXPECT_EQ(c.n_shared_experts, 2);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.moe_intermediate_size, 1408);
  EXPECT_EQ(c.first_k_dense_replace, 1);
  EXPECT_EQ(c.scoring_func, ScoringFunc::kSoftmax);
  EXPECT_EQ(c.topk_method, TopkMethod::kGreedy);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_EQ(c.rope.factor, 40.0);
  EXPECT_EQ(c.rope.mscale_all_dim, 0.707);
  EXPECT_FALSE(c.quantization.fp8_block);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{100001});
}

TEST(Configs, KimiK2) {
  ModelConfig c = load("kimi-k2");
  EXPECT_EQ(c.model_type, "kimi_k2");
  EXPECT_EQ(c.family, ModelFamily::kDeepseekV3);
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.num_hidden_layers, 61);
  EXPECT_EQ(c.num_nextn_predict_layers, 0);
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(c.vocab_size, 163840);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.n_routed_experts, 384);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.first_k_dense_replace, 1);
  EXPECT_EQ(c.n_group, 1);
  EXPECT_EQ(c.topk_group, 1);
  EXPECT_EQ(c.routed_scaling_factor, 2.827);
  EXPECT_EQ(c.topk_method, TopkMethod::kNoauxTc);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.rope.theta, 50000.0);
  EXPECT_EQ(c.rope.factor, 32.0);
  EXPECT_EQ(c.rope.beta_fast, 1.0);
  EXPECT_TRUE(c.quantization.fp8_block);
  EXPECT_EQ(c.bos_token_id, 163584);
}

TEST(Configs, Moonlight16B) {  // the V3 architecture at V2-Lite widths: q_proj, sigmoid + bias routing
  ModelConfig c = load("moonlight-16b");
  EXPECT_EQ(c.model_type, "deepseek_v3");
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.intermediate_size, 11264);
  EXPECT_EQ(c.num_hidden_layers, 27);
  EXPECT_EQ(c.num_nextn_predict_layers, 0);
  EXPECT_EQ(c.num_attention_heads, 16);
  EXPECT_EQ(c.vocab_size, 163840);
  EXPECT_EQ(c.q_lora_rank, 0);
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.n_routed_experts, 64);
  EXPECT_EQ(c.n_shared_experts, 2);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.moe_intermediate_size, 1408);
  EXPECT_EQ(c.first_k_dense_replace, 1);
  EXPECT_EQ(c.routed_scaling_factor, 2.446);
  EXPECT_EQ(c.scoring_func, ScoringFunc::kSigmoid);
  EXPECT_EQ(c.topk_method, TopkMethod::kNoauxTc);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope.type, "default");
  EXPECT_EQ(c.rope.theta, 50000.0);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_FALSE(c.quantization.fp8_block);
}

TEST(TruncateLayers, KeepsTheDenseLayersAndTheFirstMoeLayerOfDeepseekV3) {
  ModelConfig full = load("deepseek-v3");
  ModelConfig four = truncate_layers(full, 4);
  EXPECT_EQ(four.num_hidden_layers, 4);
  EXPECT_EQ(four.first_k_dense_replace, 3);
  EXPECT_EQ(four.num_nextn_predict_layers, 1);
  EXPECT_FALSE(four.is_moe_layer(0));
  EXPECT_FALSE(four.is_moe_layer(2));
  EXPECT_TRUE(four.is_moe_layer(3));
  // Everything but the layer count is the full model's.
  ModelConfig back = four;
  back.num_hidden_layers = full.num_hidden_layers;
  EXPECT_EQ(back.hidden_size, full.hidden_size);
  EXPECT_EQ(back.n_routed_experts, full.n_routed_experts);
  EXPECT_EQ(back.softmax_scale(), full.softmax_scale());
}

TEST(TruncateLayers, TheMtpModuleMovesToLayerN) {
  ModelConfig four = truncate_layers(load("deepseek-v3"), 4);
  std::set<int64_t> layers;
  bool mtp_at_4 = false, routed_at_3 = false;
  for (const TensorSpec& spec : checkpoint_tensors(four, StoredFormat::kFp8Block)) {
    if (std::optional<int64_t> layer = layer_index(spec.name)) layers.insert(*layer);
    mtp_at_4 |= spec.name == "model.layers.4.eh_proj.weight";
    routed_at_3 |= spec.name == "model.layers.3.mlp.experts.255.down_proj.weight_scale_inv";
  }
  EXPECT_EQ(layers, (std::set<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(mtp_at_4);
  EXPECT_TRUE(routed_at_3);
}

TEST(TruncateLayers, KeepsAllLayersAtTheFullCount) {
  ModelConfig full = load("kimi-k2");
  EXPECT_EQ(truncate_layers(full, 61).num_hidden_layers, 61);
  EXPECT_EQ(truncate_layers(full, 1).num_hidden_layers, 1);
}

TEST(TruncateLayers, RefusesCountsOutsideOneToTheFullCount) {
  ModelConfig full = load("deepseek-v3");
  for (int64_t n : {0, -1, 62}) {
    try {
      truncate_layers(full, n);
      ADD_FAILURE() << "no error for " << n;
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), HasSubstr(str_cat("cannot keep the first ", n, " decoder layers")));
      EXPECT_THAT(error.what(), HasSubstr("between 1 and 61"));
    }
  }
}

}  // namespace
}  // namespace dsinfer::io
