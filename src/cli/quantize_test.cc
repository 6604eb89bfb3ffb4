// dsinfer quantize end to end: the bundled model (BF16) and a small FP8 checkpoint to W4A8, read
// back through io::Checkpoint and checked against docs/w4a8.md; and the inputs it refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "cli/verbs.h"
#include "core/error.h"
#include "core/file.h"
#include "core/json.h"
#include "core/source_path.h"
#include "io/checkpoint.h"
#include "io/int4_pack.h"
#include "io/safetensors_writer.h"
#include "io/test_util.h"
#include "io/weight_format.h"
#include "backend/make_backend.h"
#include "core/strings.h"
#include "model/batch_builder.h"
#include "model/deepseek_model.h"

namespace dsinfer::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using io::test_util::ScratchDir;

// docs/w4a8.md, "config.json", as written there.
constexpr const char* kDocumentedConfig = R"({
  "quant_method": "compressed-tensors",
  "format": "pack-quantized",
  "config_groups": {
    "group_0": {
      "targets": ["re:.*mlp\\.experts\\.\\d+\\.(gate|up|down)_proj$"],
      "weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group",
                  "group_size": 128, "dynamic": false},
      "input_activations": null
    }
  },
  "ignore": []
})";

int quantize(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return run_quantize(static_cast<int>(argv.size()), argv.data());
}

bool is_routed_expert_weight(const std::string& name) {
  return name.starts_with("model.layers.") && name.find(".mlp.experts.") != std::string::npos &&
         name.ends_with("_proj.weight");
}

std::string prefix_of(const std::string& weight_name) { return weight_name.substr(0, weight_name.size() - 7); }

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Checks P's three W4A8 tensors in `out` against `expected` (the source weight as float32) and
// returns the largest |w - w'| / scale.
double check_quantized(const io::Checkpoint& out, const std::string& prefix, const Tensor& expected,
                       int64_t group_size) {
  const int64_t rows = expected.dim(0), cols = expected.dim(1);
  EXPECT_FALSE(out.contains(prefix + ".weight"));
  EXPECT_FALSE(out.contains(prefix + ".weight_scale_inv"));
  const Tensor packed = out.tensor(prefix + ".weight_packed");
  const Tensor scale = out.tensor(prefix + ".weight_scale");
  const Tensor shape = out.tensor(prefix + ".weight_shape");
  EXPECT_EQ(packed.dtype(), DType::kI32);
  EXPECT_EQ(packed.shape(), (Shape{rows, cols / 8}));
  EXPECT_EQ(scale.dtype(), DType::kBF16);
  EXPECT_EQ(scale.shape(), (Shape{rows, cols / group_size}));
  EXPECT_EQ(shape.dtype(), DType::kI64);
  EXPECT_EQ(shape.shape(), Shape{2});
  if (shape.numel() == 2) {
    EXPECT_EQ(shape.data<int64_t>()[0], rows);
    EXPECT_EQ(shape.data<int64_t>()[1], cols);
  }
  if (::testing::Test::HasFailure()) return INFINITY;
  const Tensor scales = io::to_f32(scale);
  std::vector<float> restored(static_cast<size_t>(rows * cols));
  io::dequantize_int4({packed.data<int32_t>(), static_cast<size_t>(packed.numel())},
                      {scales.data<float>(), static_cast<size_t>(scales.numel())}, cols, group_size, restored);
  double worst = 0;
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t col = 0; col < cols; ++col) {
      const float step = scales.data<float>()[row * (cols / group_size) + col / group_size];
      const float error = std::fabs(expected.data<float>()[row * cols + col] - restored[row * cols + col]);
      worst = std::max(worst, static_cast<double>(error / step));
    }
  }
  return worst;
}

