// checkpoint_tensors against real checkpoints: the three test fixtures and the bundled model, name
// by name, with dtype and shape; and the parameter counts of the published DeepSeek-V3 and Kimi-K2.
#include "io/tensor_specs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/source_path.h"
#include "io/checkpoint.h"

namespace dsinfer::io {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::string describe(DType dtype, const Shape& shape) { return str_cat(dtype_name(dtype), " ", shape.to_string()); }

// Every way `checkpoint` differs from `expected`, one line per tensor; empty when they agree.
std::vector<std::string> differences(const std::vector<TensorSpec>& expected, const Checkpoint& checkpoint) {
  std::map<std::string, std::string> want;
  for (const TensorSpec& spec : expected) {
    bool inserted = want.emplace(spec.name, describe(spec.dtype, spec.shape)).second;
    EXPECT_TRUE(inserted) << "checkpoint_tensors lists " << spec.name << " twice";
  }
  std::vector<std::string> found;
  for (const std::string& name : checkpoint.names()) {
    const TensorInfo& info = checkpoint.info(name);
    auto it = want.find(name);
    if (it == want.end()) {
      found.push_back(str_cat(name, ": in the checkpoint (", describe(info.dtype, info.shape), "), not listed"));
      continue;
    }
    if (it->second != describe(info.dtype, info.shape))
      found.push_back(str_cat(name, ": listed ", it->second, ", stored ", describe(info.dtype, info.shape)));
    want.erase(it);
  }
  for (const auto& [name, description] : want) found.push_back(str_cat(name, ": listed (", description, "), missing"));
  return found;
}

struct Model {
  ModelConfig config;
  Checkpoint checkpoint;
};

Model open_model(const std::string& relative_dir) {
  std::string dir = source_path(relative_dir);
  return {load_model_config(dir), Checkpoint::open(dir)};
}

TEST(CheckpointTensors, MatchTheV3TinyFixture) {
  Model model = open_model("tests/fixtures/models/v3-tiny");
  ASSERT_EQ(stored_format(model.config), StoredFormat::kBF16);
  EXPECT_THAT(differences(checkpoint_tensors(model.config, StoredFormat::kBF16), model.checkpoint), IsEmpty());
}

TEST(CheckpointTensors, MatchTheV2LiteTinyFixture) {  // q_proj, softmax gate without bias, no MTP
  Model model = open_model("tests/fixtures/models/v2-lite-tiny");
  ASSERT_EQ(model.config.q_lora_rank, 0);
  EXPECT_THAT(differences(checkpoint_tensors(model.config, stored_format(model.config)), model.checkpoint),
              IsEmpty());
}

TEST(CheckpointTensors, MatchTheBundledModel) {
  Model model = open_model("models/dsv3-tiny");
  EXPECT_THAT(differences(checkpoint_tensors(model.config, stored_format(model.config)), model.checkpoint),
              IsEmpty());
}

// tools/make_model_fixtures.py writes the FP8 fixture in the published layout
// (dsv3_checkpoint.quantize_fp8_blocks with published_layout): kv_a_proj_with_mqa in FP8, eh_proj BF16.
TEST(CheckpointTensors, MatchTheV3TinyFp8Fixture) {
  Model model = open_model("tests/fixtures/models/v3-tiny-fp8");
  ASSERT_EQ(stored_format(model.config), StoredFormat::kFp8Block);
  EXPECT_THAT(differences(checkpoint_tensors(model.config, StoredFormat::kFp8Block), model.checkpoint), IsEmpty());
}

TEST(CheckpointTensors, Fp8ScalesCoverPartialBlocks) {
  Model model = open_model("tests/fixtures/models/v3-tiny-fp8");  // q_b_proj [384, 96]: 3 x 1 blocks
  std::map<std::string, TensorSpec> by_name;
  for (TensorSpec& spec : checkpoint_tensors(model.config, StoredFormat::kFp8Block)) by_name[spec.name] = spec;
  const TensorSpec& q_b = by_name.at("model.layers.0.self_attn.q_b_proj.weight");
  EXPECT_EQ(q_b.dtype, DType::kF8E4M3);
  EXPECT_EQ(q_b.shape, Shape({384, 96}));
  const TensorSpec& scale = by_name.at("model.layers.0.self_attn.q_b_proj.weight_scale_inv");
  EXPECT_EQ(scale.dtype, DType::kF32);
  EXPECT_EQ(scale.shape, Shape({3, 1}));
  model.config.quantization.block_n = 64;  // the block size comes from quantization_config
  for (TensorSpec& spec : checkpoint_tensors(model.config, StoredFormat::kFp8Block)) by_name[spec.name] = spec;
  EXPECT_EQ(by_name.at("model.layers.0.self_attn.q_b_proj.weight_scale_inv").shape, Shape({6, 1}));
}

// Elements of the tensors of layers below `layers` plus the embedding, final norm and head.
int64_t elements(const std::vector<TensorSpec>& tensors, int64_t layers) {
  int64_t total = 0;
  for (const TensorSpec& spec : tensors) {
    std::optional<int64_t> layer = layer_index(spec.name);
    if (!layer || *layer < layers) total += spec.shape.numel();
  }
  return total;
}

TEST(CheckpointTensors, DeepseekV3HasAbout671BParametersWithoutMtp) {
  ModelConfig config = load_model_config(source_path("configs/deepseek-v3"));
  std::vector<TensorSpec> bf16 = checkpoint_tensors(config, StoredFormat::kBF16);
  EXPECT_EQ(elements(bf16, config.num_hidden_layers), 671'026'419'200);  // "671B" in DeepSeek's README
  EXPECT_EQ(elements(bf16, config.num_hidden_layers + 1), 684'489'845'504);  // with MTP: "685B" on the Hub
  std::vector<TensorSpec> fp8 = checkpoint_tensors(config, StoredFormat::kFp8Block);
  EXPECT_EQ(fp8.size(), 91'991u);
  size_t bytes = 0;
  for (const TensorSpec& spec : fp8) bytes += static_cast<size_t>(spec.shape.numel()) * dtype_size(spec.dtype);
  // The published safetensors files total 688,586,727,753 bytes: this plus their JSON headers.
  EXPECT_EQ(bytes, 688'574'839'360u);
}

TEST(CheckpointTensors, KimiK2HasAbout1_03TParameters) {
  ModelConfig config = load_model_config(source_path("configs/kimi-k2"));
  EXPECT_EQ(elements(checkpoint_tensors(config, StoredFormat::kBF16), config.num_hidden_layers),
            1'026'408'232'448);
  // The published FP8 checkpoint holds 139,644 tensors and 1,026,470,731,056 elements; beyond this
  // list they are 61 rotary_emb.inv_freq buffers of 56 elements (not weights; loaders skip them).
  std::vector<TensorSpec> fp8 = checkpoint_tensors(config, StoredFormat::kFp8Block);
  EXPECT_EQ(fp8.size() + 61, 139'644u);
  EXPECT_EQ(elements(fp8, config.num_hidden_layers) + 61 * 56, 1'026'470'731'056);
}

TEST(CheckpointTensors, DenseLayersFollowFirstKDenseReplaceAndMoeLayerFreq) {
  ModelConfig config = load_model_config(source_path("configs/deepseek-v2-lite"));
  config.num_hidden_layers = 5;
  config.first_k_dense_replace = 2;
  config.moe_layer_freq = 2;  // MoE at 2 and 4
  std::vector<int64_t> routed_layers, dense_layers;
  for (const TensorSpec& spec : checkpoint_tensors(config, StoredFormat::kBF16)) {
    if (spec.name.ends_with("mlp.gate.weight")) routed_layers.push_back(*layer_index(spec.name));
    if (spec.name.ends_with("mlp.gate_proj.weight") && spec.name.find("experts") == std::string::npos)
      dense_layers.push_back(*layer_index(spec.name));
    EXPECT_FALSE(spec.name.ends_with("e_score_correction_bias")) << "softmax/greedy routing has no bias";
  }
  EXPECT_THAT(routed_layers, ElementsAre(2, 4));
  EXPECT_THAT(dense_layers, ElementsAre(0, 1, 3));
}

TEST(CheckpointTensors, TiedEmbeddingsHaveNoLmHeadAndAttentionBiasIsRefused) {
  ModelConfig config = load_model_config(source_path("configs/deepseek-v2-lite"));
  config.tie_word_embeddings = true;
  for (const TensorSpec& spec : checkpoint_tensors(config, StoredFormat::kBF16)) EXPECT_NE(spec.name, "lm_head.weight");
  config.attention_bias = true;
  EXPECT_THROW(checkpoint_tensors(config, StoredFormat::kBF16), Error);
}

TEST(LayerIndex, ReadsTheLayerOfATensorName) {
  EXPECT_EQ(layer_index("model.layers.61.eh_proj.weight"), 61);
  EXPECT_EQ(layer_index("model.layers.0.mlp.experts.7.up_proj.weight_scale_inv"), 0);
  EXPECT_EQ(layer_index("model.embed_tokens.weight"), std::nullopt);
  EXPECT_EQ(layer_index("lm_head.weight"), std::nullopt);
  EXPECT_EQ(layer_index("model.layers.x.input_layernorm.weight"), std::nullopt);
  EXPECT_EQ(layer_index("model.layers.12"), std::nullopt);
}

}  // namespace
}  // namespace dsinfer::io
