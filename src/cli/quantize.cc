// dsinfer quantize: a Hugging Face DeepSeek-V3-style checkpoint (BF16, or DeepSeek's FP8 with 128 x 128
// weight_scale_inv blocks) to the W4A8 checkpoint of docs/w4a8.md. Routed-expert weights become
// compressed-tensors' pack-quantized int4 (io/int4_pack.h: round to nearest, one BF16 scale per group
// of columns); every other tensor and file is copied as it is; config.json gets the matching
// quantization_config. With --awq (awq_search.h), every expert's int4 rounding is preceded by AWQ's
// scaling, searched on the rows the expert sees when the model runs over --calib's texts
// (awq_calibration.h): its gate and up projections get a P.pre_quant_scale, and its down
// projection's factors are folded into up's rows.
//
// A full V3 is 700 GB, so nothing holds the model: the input is mmap'd, copied tensors are written
// straight from the mapping, and output shards (up to --max-shard-size of tensors each, planned from
// the stored shapes before anything is read) are written one at a time, so memory holds at most one
// shard's quantized experts. Output shards are planned by size rather than mirroring the input's,
// which lets any layout io::Checkpoint reads (one file, an index, bare *.safetensors) go through its
// public view alone.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/make_backend.h"
#include "cli/awq_calibration.h"
#include "cli/awq_search.h"
#include "cli/flags.h"
#include "cli/verbs.h"
#include "core/error.h"
#include "core/file.h"
#include "core/json.h"
#include "core/log.h"
#include "core/strings.h"
#include "io/checkpoint.h"
#include "io/int4_pack.h"
#include "io/safetensors_writer.h"
#include "io/weight_format.h"

