// dsinfer eval: held-out accuracy of a model on checkable tasks, through the engine.
#include <cstdio>
#include <string>

#include "cli/flags.h"
#include "cli/verbs.h"
#include "backend/make_backend.h"
#include "core/json.h"
#include "runtime/evaluation.h"

namespace dsinfer::cli {

int run_eval(int argc, char** argv) {
  Flags flags("dsinfer eval --model DIR --task TASK [flags]",
              "Exact-match accuracy on held-out problems (DIR/eval/TASK.jsonl), run through the serving engine; "
              "--task mtp measures the MTP module's next-next-token accuracy instead.");
  flags.add_string("model", "DIR", "model directory with an eval/ folder", true);
  flags.add_string("task", "TASK", "arith, sort, count, copy, reverse, or mtp", true);
  flags.add_int("num", "problems to run (from the start of the file)", 1000);
  flags.add_string("data", "FILE", "the task file (default DIR/eval/TASK.jsonl; DIR/eval/mtp_text.jsonl for mtp)");
  flags.add_int("max-new-tokens", "tokens per answer at most", 768);
  flags.add_int("max-num-seqs", "problems in flight at once", 64);
  flags.add_string("device", "DEVICE", "where to run: cpu, cuda or cuda:N", false, "cpu");
  flags.add_bool("json", "print the result as JSON");
  if (!flags.parse(argc, argv)) return 0;
  std::string device = flags.get_string("device");
  DSINFER_CHECK(backend::backend_built(device), "--device ", device, " is not available in this build");
  std::string dir = flags.get_string("model"), task = flags.get_string("task");
  DSINFER_CHECK(flags.get_int("num") > 0, "--num must be positive");
  std::string path = flags.has("data") ? flags.get_string("data")
                                       : dir + "/eval/" + (task == "mtp" ? "mtp_text" : task) + ".jsonl";

  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(dir);
  auto backend = backend::make_backend(device);
  auto model = model::DeepseekModel::load(dir, *backend);
  Json out;
  out["model"] = dir;
  out["task"] = task;
  if (task == "mtp") {
    runtime::MtpResult result = runtime::evaluate_mtp(*model, tokenizer, path, flags.get_int("num"));
    out["positions"] = result.positions;
    out["accuracy"] = result.accuracy();
    out["completion_positions"] = result.completion_positions;
    out["completion_accuracy"] = result.completion_accuracy();
    if (!flags.get_bool("json"))
      std::printf("MTP next-next-token top-1 accuracy: %.4f over %ld positions (%.4f over %ld in answers)\n",
                  result.accuracy(), static_cast<long>(result.positions), result.completion_accuracy(),
                  static_cast<long>(result.completion_positions));
  } else {
    runtime::EngineConfig config;
    config.max_num_seqs = flags.get_int("max-num-seqs");
    config.max_num_batched_tokens = 4096;
    runtime::Engine engine(*model, tokenizer, config);
    runtime::TaskResult result =
        runtime::evaluate_task(engine, tokenizer, path, flags.get_int("num"), flags.get_int("max-new-tokens"));
    out["problems"] = result.problems;
    out["correct"] = result.correct;
    out["accuracy"] = result.accuracy();
    out["seconds"] = result.seconds;
    out["generated_tokens_per_s"] = result.seconds > 0 ? result.generated_tokens / result.seconds : 0.0;
    if (!flags.get_bool("json")) {
      std::printf("%s: %ld/%ld correct, exact-match accuracy %.4f (%.1f s, %.0f generated tokens/s)\n", task.c_str(),
                  static_cast<long>(result.correct), static_cast<long>(result.problems), result.accuracy(),
                  result.seconds, result.seconds > 0 ? result.generated_tokens / result.seconds : 0.0);
      for (const std::string& failure : result.failures) std::printf("  wrong: %s\n", failure.c_str());
    }
  }
  if (flags.get_bool("json")) std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace dsinfer::cli