TEST(Quantize, TheBundledModelBecomesW4A8WithEveryOtherTensorAndFileUnchanged) {
  ScratchDir scratch;
  const std::string model = source_path("models/dsv3-tiny"), out = scratch.file("w4a8");
  ASSERT_EQ(quantize({"--model", model, "--out", out, "--method", "w4a8"}), 0);

  const io::Checkpoint source = io::Checkpoint::open(model);
  const io::Checkpoint quantized = io::Checkpoint::open(out);
  int experts = 0;
  for (const std::string& name : source.names()) {
    SCOPED_TRACE(name);
    if (is_routed_expert_weight(name)) {
      ++experts;
      EXPECT_LE(check_quantized(quantized, prefix_of(name), io::load_f32(source, name), 128), 0.5 + 1e-6);
    } else {
      ASSERT_TRUE(quantized.contains(name));
      EXPECT_TRUE(same_bytes(source.tensor(name), quantized.tensor(name)));
    }
  }
  EXPECT_EQ(experts, 5 * 8 * 3);  // layers 1-4 and the MTP layer 5, 8 experts, gate/up/down
  EXPECT_EQ(quantized.names().size(), source.names().size() + 2 * experts);
  EXPECT_FALSE(fs::exists(out + "/model.safetensors.index.json"));  // one shard

  Json source_config = Json::parse(read_file(model + "/config.json"));
  Json config = Json::parse(read_file(out + "/config.json"));
  ASSERT_TRUE(config.contains("quantization_config"));
  EXPECT_EQ(*config.find("quantization_config"), Json::parse(kDocumentedConfig));
  std::erase_if(config.as_object(), [](const Json::Member& member) { return member.first == "quantization_config"; });
  EXPECT_EQ(config, source_config);

  for (const char* file : {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "README.md",
                           "training.json", "eval/arith.jsonl", "eval/tool.jsonl"}) {
    SCOPED_TRACE(file);
    ASSERT_TRUE(fs::exists(out + "/" + file));
    EXPECT_EQ(read_file(out + "/" + file), read_file(model + "/" + file));
  }
}

// A DeepSeek-FP8-style checkpoint: an FP8 routed expert (130 rows: a ragged last block row) and an
// FP8 attention weight, each with 128 x 128 block scales, and a BF16 norm.
void write_fp8_checkpoint(const std::string& dir) {
  fs::create_directories(dir);
  write_file(dir + "/config.json", R"({"model_type": "deepseek_v3", "hidden_size": 256,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]}})");
  write_file(dir + "/tokenizer.json", "{}");
  std::mt19937 generator(3);
  std::normal_distribution<float> normal(0.0f, 60.0f);
  auto random = [&](int64_t count) {
    std::vector<float> values(static_cast<size_t>(count));
    for (float& value : values) value = normal(generator);
    return values;
  };
  using io::test_util::make_tensor;
  io::write_safetensors(
      dir + "/model.safetensors",
      {{"model.layers.3.mlp.experts.1.up_proj.weight", make_tensor(DType::kF8E4M3, {130, 256}, random(130 * 256))},
       {"model.layers.3.mlp.experts.1.up_proj.weight_scale_inv",
        make_tensor(DType::kF32, {2, 2}, {0.5f, 4.0f, 0.125f, 2.0f})},
       {"model.layers.3.self_attn.o_proj.weight", make_tensor(DType::kF8E4M3, {64, 128}, random(64 * 128))},
       {"model.layers.3.self_attn.o_proj.weight_scale_inv", make_tensor(DType::kF32, {1, 1}, {0.01f})},
       {"model.norm.weight", make_tensor(DType::kBF16, {64}, random(64))}});
}