namespace dsinfer::cli {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kIndexName = "model.safetensors.index.json";
constexpr std::string_view kScaleInvSuffix = "_scale_inv";  // P.weight -> P.weight_scale_inv
// DeepSeek's FP8 block, and the only one the output may keep for the weights it copies (docs/w4a8.md).
constexpr int kFp8Block = 128;
constexpr DType kScaleDtype = DType::kBF16;
constexpr int kValuesPerWord = 8;

// A routed expert's weight by its parts: model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight.
struct ExpertWeightName {
  int64_t layer = 0, expert = 0;
  std::string projection;  // gate_proj, up_proj or down_proj
  std::string expert_prefix() const { return str_cat("model.layers.", layer, ".mlp.experts.", expert, "."); }
};

// L and E decimal: a routed expert's weight, the MTP layer's included. Shared experts
// (mlp.shared_experts.*) and dense MLPs do not match.
std::optional<ExpertWeightName> routed_expert_weight(std::string_view name) {
  const std::vector<std::string> parts = split(name, '.');
  auto is_number = [](const std::string& part) {
    return !part.empty() && part.size() < 10 &&
           std::ranges::all_of(part, [](unsigned char c) { return std::isdigit(c) != 0; });
  };
  if (parts.size() == 8 && parts[0] == "model" && parts[1] == "layers" && is_number(parts[2]) &&
      parts[3] == "mlp" && parts[4] == "experts" && is_number(parts[5]) &&
      (parts[6] == "gate_proj" || parts[6] == "up_proj" || parts[6] == "down_proj") && parts[7] == "weight")
    return ExpertWeightName{std::stoll(parts[2]), std::stoll(parts[5]), parts[6]};
  return std::nullopt;
}

bool is_routed_expert_weight(std::string_view name) { return routed_expert_weight(name).has_value(); }

// The input's config.json, its quantization checked: none (BF16) or DeepSeek's FP8 in 128 x 128 blocks.
Json read_source_config(const fs::path& dir) {
  const std::string path = (dir / "config.json").string();
  DSINFER_CHECK(file_exists(path), "--model ", dir.string(),
                ": config.json is missing (expected a Hugging Face checkpoint directory)");
  Json config;
  try {
    config = Json::parse(read_file(path));
  } catch (const Error& error) {
    throw Error(str_cat(path, ": ", error.what()));
  }
  DSINFER_CHECK(config.is_object(), path, ": expected a JSON object");
  const Json* quantization = config.find("quantization_config");
  if (quantization == nullptr || quantization->is_null()) return config;
  const Json* method = quantization->find("quant_method");
  DSINFER_CHECK(method != nullptr && *method == Json("fp8"), path, ": quantization_config.quant_method is ",
                method ? method->dump() : "missing",
                ": quantize reads BF16 checkpoints or DeepSeek's FP8 ones (\"fp8\"), not ones quantized otherwise");
  const Json* block = quantization->find("weight_block_size");
  DSINFER_CHECK(block == nullptr || *block == Json(Json::Array{Json(kFp8Block), Json(kFp8Block)}), path,
                ": quantization_config.weight_block_size is ", block ? block->dump() : "",
                ": the output keeps FP8 weights in 128 x 128 blocks (docs/w4a8.md), so only [128, 128] is read");
  return config;
}

// What a routed-expert weight must pass before anything is written: [N, K] with K a multiple of the
// group size, a float dtype, and for FP8 its block scales.
void check_expert(const io::Checkpoint& checkpoint, const io::TensorInfo& info, int64_t group_size) {
  const std::string where = str_cat(checkpoint.dir(), ": ", info.name);
  DSINFER_CHECK(info.shape.rank() == 2, where, " has shape ", info.shape.to_string(), ", expected [N, K]");
  const int64_t rows = info.shape[0], cols = info.shape[1];
  DSINFER_CHECK(cols % group_size == 0, where, ": K = ", cols, " is not a multiple of the group size ", group_size,
                " (give a --group-size that divides every routed expert's K)");
  if (info.dtype == DType::kF32 || info.dtype == DType::kBF16 || info.dtype == DType::kF16) return;
  DSINFER_CHECK(info.dtype == DType::kF8E4M3, where, ": cannot quantize ", dtype_name(info.dtype),
                " weights (expected BF16, F16, F32 or F8_E4M3)");
  const std::string scale_name = info.name + std::string(kScaleInvSuffix);
  const io::TensorInfo* scale = checkpoint.find(scale_name);
  DSINFER_CHECK(scale != nullptr, where, " is F8_E4M3 but its scale ", scale_name, " is missing");
  const Shape blocks{(rows + kFp8Block - 1) / kFp8Block, (cols + kFp8Block - 1) / kFp8Block};
  DSINFER_CHECK(scale->shape == blocks, where, ": ", scale_name, " has shape ", scale->shape.to_string(),
                ", expected ", blocks.to_string(), " (128 x 128 blocks)");
}

// One input tensor's part of the output: copied as stored, or a routed-expert weight quantized to
// its three tensors.
struct Item {
  std::string name;
  bool quantize = false;
  size_t out_bytes = 0;
};

// --awq's outcome for one expert (awq_search.h): p_in multiplies its input (gate_proj's and up_proj's
// pre_quant_scale), p_down is folded into up's rows and down's columns.
struct ExpertFactors {
  Tensor p_in, p_down;  // [H], [I] f32
};

struct Plan {
  std::vector<std::vector<Item>> shards;
  size_t quantized = 0;  // routed-expert weights
  size_t bytes_in = 0;   // every input tensor, the dropped scales included
};

// Every input tensor in name order, in shards of up to max_shard_bytes (a larger tensor alone). An
// expert's FP8 weight_scale_inv is dropped with the weight it scaled.
Plan plan_output(const io::Checkpoint& checkpoint, int64_t group_size, size_t max_shard_bytes, bool awq) {
  Plan plan;
  size_t shard_bytes = 0;
  for (const std::string& name : checkpoint.names()) {
    const io::TensorInfo& info = checkpoint.info(name);
    plan.bytes_in += info.nbytes;
    if (name.ends_with(kScaleInvSuffix)) {
      const std::string weight = name.substr(0, name.size() - kScaleInvSuffix.size());
      if (is_routed_expert_weight(weight) && checkpoint.contains(weight)) continue;
    }
    Item item{name, is_routed_expert_weight(name), info.nbytes};
    if (item.quantize) {
      check_expert(checkpoint, info, group_size);
      const int64_t rows = info.shape[0], cols = info.shape[1];
      item.out_bytes = static_cast<size_t>(rows * cols / kValuesPerWord * 4 + rows * (cols / group_size) * 2 + 16);
      if (awq && !name.ends_with("down_proj.weight"))
        item.out_bytes += static_cast<size_t>(cols) * 4;  // its pre_quant_scale
      ++plan.quantized;
    }
    if (plan.shards.empty() || (shard_bytes > 0 && shard_bytes + item.out_bytes > max_shard_bytes)) {
      plan.shards.emplace_back();
      shard_bytes = 0;
    }
    shard_bytes += item.out_bytes;
    plan.shards.back().push_back(std::move(item));
  }
  DSINFER_CHECK(plan.quantized > 0, checkpoint.dir(),
                ": no routed-expert weights (model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight) to quantize");
  return plan;
}

// A routed expert's weight [N, K] as float32, FP8 dequantized.
Tensor load_expert(const io::Checkpoint& checkpoint, const std::string& name) {
  return io::load_f32(checkpoint, name, kFp8Block, kFp8Block);
}

// A routed-expert weight P.weight as P.weight_packed, P.weight_scale and P.weight_shape (docs/w4a8.md);
// with AWQ's factors, scaled first (awq_search.h's fold_factors), gate and up with P.pre_quant_scale.
std::vector<io::NamedTensor> quantize_expert(const io::Checkpoint& checkpoint, const std::string& name,
                                             int64_t group_size, const ExpertFactors* factors) {
  Tensor weight = load_expert(checkpoint, name);
  const std::string projection = routed_expert_weight(name)->projection;
  if (factors) {
    if (projection == "gate_proj") weight = scale_weight(weight, Tensor(), factors->p_in);
    if (projection == "up_proj") weight = scale_weight(weight, factors->p_down, factors->p_in);
    if (projection == "down_proj") weight = scale_weight(weight, Tensor(), factors->p_down);
  }
  std::vector<io::NamedTensor> out;
  try {
    out = io::int4_checkpoint_tensors(name, weight, group_size, kScaleDtype);
  } catch (const Error& error) {
    throw Error(str_cat(checkpoint.dir(), ": ", error.what()));
  }
  if (factors && projection != "down_proj")
    out.emplace_back(name.substr(0, name.size() - 7) + ".pre_quant_scale", factors->p_in);  // without ".weight"
  return out;
}

// --awq: the calibration texts' rows per expert, then every expert's search (awq_search.h), before
// anything is written. Returns the factors by expert prefix ("model.layers.L.mlp.experts.E.") and
// fills the summary quantization_config records (per layer, averaged over the layer's experts: the
// relative squared error of the expert's output with RTN and with AWQ on its calibration rows, and
// the alphas; experts the calibration never reached keep p = 1: round to nearest).
std::map<std::string, ExpertFactors> search_awq(const io::Checkpoint& checkpoint, const Plan& plan,
                                                const CalibrationRows& calibration, int64_t group_size,
                                                Json& summary) {
  std::unique_ptr<backend::Backend> cpu = backend::make_backend("cpu");
  const AwqOptions options{group_size};
  std::map<std::string, ExpertFactors> factors;
  struct LayerErrors {
    int64_t experts = 0, calibrated = 0;
    double rtn = 0, awq = 0, gate_up_alpha = 0, down_alpha = 0;
  };
  std::map<int64_t, LayerErrors> layers;
  for (const std::vector<Item>& shard : plan.shards) {
    for (const Item& item : shard) {
      const std::optional<ExpertWeightName> expert = item.quantize ? routed_expert_weight(item.name) : std::nullopt;
      if (!expert || expert->projection != "gate_proj") continue;
      const std::string prefix = expert->expert_prefix();
      for (const char* other : {"up_proj.weight", "down_proj.weight"})
        DSINFER_CHECK(checkpoint.contains(prefix + other), checkpoint.dir(), ": ", item.name, " has no ", prefix,
                      other, " beside it (--awq scales an expert's three projections together)");
      const ExpertWeights weights{load_expert(checkpoint, item.name),
                                  load_expert(checkpoint, prefix + "up_proj.weight"),
                                  load_expert(checkpoint, prefix + "down_proj.weight")};
      LayerErrors& errors = layers[expert->layer];
      ++errors.experts;
      const Tensor* rows = calibration.find(expert->layer, expert->expert);
      if (rows == nullptr) {  // never routed: round to nearest
        auto ones = [](int64_t n) {
          Tensor t = Tensor::empty(DType::kF32, {n});
          std::fill_n(t.data<float>(), n, 1.0f);
          return t;
        };
        factors.emplace(prefix, ExpertFactors{ones(weights.gate.dim(1)), ones(weights.gate.dim(0))});
        continue;
      }
      const ExpertAwq found = search_expert(*cpu, weights, *rows, options);
      ++errors.calibrated;
      errors.rtn += found.rtn_error;
      errors.awq += found.error;
      errors.gate_up_alpha += found.gate_up.alpha;
      errors.down_alpha += found.down.alpha;
      factors.emplace(prefix, ExpertFactors{found.gate_up.factors, found.down.factors});
    }
  }
  Json by_layer = Json::object();
  int64_t calibrated = 0, experts = 0;
  for (const auto& [layer, errors] : layers) {
    experts += errors.experts;
    calibrated += errors.calibrated;
    if (errors.calibrated == 0) continue;
    const double n = static_cast<double>(errors.calibrated);
    Json entry = Json::object();
    entry["experts_calibrated"] = errors.calibrated;
    entry["rtn_error"] = errors.rtn / n;
    entry["awq_error"] = errors.awq / n;
    entry["gate_up_mean_alpha"] = errors.gate_up_alpha / n;
    entry["down_mean_alpha"] = errors.down_alpha / n;
    log_info("AWQ layer ", layer, ": ", errors.calibrated, " of ", errors.experts, " experts calibrated; the experts' "
             "output error ", errors.rtn / n, " (RTN) -> ", errors.awq / n, ", mean alpha ", errors.gate_up_alpha / n,
             " (gate_up), ", errors.down_alpha / n, " (down)");
    by_layer.as_object().emplace_back(std::to_string(layer), std::move(entry));
  }
  summary["experts"] = experts;
  summary["experts_calibrated"] = calibrated;
  summary["grid"] = options.grid;
  summary["layers"] = std::move(by_layer);
  return factors;
}

// --out made ready: created, or empty, or (with overwrite) rid of the safetensors files and index a
// previous run left, which would otherwise join the new checkpoint. Never --model or a folder in it.
void prepare_output_dir(const fs::path& out, const fs::path& model, bool overwrite) {
  const fs::path model_path = fs::canonical(model);
  std::error_code error;
  const fs::path out_path = fs::weakly_canonical(out, error);
  DSINFER_CHECK(!error, "--out ", out.string(), ": ", error.message());
  auto [model_end, out_end] = std::mismatch(model_path.begin(), model_path.end(), out_path.begin(), out_path.end());
  DSINFER_CHECK(model_end != model_path.end(), "--out ", out.string(),
                " is the --model directory or lies inside it: write the quantized checkpoint elsewhere");
  if (fs::exists(out)) {
    DSINFER_CHECK(fs::is_directory(out), "--out ", out.string(), " exists and is not a directory");
    if (!fs::is_empty(out)) {
      DSINFER_CHECK(overwrite, "--out ", out.string(), " exists and is not empty (give --overwrite to write into it)");
      for (const fs::directory_entry& entry : fs::directory_iterator(out))
        if (entry.path().extension() == ".safetensors" || entry.path().filename() == kIndexName)
          fs::remove(entry.path());
    }
  }
  fs::create_directories(out, error);
  DSINFER_CHECK(!error, "--out ", out.string(), ": cannot create the directory (", error.message(), ")");
}

// Every entry of the input directory but its tensors and config.json: the tokenizer files,
// generation_config.json, README, code, folders such as eval/. Hidden entries (.git, .cache) are left
// out: a git clone's .git holds the weights a second time.
void copy_other_files(const fs::path& from, const fs::path& to) {
  for (const fs::directory_entry& entry : fs::directory_iterator(from)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with('.') || name == "config.json" || name == kIndexName ||
        entry.path().extension() == ".safetensors")
      continue;
    std::error_code error;
    fs::copy(entry.path(), to / name, fs::copy_options::recursive | fs::copy_options::overwrite_existing, error);
    DSINFER_CHECK(!error, "cannot copy ", entry.path().string(), " to ", to.string(), " (", error.message(), ")");
  }
}

