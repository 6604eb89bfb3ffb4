// dsinfer eval: held-out accuracy of a model on checkable tasks, through the engine.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "cli/model_files.h"
#include "cli/parallel_flags.h"
#include "cli/served_model.h"
#include "cli/speculative_flags.h"
#include "cli/verbs.h"
#include "core/json.h"
#include "runtime/evaluation.h"
#include "openai/tool_call_parser.h"

namespace dsinfer::cli {
namespace {

std::string without_spaces(std::string text) {
  std::erase_if(text, [](unsigned char c) { return std::isspace(c) != 0; });
  return text;
}

// Rows with a "tool_call" (DIR/eval/tool.jsonl): right when the answer after </think> is exactly
// one call, read as `serve --tool-call-parser deepseek_v3` reads it with the row's tools offered,
// of tool_call.name with the arguments tool_call.arguments. String values are compared without
// white space: "12*(3+4)" and "12 * (3 + 4)" are the same expression to a calculator.
bool tool_call_matches(const Json& row, const std::string& completion) {
  const Json* expected = row.find("tool_call");
  const Json* name = expected ? expected->find("name") : nullptr;
  const Json* arguments = expected ? expected->find("arguments") : nullptr;
  DSINFER_CHECK(name && name->is_string() && arguments && arguments->is_object(),
                "a tool task row needs \"tool_call\": {\"name\": \"...\", \"arguments\": {...}}");
  std::vector<std::string> offered;
  if (const Json* tools = row.find("tools"); tools && tools->is_array())
    for (const Json& tool : tools->as_array())
      if (const Json* function = tool.find("function"))
        if (const Json* offered_name = function->find("name"); offered_name && offered_name->is_string())
          offered.push_back(offered_name->as_string());
  server::ToolCallParse parse = server::ToolCallParser("deepseek_v3", offered).parse(runtime::final_answer(completion));
  if (!parse.error.empty() || parse.calls.size() != 1 || parse.calls[0].name != name->as_string()) return false;
  Json got = Json::parse(parse.calls[0].arguments);  // the parser has checked that it is a JSON object
  if (got.size() != arguments->size()) return false;
  return std::ranges::all_of(arguments->as_object(), [&](const Json::Member& member) {
    const Json* value = got.find(member.first);
    if (value == nullptr) return false;
    if (value->is_string() && member.second.is_string())
      return without_spaces(value->as_string()) == without_spaces(member.second.as_string());
    return *value == member.second;
  });
}

}  // namespace

int run_eval(int argc, char** argv) {
  Flags flags("dsinfer eval --model DIR --task TASK [flags]",
              "Exact-match accuracy on held-out problems (DIR/eval/TASK.jsonl), run through the serving engine; "
              "--task tool scores the first turn's tool call instead (one valid call of the right tool with the "
              "right arguments); --task mtp measures the MTP module's next-next-token accuracy; --task kv_kl "
              "measures how far --kv-cache-dtype moves the next-token distributions from the compute-dtype cache's "
              "(KL divergence, teacher-forced over DIR/eval/mtp_text.jsonl's conversations); --task kl does the same "
              "against --reference-model's (another checkpoint of the model, e.g. the bf16 one a W4A8 copy came "
              "from), with or without --kv-cache-dtype.");
  flags.add_string("model", "DIR", "model directory with an eval/ folder", true);
  flags.add_string("task", "TASK", "arith, sort, count, copy, reverse, tool, tool_answer, no_tool, mtp, kv_kl or kl",
                   true);
  flags.add_string("reference-model", "DIR", "--task kl: the checkpoint to compare with (compute-dtype cache)");
  flags.add_int("num", "problems to run (from the start of the file)", 1000);
  flags.add_string("data", "FILE", "the task file (default DIR/eval/TASK.jsonl; DIR/eval/mtp_text.jsonl for mtp)");
  flags.add_int("max-new-tokens", "tokens per answer at most", 768);
  flags.add_int("max-num-seqs", "problems in flight at once", 64);
  flags.add_string("device", "DEVICE", "where to run: cpu, cuda or cuda:N", false, "cpu");
  add_parallel_flags(flags);
  add_kv_cache_dtype_flag(flags);
  add_speculative_flags(flags);
  flags.add_bool("json", "print the result as JSON");
  if (!flags.parse(argc, argv)) return 0;
  std::string dir = flags.get_string("model"), task = flags.get_string("task");
  DSINFER_CHECK(flags.get_int("num") > 0, "--num must be positive");
  std::string path = flags.has("data") ? flags.get_string("data")
                                       : dir + "/eval/" + (task == "mtp" || task == "kv_kl" || task == "kl" ? "mtp_text" : task) +
                                             ".jsonl";
  DSINFER_CHECK(task == "kl" || !flags.has("reference-model"), "--reference-model is for --task kl");
  DSINFER_CHECK(task != "kl" || flags.has("reference-model"),
                "--task kl compares with --reference-model DIR: give one (--task kv_kl compares cache dtypes)");
  const bool engine_task = task != "mtp" && task != "kv_kl" && task != "kl";
  const bool speculative = speculative_request(flags).requested;  // refuses bad flags before anything loads
  DSINFER_CHECK(engine_task || !speculative, "--task ", task,
                " scores the model's distributions directly, without the engine's drafts: leave out the speculative "
                "flags (they apply to the tasks run through the engine)");

  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(dir);
  model::ModelOptions options;
  options.cache_format = kv_cache_format(flags);
  auto served = ServedModel::load(dir, flags, options);
  Json out;
  out["model"] = dir;
  out["task"] = task;
  out["kv_cache_dtype"] = std::string(model::cache_format_name(options.cache_format));
  if (task == "kv_kl" || task == "kl") {
    DSINFER_CHECK(!served->sharded(), "--task ", task, " runs the model on one rank: leave out the parallel flags");
    DSINFER_CHECK(task == "kl" || options.cache_format != model::CacheFormat::kCompute,
                  "--task kv_kl compares a --kv-cache-dtype (fp8, fp8_ds_mla) with the compute-dtype cache: give one");
    // kv_kl: the same weights with the compute-dtype cache; kl: --reference-model's; on the same backend.
    const std::string reference_dir = task == "kl" ? flags.get_string("reference-model") : dir;
    out["reference_model"] = reference_dir;
    auto reference = model::DeepseekModel::load(reference_dir, served->model().backend());
    DSINFER_CHECK(reference->config().vocab_size == served->model().config().vocab_size, "--reference-model ",
                  reference_dir, " has a vocabulary of ", reference->config().vocab_size, ", ", dir, " of ",
                  served->model().config().vocab_size, ": not two checkpoints of one model");
    runtime::CacheKlResult result =
        runtime::evaluate_cache_kl(*reference, served->model(), tokenizer, path, flags.get_int("num"));
    out["positions"] = result.positions;
    out["mean_kl"] = result.mean_kl;
    out["max_kl"] = result.max_kl;
    out["top1_agreement"] = result.top1_agreement;
    if (!flags.get_bool("json"))
      std::printf("%s (%s cache) against %s (compute-dtype cache) over %ld answer positions: KL mean %.3g, max %.3g; "
                  "top-1 agreement %.4f\n", dir.c_str(), std::string(model::cache_format_name(options.cache_format)).c_str(),
                  reference_dir.c_str(), static_cast<long>(result.positions), result.mean_kl, result.max_kl,
                  result.top1_agreement);
  } else if (task == "mtp") {
    DSINFER_CHECK(!served->sharded(), "--task mtp runs the model on one rank: leave out the parallel flags");
    runtime::MtpResult result = runtime::evaluate_mtp(served->model(), tokenizer, path, flags.get_int("num"));
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
    std::unique_ptr<runtime::Engine> engine = served->engine(tokenizer, config);
    auto check = [](const Json& row, const std::string& completion) {
      return row.contains("tool_call") ? tool_call_matches(row, completion) : runtime::answer_matches(row, completion);
    };
    runtime::TaskResult result =
        runtime::evaluate_task(*engine, tokenizer, path, flags.get_int("num"), flags.get_int("max-new-tokens"), check);
    out["problems"] = result.problems;
    out["correct"] = result.correct;
    out["accuracy"] = result.accuracy();
    out["seconds"] = result.seconds;
    out["generated_tokens_per_s"] = result.seconds > 0 ? result.generated_tokens / result.seconds : 0.0;
    if (served->speculative().enabled()) {
      out["speculative_config"] = Json::parse(served->speculative().describe());
      out["mean_acceptance_length"] = mean_acceptance_length(engine->metrics());
    }
    if (!flags.get_bool("json")) {
      std::printf("%s: %ld/%ld correct, exact-match accuracy %.4f (%.1f s, %.0f generated tokens/s)\n", task.c_str(),
                  static_cast<long>(result.correct), static_cast<long>(result.problems), result.accuracy(),
                  result.seconds, result.seconds > 0 ? result.generated_tokens / result.seconds : 0.0);
      for (const std::string& failure : result.failures) std::printf("  wrong: %s\n", failure.c_str());
      if (std::string drafts = acceptance_summary(engine->metrics()); !drafts.empty())
        std::printf("%s\n", drafts.c_str());
    }
    const int limit = served->speculative().disable_by_batch_size;
    if (served->speculative().enabled() && limit > 0 && engine->metrics().spec_decode_drafts.load() == 0)
      std::fprintf(stderr, "note: no step drafted: more than disable_by_batch_size (%d) problems were live at "
                   "once; give \"disable_by_batch_size\": 0 (or --speculative-disable-by-batch-size 0) to draft "
                   "whatever the load\n", limit);
  }
  if (flags.get_bool("json")) std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace dsinfer::cli
