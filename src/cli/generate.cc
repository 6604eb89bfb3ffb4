// dsinfer generate: prompt in, tokens out, on one sequence, through the same Engine that serves.
#include <cstdio>
#include <string>

#include "backend/backend.h"
#include "cli/flags.h"
#include "cli/model_files.h"
#include "cli/parallel_flags.h"
#include "cli/served_model.h"
#include "cli/speculative_flags.h"
#include "cli/verbs.h"
#include "core/json.h"
#include "core/log.h"
#include "core/npy.h"
#include "core/strings.h"
#include "backend/make_backend.h"
#include "model/batch_builder.h"
#include "runtime/completion.h"
#include "tokenizer/chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::cli {
namespace {

Flags generate_flags() {
  Flags flags("dsinfer generate --model DIR (--prompt TEXT | --prompt-ids 1,2,3) [flags]",
              "Generates a continuation of one prompt and prints it (JSON with --json).");
  flags.add_string("model", "DIR", "checkpoint directory (config.json, *.safetensors, tokenizer.json)", true);
  flags.add_string("prompt", "TEXT", "prompt text, tokenized with a leading BOS token");
  flags.add_string("prompt-ids", "IDS", "prompt as comma-separated token ids");
  flags.add_bool("chat", "wrap --prompt as one user message through the chat template");
  flags.add_int("max-new-tokens", "tokens to generate at most", 128);
  flags.add_double("temperature", "sampling temperature; 0 is greedy", 0.0);
  flags.add_double("top-p", "nucleus sampling: keep the most likely tokens up to this mass", 1.0);
  flags.add_int("top-k", "keep only the k most likely tokens; 0 keeps all", 0);
  flags.add_int("seed", "seed of the sampler", 0);
  flags.add_string("device", "DEVICE", "where to run: cpu, cuda or cuda:N", false, "cpu");
  add_model_flags(flags);
  add_parallel_flags(flags);
  add_speculative_flags(flags);
  flags.add_bool("json", "print {prompt_ids, output_ids, text, finish_reason} as JSON");
  flags.add_string("prompt-logits", "FILE.npy", "write the logits at every prompt position, float32 [prompt, vocab]");
  return flags;
}

std::vector<int32_t> prompt_ids(const Flags& flags, const tokenizer::Tokenizer& tokenizer, const std::string& dir) {
  bool has_text = flags.has("prompt"), has_ids = flags.has("prompt-ids");
  DSINFER_CHECK(has_text != has_ids, "give exactly one of --prompt and --prompt-ids");
  if (has_ids) {
    DSINFER_CHECK(!flags.get_bool("chat"), "--chat needs --prompt, not --prompt-ids");
    return parse_int_list(flags.get_string("prompt-ids"), "--prompt-ids");
  }
  std::string text = flags.get_string("prompt");
  if (!flags.get_bool("chat")) return tokenizer.encode(text, /*add_special_tokens=*/true);
  // The template writes the BOS token itself, so the rendered text is encoded as it stands.
  chat::ChatTemplate chat_template = load_chat_template(dir);
  Json messages = Json::array();
  Json message;
  message["role"] = "user";
  message["content"] = text;
  messages.push_back(message);
  return tokenizer.encode(chat_template.render(messages, /*add_generation_prompt=*/true), false);
}

// The logits at every prompt position, from one forward pass on a cache of its own (on every rank of
// a sharded model, whose ranks all compute them).
Tensor prompt_logits(const ServedModel& served, const std::vector<int32_t>& prompt) {
  auto pages = static_cast<int32_t>(prompt.size() / model::kPageSize + 1);
  std::vector<int32_t> page_ids(pages);
  for (int32_t i = 0; i < pages; ++i) page_ids[i] = i;
  model::BatchBuilder builder;
  builder.add(prompt, 0, page_ids, model::LogitRows::kAll);
  model::ForwardBatch batch = builder.build();
  auto forward = [&](const model::DeepseekModel& model) {
    model::LatentCache cache = model.make_cache(pages);
    return model.forward(batch, cache).logits;
  };
  if (!served.sharded()) return forward(served.model());
  Tensor logits;
  served.shards()->on_every_rank([&](int r) {
    Tensor mine = forward(served.shards()->rank(r));
    if (r == 0) logits = mine;
  });
  return logits;
}

}  // namespace

int run_generate(int argc, char** argv) {
  Flags flags = generate_flags();
  if (!flags.parse(argc, argv)) return 0;
  std::string dir = flags.get_string("model");
  int64_t max_new_tokens = flags.get_int("max-new-tokens");
  DSINFER_CHECK(max_new_tokens >= 0, "--max-new-tokens must not be negative");
  double temperature = flags.get_double("temperature"), top_p = flags.get_double("top-p");
  DSINFER_CHECK(temperature >= 0, "--temperature must not be negative");
  DSINFER_CHECK(top_p > 0 && top_p <= 1, "--top-p must be in (0, 1]");
  DSINFER_CHECK(flags.get_int("top-k") >= 0, "--top-k must not be negative");
  speculative_request(flags);  // refuses bad speculative flags before anything loads

  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(dir);
  std::vector<int32_t> prompt = prompt_ids(flags, tokenizer, dir);
  auto served = ServedModel::load(dir, flags, model_options(flags));
  if (flags.has("prompt-logits")) write_npy(flags.get_string("prompt-logits"), prompt_logits(*served, prompt));

  auto prompt_tokens = static_cast<int64_t>(prompt.size());
  runtime::EngineConfig config = runtime::offline_engine_config(1, prompt_tokens, max_new_tokens);
  config.cuda_graph_max_batch = cuda_graph_max_batch(flags);
  config.overlap_schedule = !flags.get_bool("disable-overlap-schedule");
  std::unique_ptr<runtime::Engine> engine = served->engine(tokenizer, config);
  // The context bounds the output too, as when serving.
  max_new_tokens = std::min(max_new_tokens, std::max<int64_t>(0, engine->max_model_len() - prompt_tokens));
  runtime::RequestOptions options;
  options.max_tokens = max_new_tokens;
  options.sampling.temperature = static_cast<float>(temperature);
  options.sampling.top_p = static_cast<float>(top_p);
  options.sampling.top_k = static_cast<int>(flags.get_int("top-k"));
  options.sampling.seed = static_cast<uint64_t>(flags.get_int("seed"));
  runtime::Completion result = runtime::complete_request(*engine, prompt, options);
  DSINFER_CHECK(result.finish_reason != runtime::FinishReason::kError, "generation failed: ", result.error);
  std::string finish_reason = runtime::finish_reason_name(result.finish_reason);
  const std::string& text = result.text;
  double decode_rate = result.decode_seconds > 0 ? (result.tokens.size() - 1) / result.decode_seconds : 0;
  log_info("prompt ", prompt.size(), " tokens in ", result.first_token_seconds, " s; ", result.tokens.size(),
           " new tokens, decode ", decode_rate, " tokens/s");
  if (std::string drafts = acceptance_summary(engine->metrics()); !drafts.empty()) log_info(drafts);
  if (flags.get_bool("json")) {
    Json out;
    out["prompt_ids"] = Json::array();
    for (int32_t id : prompt) out["prompt_ids"].push_back(id);
    out["output_ids"] = Json::array();
    for (int32_t id : result.tokens) out["output_ids"].push_back(id);
    out["text"] = text;
    out["finish_reason"] = finish_reason;
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("%s\n", text.c_str());
  }
  return 0;
}

}  // namespace dsinfer::cli
