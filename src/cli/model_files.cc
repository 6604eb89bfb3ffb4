#include "cli/model_files.h"

#include "core/error.h"
#include "core/file.h"
#include "core/json.h"

namespace dsinfer::cli {

chat::ChatTemplate load_chat_template(const std::string& dir) {
  std::string path = dir + "/tokenizer_config.json";
  Json config;
  try {
    config = Json::parse(read_file(path));
  } catch (const Error& error) {
    throw Error(str_cat(path, ": ", error.what()));
  }
  return chat::ChatTemplate::from_tokenizer_config(config, path);
}

void add_model_flags(Flags& flags) {
  flags.add_string("load-format", "FORMAT",
                   "auto: the checkpoint in --model; dummy: random weights of the config's real shapes, made on the "
                   "device (benchmarks; the directory then needs only config.json and the tokenizer files)",
                   false, "auto");
  flags.add_int("num-layers", "keep only the first N decoder layers (the real widths of a model too big for the GPU)");
  flags.add_int("cuda-graph-max-bs", "GPU: decode steps of up to this many sequences replay CUDA graphs", 256);
  flags.add_bool("enforce-eager", "GPU: no CUDA graphs; every step launches op by op (also --disable-cuda-graph)");
  flags.add_bool("disable-cuda-graph", "the same as --enforce-eager (SGLang's spelling)");
  flags.add_bool("disable-overlap-schedule", "GPU: plan each step after the previous one's tokens are back, instead "
                 "of while the device runs it (SGLang's spelling)");
  add_kv_cache_dtype_flag(flags);
}

void add_kv_cache_dtype_flag(Flags& flags) {
  flags.add_string("kv-cache-dtype", "DTYPE",
                   "the KV cache's rows: auto (or bfloat16: the compute dtype, bfloat16 on the GPU, float32 on the CPU), "
                   "fp8 (or fp8_e4m3: every value in e4m3, one scale) or fp8_ds_mla (DeepSeek V3.2's 656-byte rows: "
                   "e4m3 latent in tiles of 128 with their scales, bf16 rope); on the GPU: auto or fp8 (fp8_ds_mla runs on the CPU "
                   "only so far: issue 9's second half brings it)",
                   false, "auto");
}

model::CacheFormat kv_cache_format(const Flags& flags) {
  return model::parse_cache_format(flags.get_string("kv-cache-dtype"));
}

int64_t cuda_graph_max_batch(const Flags& flags) {
  if (flags.get_bool("enforce-eager") || flags.get_bool("disable-cuda-graph")) return 0;
  int64_t max_batch = flags.get_int("cuda-graph-max-bs");
  DSINFER_CHECK(max_batch >= 0 && max_batch <= 4096, "--cuda-graph-max-bs must be in [0, 4096] (0: no graphs), got ",
                max_batch);
  return max_batch;
}

model::ModelOptions model_options(const Flags& flags) {
  model::ModelOptions options;
  std::string format = flags.get_string("load-format");
  DSINFER_CHECK(format == "auto" || format == "dummy", "--load-format ", format, " is not known (auto, dummy)");
  if (format == "dummy") options.load_format = model::LoadFormat::kDummy;
  if (flags.has("num-layers")) {
    DSINFER_CHECK(flags.get_int("num-layers") >= 1, "--num-layers must be at least 1");
    options.num_layers = flags.get_int("num-layers");
  }
  options.cache_format = kv_cache_format(flags);
  return options;
}

}  // namespace dsinfer::cli