std::string shard_file_name(size_t shard, size_t shards) {
  if (shards == 1) return "model.safetensors";
  char name[64];
  std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", shard + 1, shards);
  return name;
}

std::string bytes_text(size_t bytes) {  // decimal units, as the Hub lists file sizes
  char text[32];
  if (bytes >= 1000000000)
    std::snprintf(text, sizeof(text), "%.2f GB", static_cast<double>(bytes) / 1e9);
  else if (bytes >= 1000000)
    std::snprintf(text, sizeof(text), "%.1f MB", static_cast<double>(bytes) / 1e6);
  else
    std::snprintf(text, sizeof(text), "%.1f kB", static_cast<double>(bytes) / 1e3);
  return text;
}

}  // namespace

int run_quantize(int argc, char** argv) {
  Flags flags("dsinfer quantize --model DIR --out DIR --method w4a8 [flags]",
              "Writes a W4A8 copy of a checkpoint (docs/w4a8.md): routed-expert weights as int4 in compressed-tensors' "
              "pack-quantized form, rounded to nearest with one BF16 scale per group of columns; every other tensor "
              "and file copied as it is. The input may be BF16 or DeepSeek's FP8 (128 x 128 weight_scale_inv blocks), "
              "whose experts are dequantized first.");
  flags.add_string("model", "DIR", "the Hugging Face checkpoint directory to quantize", true);
  flags.add_string("out", "DIR", "where to write the quantized checkpoint (a new or empty directory)", true);
  flags.add_string("method", "METHOD", "w4a8: int4 routed-expert weights, FP8 activations at run time", true);
  flags.add_int("group-size", "columns sharing one scale: a multiple of 8 that divides every expert's K", 128);
  flags.add_count("max-shard-size", "bytes of tensors per output shard at most (5g, 500m, ...)", 5000000000);
  flags.add_bool("overwrite", "write into a non-empty --out: its *.safetensors and index are replaced");
  flags.add_bool("awq", "activation-aware scaling (AWQ) of every routed expert before rounding, searched on the "
                 "rows it sees over --calib's texts: its gate and up projections get a pre_quant_scale (docs/w4a8.md)");
  flags.add_string("calib", "FILE", "--awq's calibration texts: JSON lines with \"text\" or \"prompt\" (a rendered "
                   "conversation) or \"messages\" (rendered with the model's chat template)");
  flags.add_int("calib-rows", "--awq: input rows kept per expert (a uniform sample) for the search; memory: rows x "
                "hidden x 4 bytes per expert", 8192);
  if (!flags.parse(argc, argv)) return 0;

  const bool awq = flags.get_bool("awq");
  DSINFER_CHECK(!awq || flags.has("calib"), "--awq needs --calib FILE: the texts whose activations the scales are "
                "searched on (JSON lines, e.g. bench/data/awq_calib_dsv3-tiny.jsonl for the bundled model)");
  DSINFER_CHECK(awq || !flags.has("calib"), "--calib is for --awq: give --awq too, or leave --calib out");
  DSINFER_CHECK(flags.get_int("calib-rows") > 0, "--calib-rows must be positive, got ", flags.get_int("calib-rows"));
  const std::string method = flags.get_string("method");
  DSINFER_CHECK(method == "w4a8", "--method '", method, "' is not supported (accepted: w4a8)");
  const int64_t group_size = flags.get_int("group-size");
  DSINFER_CHECK(group_size > 0 && group_size % kValuesPerWord == 0, "--group-size must be a positive multiple of 8 ",
                "(eight values fill one packed word), got ", group_size);
  const int64_t max_shard_bytes = flags.get_int("max-shard-size");
  DSINFER_CHECK(max_shard_bytes > 0, "--max-shard-size must be positive, got ", max_shard_bytes);
  const fs::path model_dir = flags.get_string("model"), out_dir = flags.get_string("out");
  DSINFER_CHECK(fs::is_directory(model_dir), "--model ", model_dir.string(), " does not exist or is not a directory");

  const auto start = std::chrono::steady_clock::now();
  Json config = read_source_config(model_dir);
  const io::Checkpoint checkpoint = io::Checkpoint::open(model_dir.string());
  const Plan plan = plan_output(checkpoint, group_size, static_cast<size_t>(max_shard_bytes), awq);
  std::map<std::string, ExpertFactors> awq_factors;
  Json awq_summary = Json::object();
  if (awq) {  // before anything is written: a bad --calib file or a failed run leaves no output
    const std::string calib = flags.get_string("calib");
    const std::vector<std::vector<int32_t>> texts = read_calibration_texts(calib, model_dir.string());
    const CalibrationRows calibration =
        collect_calibration_rows(model_dir.string(), texts, flags.get_int("calib-rows"));
    log_info("AWQ: ", texts.size(), " calibration texts, ", calibration.tokens, " tokens, ",
             calibration.rows.size(), " experts reached");
    awq_summary["calibration"] = fs::path(calib).filename().string();
    awq_summary["calibration_texts"] = static_cast<int64_t>(texts.size());
    awq_summary["calibration_tokens"] = calibration.tokens;
    awq_summary["rows_per_expert"] = flags.get_int("calib-rows");
    awq_factors = search_awq(checkpoint, plan, calibration, group_size, awq_summary);
  }
  prepare_output_dir(out_dir, model_dir, flags.get_bool("overwrite"));

  Json weight_map = Json::object();  // filled by appending: a V3 has 150k names, and operator[] looks up linearly
  size_t bytes_out = 0;
  for (size_t shard = 0; shard < plan.shards.size(); ++shard) {
    const std::string file = shard_file_name(shard, plan.shards.size());
    std::vector<io::NamedTensor> tensors;  // copies view the input's mapping; quantized experts are ours
    size_t quantized = 0;
    for (const Item& item : plan.shards[shard]) {
      if (!item.quantize) {
        tensors.emplace_back(item.name, checkpoint.tensor(item.name));
        continue;
      }
      const ExpertFactors* factors = nullptr;
      if (awq) {
        auto found = awq_factors.find(routed_expert_weight(item.name)->expert_prefix());
        DSINFER_CHECK(found != awq_factors.end(), checkpoint.dir(), ": ", item.name, " has no gate_proj.weight beside "
                      "it (--awq scales an expert's three projections together)");
        factors = &found->second;
      }
      for (io::NamedTensor& tensor : quantize_expert(checkpoint, item.name, group_size, factors))
        tensors.push_back(std::move(tensor));
      ++quantized;
    }
    size_t shard_bytes = 0;
    for (const auto& [name, tensor] : tensors) {
      weight_map.as_object().emplace_back(name, file);
      shard_bytes += tensor.nbytes();
    }
    io::write_safetensors((out_dir / file).string(), tensors, {{"format", "pt"}});
    bytes_out += shard_bytes;
    log_info("quantize: wrote ", file, " (", bytes_text(shard_bytes), ", ", quantized, " expert weights quantized)");
  }
  if (plan.shards.size() > 1) {
    Json index = Json::object();
    index["metadata"]["total_size"] = static_cast<int64_t>(bytes_out);
    index["weight_map"] = std::move(weight_map);
    write_file((out_dir / kIndexName).string(), index.dump(2) + "\n");
  }
  copy_other_files(model_dir, out_dir);
  // Last, so that a run stopped half-way leaves a directory no loader mistakes for a checkpoint.
  config["quantization_config"] = io::int4_quantization_config(group_size);
  if (awq) {
    // A dsinfer extension, for the record (the loader goes by the pre_quant_scale tensors): what the
    // search saw and how much it gained over round to nearest.
    awq_summary["pre_quant_scale"] = "routed experts' gate_proj and up_proj: their input times it (docs/w4a8.md)";
    config["quantization_config"]["dsinfer_awq"] = std::move(awq_summary);
  }
  write_file((out_dir / "config.json").string(), config.dump(2) + "\n");

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("quantized %zu routed-expert weights to int4 (group %ld%s) in %.1f s: %s of tensors in, %s out, "
              "%zu shard%s in %s\n",
              plan.quantized, static_cast<long>(group_size), awq ? ", AWQ" : "", seconds, bytes_text(plan.bytes_in).c_str(),
              bytes_text(bytes_out).c_str(), plan.shards.size(), plan.shards.size() == 1 ? "" : "s",
              out_dir.string().c_str());
  return 0;
}

}  // namespace dsinfer::cli