TEST(Quantize, AnFp8SourceIsDequantizedFirstAndItsOtherWeightsKeepTheirScales) {
  ScratchDir scratch;
  const std::string model = scratch.file("fp8"), out = scratch.file("w4a8");
  write_fp8_checkpoint(model);
  // 20 kB a shard: the expert (17 kB quantized) fills the first, the rest goes to a second.
  ASSERT_EQ(quantize({"--model", model, "--out", out, "--method", "w4a8", "--max-shard-size", "20000"}), 0);

  const io::Checkpoint source = io::Checkpoint::open(model);
  const io::Checkpoint quantized = io::Checkpoint::open(out);
  const std::string expert = "model.layers.3.mlp.experts.1.up_proj.weight";
  const Tensor dequantized = io::load_f32(source, expert);  // FP8 times its block scales
  EXPECT_LE(check_quantized(quantized, prefix_of(expert), dequantized, 128), 0.5 + 1e-6);
  // Against the raw FP8 values (scales not applied) it would be far off.
  EXPECT_GT(check_quantized(quantized, prefix_of(expert), io::to_f32(source.tensor(expert)), 128), 1.0);
  for (const char* name : {"model.layers.3.self_attn.o_proj.weight", "model.layers.3.self_attn.o_proj.weight_scale_inv",
                           "model.norm.weight"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(quantized.contains(name));
    EXPECT_TRUE(same_bytes(source.tensor(name), quantized.tensor(name)));
  }
  EXPECT_EQ(quantized.names().size(), 6u);  // the expert's three, o_proj and its scale, the norm

  ASSERT_TRUE(fs::exists(out + "/model-00001-of-00002.safetensors"));
  ASSERT_TRUE(fs::exists(out + "/model-00002-of-00002.safetensors"));
  const Json index = Json::parse(read_file(out + "/model.safetensors.index.json"));
  EXPECT_EQ(index.find("weight_map")->size(), 6u);
  EXPECT_EQ(*index.find("weight_map")->find(prefix_of(expert) + ".weight_packed"),
            Json("model-00001-of-00002.safetensors"));
  int64_t total = 0;
  for (const std::string& name : quantized.names()) total += static_cast<int64_t>(quantized.info(name).nbytes);
  EXPECT_EQ(index.find("metadata")->find("total_size")->as_int(), total);

  const Json config = Json::parse(read_file(out + "/config.json"));
  EXPECT_EQ(*config.find("quantization_config"), Json::parse(kDocumentedConfig));
  EXPECT_EQ(config.find("hidden_size")->as_int(), 256);
  EXPECT_EQ(read_file(out + "/tokenizer.json"), "{}");
}

TEST(Quantize, TheGroupSizeIsWrittenToTheConfigAndTheScales) {
  ScratchDir scratch;
  const std::string model = scratch.file("fp8"), out = scratch.file("w4a8");
  write_fp8_checkpoint(model);
  ASSERT_EQ(quantize({"--model", model, "--out", out, "--method", "w4a8", "--group-size", "32"}), 0);
  const io::Checkpoint source = io::Checkpoint::open(model), quantized = io::Checkpoint::open(out);
  const std::string expert = "model.layers.3.mlp.experts.1.up_proj.weight";
  EXPECT_LE(check_quantized(quantized, prefix_of(expert), io::load_f32(source, expert), 32), 0.5 + 1e-6);
  const Json config = Json::parse(read_file(out + "/config.json"));
  const Json& weights = *config.find("quantization_config")->find("config_groups")->find("group_0")->find("weights");
  EXPECT_EQ(weights.find("group_size")->as_int(), 32);
}

TEST(Quantize, OverwriteReplacesAPreviousRunsShards) {
  ScratchDir scratch;
  const std::string model = scratch.file("fp8"), out = scratch.file("w4a8");
  write_fp8_checkpoint(model);
  ASSERT_EQ(quantize({"--model", model, "--out", out, "--method", "w4a8", "--max-shard-size", "20000"}), 0);
  ASSERT_EQ(quantize({"--model", model, "--out", out, "--method", "w4a8", "--overwrite"}), 0);
  EXPECT_FALSE(fs::exists(out + "/model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(out + "/model-00001-of-00002.safetensors"));
  EXPECT_EQ(io::Checkpoint::open(out).names().size(), 6u);
}

TEST(Quantize, RefusesWhatItCannotHonourBeforeWritingAnything) {
  ScratchDir scratch;
  const std::string model = source_path("models/dsv3-tiny"), out = scratch.file("w4a8");
  auto refuses = [&](std::vector<std::string> extra, const std::string& message) {
    SCOPED_TRACE(message);
    std::vector<std::string> args{"--model", model, "--out", out};
    args.insert(args.end(), extra.begin(), extra.end());
    EXPECT_THAT([&] { quantize(args); }, ThrowsMessage<Error>(HasSubstr(message)));
    EXPECT_FALSE(fs::exists(out));
  };
  refuses({"--method", "w4a8", "--awq"}, "--awq needs --calib FILE");
  refuses({"--method", "w4a8", "--calib", "prompts.jsonl"}, "--calib is for --awq");
  refuses({"--method", "w4a8", "--awq", "--calib", scratch.file("missing.jsonl")}, "missing.jsonl: no such file");
  write_file(scratch.file("empty.jsonl"), "\n\n");
  refuses({"--method", "w4a8", "--awq", "--calib", scratch.file("empty.jsonl")}, "holds no text to calibrate on");
  write_file(scratch.file("numbers.jsonl"), "{\"text\": \"hello\"}\n[1, 2]\n");
  refuses({"--method", "w4a8", "--awq", "--calib", scratch.file("numbers.jsonl")},
          "numbers.jsonl:2: expected a JSON object");
  write_file(scratch.file("fields.jsonl"), "{\"answer\": \"3\"}\n");
  refuses({"--method", "w4a8", "--awq", "--calib", scratch.file("fields.jsonl")},
          "fields.jsonl:1: expected a string \"text\" or \"prompt\", or an array \"messages\"");
  write_file(scratch.file("broken.jsonl"), "{\"text\": \n");
  refuses({"--method", "w4a8", "--awq", "--calib", scratch.file("broken.jsonl")}, "broken.jsonl:1: ");
  refuses({"--method", "w4a8", "--awq", "--calib", scratch.file("fields.jsonl"), "--calib-rows", "0"},
          "--calib-rows must be positive");
  refuses({"--method", "gptq"}, "--method 'gptq' is not supported (accepted: w4a8)");
  refuses({"--method", "w4a8", "--group-size", "12"}, "--group-size must be a positive multiple of 8");
  refuses({"--method", "w4a8", "--group-size", "0"}, "--group-size must be a positive multiple of 8");
  // gate and up have K = 256, down K = 128.
  refuses({"--method", "w4a8", "--group-size", "256"},
          "down_proj.weight: K = 128 is not a multiple of the group size 256");
  EXPECT_THROW(quantize({"--model", model, "--out", out}), Error);  // --method is required

  fs::create_directories(out);
  write_file(out + "/notes.txt", "mine");
  EXPECT_THAT([&] { quantize({"--model", model, "--out", out, "--method", "w4a8"}); },
              ThrowsMessage<Error>(HasSubstr("exists and is not empty (give --overwrite")));
  EXPECT_EQ(read_file(out + "/notes.txt"), "mine");
}

// --awq on the bundled model, calibrated on the first texts of bench/data's file (and a "messages" line,
// rendered with the chat template): every expert's gate and up get one pre_quant_scale, positive and
// finite, down none; gate is stored divided by it; the search's record says AWQ never lost to round to
// nearest; and the checkpoint loads and runs close to the bf16 model.
TEST(Quantize, AwqGivesEveryExpertPositiveFactorsThatNeverLoseToRoundToNearest) {
  ScratchDir scratch;
  const std::string model = source_path("models/dsv3-tiny"), out = scratch.file("awq");
  const std::string calib = scratch.file("calib.jsonl");
  std::string lines;
  int count = 0;
  for (const std::string& line : split(read_file(source_path("bench/data/awq_calib_dsv3-tiny.jsonl")), '\n'))
    if (!line.empty() && count++ < 24) lines += line + "\n";
  lines += R"({"messages": [{"role": "user", "content": "12+34"}]})" "\n";
  write_file(calib, lines);
  ASSERT_EQ(quantize({"--model", model, "--out", out, "--method", "w4a8", "--awq", "--calib", calib}), 0);

  const io::Checkpoint source = io::Checkpoint::open(model);
  const io::Checkpoint quantized = io::Checkpoint::open(out);
  int experts = 0;
  for (const std::string& name : source.names()) {
    if (!is_routed_expert_weight(name) || !name.ends_with("gate_proj.weight")) continue;
    SCOPED_TRACE(name);
    ++experts;
    const std::string gate = prefix_of(name), expert = gate.substr(0, gate.size() - 9);  // "...experts.E."
    ASSERT_TRUE(quantized.contains(gate + ".pre_quant_scale"));
    const Tensor factors = quantized.tensor(gate + ".pre_quant_scale");
    EXPECT_EQ(factors.dtype(), DType::kF32);
    ASSERT_EQ(factors.shape(), Shape{256});
    EXPECT_TRUE(same_bytes(factors, quantized.tensor(expert + "up_proj.pre_quant_scale")));
    EXPECT_FALSE(quantized.contains(expert + "down_proj.pre_quant_scale"));  // folded into up
    for (int64_t k = 0; k < 256; ++k) {
      const float p = factors.data<float>()[k];
      ASSERT_TRUE(p > 0.0f && std::isfinite(p)) << k << ": " << p;
    }
    Tensor expected = io::load_f32(source, name);  // gate / p, column by column
    for (int64_t n = 0; n < expected.dim(0); ++n)
      for (int64_t k = 0; k < 256; ++k) expected.data<float>()[n * 256 + k] /= factors.data<float>()[k];
    EXPECT_LE(check_quantized(quantized, gate, expected, 128), 0.5 + 1e-6);
  }
  EXPECT_EQ(experts, 5 * 8);

  const Json config = Json::parse(read_file(out + "/config.json"));
  const Json& record = *config.find("quantization_config")->find("dsinfer_awq");
  EXPECT_EQ(record.find("calibration_texts")->as_int(), 25);
  EXPECT_EQ(record.find("experts")->as_int(), 40);
  EXPECT_GT(record.find("experts_calibrated")->as_int(), 30);
  for (const auto& [layer, errors] : record.find("layers")->as_object()) {
    SCOPED_TRACE("layer " + layer);
    const double rtn = errors.find("rtn_error")->as_double(), awq = errors.find("awq_error")->as_double();
    EXPECT_GT(rtn, 0.0);
    EXPECT_LE(awq, rtn);
  }
  // The compressed-tensors block itself is the documented one.
  Json block = *config.find("quantization_config");
  std::erase_if(block.as_object(), [](const Json::Member& member) { return member.first == "dsinfer_awq"; });
  EXPECT_EQ(block, Json::parse(kDocumentedConfig));

  // It runs, and near the bf16 model: the same greedy answer to a calibration-free prompt.
  auto cpu = backend::make_backend("cpu");
  const std::vector<int32_t> prompt = {0, 3, 662, 286, 391, 98, 357, 869, 5542, 102, 1017, 369, 22, 29, 4};
  auto last_logits = [&](const std::string& dir) {
    auto loaded = model::DeepseekModel::load(dir, *cpu);
    model::LatentCache cache = loaded->make_cache(1);
    model::BatchBuilder batch;
    batch.add(prompt, 0, {0}, model::LogitRows::kLast);
    return loaded->forward(batch.build(), cache).logits;  // [1, vocab]
  };
  const Tensor reference = last_logits(model), awq = last_logits(out);
  const float* want = reference.data<float>();
  const float* got = awq.data<float>();
  const int64_t vocab = reference.dim(1);
  EXPECT_EQ(std::max_element(got, got + vocab) - got, std::max_element(want, want + vocab) - want);
}

// An FP8 source (the test fixture's DeepSeek-FP8 twin: 128 x 128 block scales, hidden 128, I = 64) runs
// for the calibration as it is, and its experts are dequantized, scaled and rounded like a BF16 one's.
TEST(Quantize, AwqCalibratesAnFp8CheckpointAsItIsStored) {
  ScratchDir scratch;
  const std::string model = source_path("tests/fixtures/models/v3-tiny-fp8"), out = scratch.file("awq");
  const std::string calib = scratch.file("calib.jsonl");
  write_file(calib, R"({"text": "The quick brown fox jumps over the lazy dog, again and again, 1 2 3 4 5."})" "\n"
                    R"({"prompt": "Pack my box with five dozen liquor jugs; how vexingly quick daft zebras jump!"})" "\n");
  ASSERT_EQ(quantize({"--model", model, "--out", out, "--method", "w4a8", "--group-size", "32", "--awq", "--calib",
                      calib}),
            0);
  const io::Checkpoint quantized = io::Checkpoint::open(out);
  const std::string expert = "model.layers.1.mlp.experts.0.";
  ASSERT_TRUE(quantized.contains(expert + "gate_proj.pre_quant_scale"));
  EXPECT_EQ(quantized.tensor(expert + "gate_proj.pre_quant_scale").shape(), Shape{128});
  EXPECT_FALSE(quantized.contains(expert + "gate_proj.weight_scale_inv"));
  const Json config = Json::parse(read_file(out + "/config.json"));
  const Json& record = *config.find("quantization_config")->find("dsinfer_awq");
  EXPECT_GT(record.find("experts_calibrated")->as_int(), 0);
  for (const auto& [layer, errors] : record.find("layers")->as_object())
    EXPECT_LE(errors.find("awq_error")->as_double(), errors.find("rtn_error")->as_double()) << "layer " << layer;
  auto cpu = backend::make_backend("cpu");
  auto loaded = model::DeepseekModel::load(out, *cpu);
  model::LatentCache cache = loaded->make_cache(1);
  model::BatchBuilder batch;
  batch.add(std::vector<int32_t>{1, 2, 3, 4}, 0, {0}, model::LogitRows::kLast);
  const Tensor logits = loaded->forward(batch.build(), cache).logits;
  for (int64_t i = 0; i < logits.numel(); ++i) ASSERT_TRUE(std::isfinite(logits.data<float>()[i])) << i;
}

TEST(Quantize, RefusesInputsThatAreNotACheckpointToQuantize) {
  ScratchDir scratch;
  const std::string out = scratch.file("w4a8");
  auto refuses = [&](const std::string& model, const std::string& message) {
    SCOPED_TRACE(message);
    EXPECT_THAT([&] { quantize({"--model", model, "--out", out, "--method", "w4a8"}); },
                ThrowsMessage<Error>(HasSubstr(message)));
    EXPECT_FALSE(fs::exists(out));
  };
  refuses(scratch.file("missing"), "does not exist or is not a directory");

  const std::string empty = scratch.file("empty");
  fs::create_directories(empty);
  refuses(empty, "config.json is missing");

  write_file(empty + "/config.json", "{}");
  refuses(empty, "no safetensors files");

  const std::string no_experts = scratch.file("dense");
  fs::create_directories(no_experts);
  write_file(no_experts + "/config.json", "{}");
  io::write_safetensors(no_experts + "/model.safetensors",
                        {{"model.layers.0.mlp.gate_proj.weight", io::test_util::make_tensor(DType::kBF16, {8, 8}, {})},
                         {"model.layers.1.mlp.shared_experts.up_proj.weight",
                          io::test_util::make_tensor(DType::kBF16, {8, 8}, {})}});
  refuses(no_experts, "no routed-expert weights");

  const std::string quantized = scratch.file("quantized");
  fs::create_directories(quantized);
  write_file(quantized + "/config.json", R"({"quantization_config": {"quant_method": "compressed-tensors"}})");
  refuses(quantized, "quant_method is \"compressed-tensors\"");

  const std::string fp8 = scratch.file("fp8");
  write_fp8_checkpoint(fp8);
  write_file(fp8 + "/config.json",
             R"({"quantization_config": {"quant_method": "fp8", "weight_block_size": [64, 64]}})");
  refuses(fp8, "only [128, 128] is read");

  const std::string bad_json = scratch.file("bad_json");
  fs::create_directories(bad_json);
  write_file(bad_json + "/config.json", "{");
  refuses(bad_json, "config.json: JSON parse error");

  const std::string inside = scratch.file("fp8_inside");
  write_fp8_checkpoint(inside);
  EXPECT_THAT([&] { quantize({"--model", inside, "--out", inside + "/w4a8", "--method", "w4a8"}); },
              ThrowsMessage<Error>(HasSubstr("is the --model directory or lies inside it")));
  EXPECT_THAT([&] { quantize({"--model", inside, "--out", inside, "--method", "w4a8", "--overwrite"}); },
              ThrowsMessage<Error>(HasSubstr("is the --model directory or lies inside it")));
  EXPECT_TRUE(fs::exists(inside + "/model.safetensors"));
}

}  // namespace
}  // namespace dsinfer::cli
