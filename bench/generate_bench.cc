// Single-sequence generation speed: prefill tokens/s and decode tokens/s of one request through the
// Engine (what `dsinfer generate` runs), greedy, stop tokens ignored.
//
//   build/bench/generate_bench --model tests/fixtures/models/v3-tiny [--prompt 64] [--new 128]
//       [--threads N] [--anchor bench/results/hf_generate_v3-tiny.json] [--out FILE]
// The anchor, when given, is Hugging Face transformers on the same model, prompt and machine
// (tools/bench_hf_generate.py).
#include <algorithm>
#include <cstdio>
#include <vector>

#include "bench/result_file.h"
#include "cli/flags.h"
#include "core/file.h"
#include "core/parallel.h"
#include "backend/make_backend.h"
#include "runtime/completion.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::bench {
namespace {

int run(int argc, char** argv) {
  cli::Flags flags("generate_bench --model DIR [flags]", "Prefill and decode tokens/s of one sequence.");
  flags.add_string("model", "DIR", "model directory", true);
  flags.add_int("prompt", "prompt tokens", 64);
  flags.add_int("new", "new tokens", 128);
  flags.add_int("runs", "timed runs (the median is reported)", 5);
  flags.add_int("threads", "CPU threads (0: all)", 0);
  flags.add_string("device", "DEVICE", "cpu, cuda or cuda:N", false, "cpu");
  flags.add_string("anchor", "FILE", "JSON from tools/bench_hf_generate.py to compare with");
  flags.add_string("out", "FILE", "result JSON (default bench/results/generate_<model>.json)");
  if (!flags.parse(argc - 1, argv + 1)) return 0;
  if (flags.get_int("threads") > 0) set_num_threads(static_cast<int>(flags.get_int("threads")));
  std::string dir = flags.get_string("model");
  std::string name = dir.substr(dir.find_last_of('/') + 1);

  auto backend = backend::make_backend(flags.get_string("device"));
  auto model = model::DeepseekModel::load(dir, *backend);
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(dir);
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < flags.get_int("prompt"); ++i)
    prompt.push_back(static_cast<int32_t>(3 + (i * 7919) % (model->config().vocab_size - 3)));
  int64_t new_tokens = flags.get_int("new");
  runtime::Engine engine(*model, tokenizer,
                         runtime::offline_engine_config(1, static_cast<int64_t>(prompt.size()), new_tokens));
  runtime::RequestOptions options;
  options.max_tokens = new_tokens;
  options.sampling.temperature = 0.0f;
  options.ignore_eos = true;
  runtime::complete_request(engine, prompt, options);  // warm-up
  std::vector<double> prefill, decode;
  for (int64_t run = 0; run < flags.get_int("runs"); ++run) {
    runtime::Completion result = runtime::complete_request(engine, prompt, options);
    prefill.push_back(static_cast<double>(prompt.size()) / result.first_token_seconds);
    decode.push_back(static_cast<double>(result.tokens.size() - 1) / result.decode_seconds);
  }
  auto median = [](std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
  };
  double prefill_rate = median(prefill), decode_rate = median(decode);
  std::printf("%s: prefill %.0f tokens/s, decode %.1f tokens/s (%d threads)\n", name.c_str(), prefill_rate,
              decode_rate, num_threads());

  Json result;
  result["benchmark"] = flags.get_string("device") == "cpu" ? "generate_cpu" : "generate_gpu";
  if (flags.get_string("device") != "cpu") result["device"] = backend::describe_device(flags.get_string("device"));
  Json config;
  config["model"] = dir;
  config["prompt_tokens"] = flags.get_int("prompt");
  config["new_tokens"] = flags.get_int("new");
  config["threads"] = num_threads();
  config["device"] = flags.get_string("device");
  config["sampling"] = "greedy, batch 1";
  result["config"] = config;
  Json figures;
  figures["prefill_tokens_per_s"] = prefill_rate;
  figures["decode_tokens_per_s"] = decode_rate;
  result["figures"] = figures;
  if (flags.has("anchor")) result["anchor"] = Json::parse(read_file(flags.get_string("anchor")));
  write_result(flags.has("out") ? flags.get_string("out") : "bench/results/generate_" + name + ".json", result);
  return 0;
}

}  // namespace
}  // namespace dsinfer::bench

int main(int argc, char** argv) {
  return dsinfer::bench::run_benchmark("generate_bench", dsinfer::bench::run, argc, argv);
}
