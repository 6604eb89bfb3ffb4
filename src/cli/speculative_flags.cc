#include "cli/speculative_flags.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <type_traits>

#include "core/error.h"
#include "core/json.h"

namespace dsinfer::cli {
namespace {

// SGLang's choice of steps for DeepSeek-V3 when a launch names the algorithm alone (its
// auto_choose_speculative_params: 3 steps, top-k 1, 4 draft tokens).
constexpr int kSglangDefaultSteps = 3;
// SpeculativeConfig::validate's bound, which the engine's per-position counters are sized by.
constexpr int kMaxDraftTokens = runtime::Metrics::kMaxDraftPositions;

// What one spelling says; unset fields it leaves to the others.
struct Spelling {
  std::optional<int> num_tokens;
  std::optional<runtime::SpeculativeConfig::Mode> mode;
  std::optional<bool> relaxed;
  std::optional<int> relaxed_topk;
  std::optional<float> relaxed_delta;
  std::optional<int> disable_by_batch_size;
};

int checked_disable_by_batch_size(int64_t value, std::string_view what) {
  DSINFER_CHECK(value >= 0 && value <= 1 << 20, what, " must be 0 (never) or a number of requests, not ", value);
  return static_cast<int>(value);
}

int checked_num_tokens(int64_t value, std::string_view what) {
  DSINFER_CHECK(value >= 1 && value <= kMaxDraftTokens, what, " must be 1 to ", kMaxDraftTokens,
                " (draft tokens a step), not ", value);
  return static_cast<int>(value);
}

// --speculative-config's JSON, vLLM's spelling with TensorRT-LLM's names for our keys. A null value
// is a key left out, as vLLM reads it.
Spelling vllm_spelling(const std::string& text) {
  Json config;
  try {
    config = Json::parse(text);
  } catch (const Error& error) {
    throw Error(str_cat("--speculative-config: ", error.what()));
  }
  DSINFER_CHECK(config.is_object(), "--speculative-config must be a JSON object such as "
                R"('{"method": "mtp", "num_speculative_tokens": 1}', got )", text);
  const Json* method = config.find("method");
  DSINFER_CHECK(method != nullptr && method->is_string(), "--speculative-config needs \"method\": \"mtp\" "
                "(dsinfer drafts with the checkpoint's MTP modules)");
  DSINFER_CHECK(method->as_string() == "mtp" || method->as_string() == "deepseek_mtp",
                "--speculative-config: method \"", method->as_string(), "\" is not supported: dsinfer drafts with "
                "the checkpoint's own MTP modules only (\"mtp\", or vLLM's older \"deepseek_mtp\")");
  Spelling spelling;
  for (const auto& [key, value] : config.as_object()) {
    if (key == "method" || value.is_null()) continue;
    auto expect = [&, &key = key](bool ok, std::string_view type) {
      DSINFER_CHECK(ok, "--speculative-config: \"", key, "\" must be ", type, ", got ", value.dump());
    };
    if (key == "num_speculative_tokens") {
      expect(value.is_int(), "an integer");
      spelling.num_tokens = checked_num_tokens(value.as_int(), "--speculative-config: num_speculative_tokens");
    } else if (key == "use_relaxed_acceptance_for_thinking") {
      expect(value.is_bool(), "true or false");
      spelling.relaxed = value.as_bool();
    } else if (key == "relaxed_topk") {
      expect(value.is_int(), "an integer");
      DSINFER_CHECK(value.as_int() >= 1 && value.as_int() <= 1 << 20,
                    "--speculative-config: relaxed_topk must be at least 1, not ", value.as_int());
      spelling.relaxed_topk = static_cast<int>(value.as_int());
    } else if (key == "relaxed_delta") {
      expect(value.is_number(), "a number");
      spelling.relaxed_delta = static_cast<float>(value.as_double());
    } else if (key == "disable_by_batch_size") {
      expect(value.is_int(), "an integer");
      spelling.disable_by_batch_size =
          checked_disable_by_batch_size(value.as_int(), "--speculative-config: disable_by_batch_size");
    } else if (key == "mode") {
      expect(value.is_string() && (value.as_string() == "eagle" || value.as_string() == "vanilla"),
             "\"eagle\" or \"vanilla\"");
      spelling.mode = value.as_string() == "eagle" ? runtime::SpeculativeConfig::Mode::kEagle
                                                   : runtime::SpeculativeConfig::Mode::kVanilla;
    } else {
      throw Error(str_cat("--speculative-config: key \"", key, "\" is not supported (dsinfer takes method, "
                          "num_speculative_tokens, mode, use_relaxed_acceptance_for_thinking, relaxed_topk, "
                          "relaxed_delta and disable_by_batch_size)"));
    }
  }
  return spelling;
}

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

// SGLang's --speculative-algorithm and its step flags.
Spelling sglang_spelling(const Flags& flags) {
  const bool named = flags.has("speculative-algorithm");
  for (const char* flag : {"speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens"})
    DSINFER_CHECK(named || !flags.has(flag), "--", flag, " needs --speculative-algorithm EAGLE (or NEXTN, MTP)");
  Spelling spelling;
  if (!named) return spelling;
  const std::string algorithm = flags.get_string("speculative-algorithm");
  const std::string name = upper(algorithm);
  DSINFER_CHECK(name == "EAGLE" || name == "NEXTN" || name == "MTP", "--speculative-algorithm ", algorithm,
                " is not supported: dsinfer drafts with the checkpoint's own MTP modules (EAGLE, NEXTN or MTP)");
  if (flags.has("speculative-eagle-topk")) {
    const int64_t topk = flags.get_int("speculative-eagle-topk");
    DSINFER_CHECK(topk == 1, "--speculative-eagle-topk ", topk, " asks for tree drafting, which dsinfer does not do: "
                  "it drafts one chain of the MTP module's most likely tokens; give 1 or leave it out");
  }
  std::optional<int64_t> draft_tokens;
  if (flags.has("speculative-num-draft-tokens")) draft_tokens = flags.get_int("speculative-num-draft-tokens");
  if (flags.has("speculative-num-steps")) {
    spelling.num_tokens = checked_num_tokens(flags.get_int("speculative-num-steps"), "--speculative-num-steps");
    DSINFER_CHECK(!draft_tokens || *draft_tokens == *spelling.num_tokens + 1, "--speculative-num-draft-tokens ",
                  *draft_tokens, " disagrees with --speculative-num-steps ", *spelling.num_tokens,
                  ": with top-k 1 a step verifies its last token and its ", *spelling.num_tokens, " drafts, ",
                  *spelling.num_tokens + 1, " tokens; give ", *spelling.num_tokens + 1, " or leave it out");
  } else if (draft_tokens) {
    spelling.num_tokens = checked_num_tokens(*draft_tokens - 1, "--speculative-num-draft-tokens minus 1");
  }
  return spelling;  // no count: SGLang's default, unless the JSON gives one
}

Spelling our_spelling(const Flags& flags) {
  Spelling spelling;
  if (flags.get_bool("speculative-relaxed-acceptance")) spelling.relaxed = true;
  if (flags.has("speculative-relaxed-topk"))
    spelling.relaxed_topk = static_cast<int>(flags.get_int("speculative-relaxed-topk"));
  if (flags.has("speculative-relaxed-delta"))
    spelling.relaxed_delta = static_cast<float>(flags.get_double("speculative-relaxed-delta"));
  if (flags.has("speculative-disable-by-batch-size"))
    spelling.disable_by_batch_size = checked_disable_by_batch_size(flags.get_int("speculative-disable-by-batch-size"),
                                                                   "--speculative-disable-by-batch-size");
  return spelling;
}

// `into` takes what `from` says; a setting both say must be the same.
template <typename T>
void take_agreeing(std::optional<T>& into, const std::optional<T>& from, std::string_view setting,
                   std::string_view first, std::string_view second) {
  if (!from) return;
  auto shown = [](const T& value) {
    if constexpr (std::is_same_v<T, bool>) return std::string(value ? "true" : "false");
    else return str_cat(value);
  };
  DSINFER_CHECK(!into || *into == *from, setting, " is given twice and the values disagree (", first, ": ",
                shown(*into), ", ", second, ": ", shown(*from), "): give one spelling, or make them agree");
  into = from;
}

}  // namespace

void add_speculative_flags(Flags& flags) {
  flags.add_string("speculative-config", "JSON", "speculative decoding with the checkpoint's MTP modules (vLLM): "
                   R"('{"method": "mtp", "num_speculative_tokens": N}', N 1 to 3 (left out: the checkpoint's MTP )"
                   R"(modules); also "mode": "eagle" (module 0 drafts every position, the default) or "vanilla" )"
                   R"((module k drafts position k + 1), "use_relaxed_acceptance_for_thinking", "relaxed_topk", )"
                   R"("relaxed_delta" (TensorRT-LLM's names), "disable_by_batch_size" (vLLM's))");
  flags.add_string("speculative-algorithm", "NAME", "SGLang's spelling of MTP drafting: EAGLE, NEXTN or MTP");
  flags.add_int("speculative-num-steps", "SGLang: draft tokens a step, 1 to 3 (default 3)");
  flags.add_int("speculative-eagle-topk", "SGLang: drafts a position; only 1 (no tree drafting)");
  flags.add_int("speculative-num-draft-tokens", "SGLang: tokens a step verifies; with top-k 1 the steps + 1");
  flags.add_bool("speculative-relaxed-acceptance", "inside <think>...</think>, also accept a draft among the target's "
                 "--speculative-relaxed-topk most likely tokens whose probability is at least top-1's minus "
                 "--speculative-relaxed-delta (changes the output distribution there, on purpose)");
  flags.add_int("speculative-relaxed-topk", "relaxed acceptance: a draft must be among the target's top K tokens "
                "(default 10)");
  flags.add_double("speculative-relaxed-delta", "relaxed acceptance: a draft's probability must be at least top-1's "
                   "minus D, D in [0, 1] (default 0.6)");
  flags.add_int("speculative-disable-by-batch-size", "adaptive drafting (vLLM's spelling): while more than N requests "
                "are live, steps run without drafts (0: never; default 64)");
  flags.set_range("speculative-relaxed-topk", 1, 1 << 20);
  flags.set_range("speculative-relaxed-delta", 0, 1);
}

SpeculativeRequest speculative_request(const Flags& flags) {
  Spelling spelling;
  const bool vllm = flags.has("speculative-config");
  if (vllm) spelling = vllm_spelling(flags.get_string("speculative-config"));
  const Spelling sglang = sglang_spelling(flags);
  take_agreeing(spelling.num_tokens, sglang.num_tokens, "the number of draft tokens",
                "--speculative-config's num_speculative_tokens", "--speculative-algorithm's --speculative-num-steps");
  const Spelling ours = our_spelling(flags);
  take_agreeing(spelling.relaxed, ours.relaxed, "relaxed acceptance", "use_relaxed_acceptance_for_thinking",
                "--speculative-relaxed-acceptance");
  take_agreeing(spelling.relaxed_topk, ours.relaxed_topk, "the relaxed top-k", "relaxed_topk",
                "--speculative-relaxed-topk");
  take_agreeing(spelling.relaxed_delta, ours.relaxed_delta, "the relaxed delta", "relaxed_delta",
                "--speculative-relaxed-delta");
  take_agreeing(spelling.disable_by_batch_size, ours.disable_by_batch_size, "the drafting batch limit",
                "disable_by_batch_size", "--speculative-disable-by-batch-size");

  SpeculativeRequest request;
  request.requested = vllm || flags.has("speculative-algorithm");
  const bool relaxed = spelling.relaxed.value_or(false);
  DSINFER_CHECK(request.requested || (!relaxed && !spelling.relaxed_topk && !spelling.relaxed_delta),
                "the relaxed acceptance flags need speculative decoding: add --speculative-config "
                R"('{"method": "mtp", "num_speculative_tokens": 1}' (or --speculative-algorithm EAGLE))");
  DSINFER_CHECK(request.requested || !spelling.disable_by_batch_size,
                "--speculative-disable-by-batch-size needs speculative decoding: add --speculative-config "
                R"('{"method": "mtp", "num_speculative_tokens": 1}' (or --speculative-algorithm EAGLE))");
  DSINFER_CHECK(relaxed || (!spelling.relaxed_topk && !spelling.relaxed_delta),
                "relaxed_topk and relaxed_delta (--speculative-relaxed-topk, --speculative-relaxed-delta) apply only "
                "with relaxed acceptance: add --speculative-relaxed-acceptance (or \"use_relaxed_acceptance_for_"
                "thinking\": true)");
  if (!request.requested) return request;
  runtime::SpeculativeConfig& config = request.config;
  if (!spelling.num_tokens && flags.has("speculative-algorithm")) spelling.num_tokens = kSglangDefaultSteps;
  config.num_tokens = spelling.num_tokens.value_or(0);
  request.tokens_from_checkpoint = !spelling.num_tokens;
  config.mode = spelling.mode.value_or(runtime::SpeculativeConfig::Mode::kEagle);
  config.relaxed = relaxed;
  if (spelling.relaxed_topk) config.relaxed_topk = *spelling.relaxed_topk;
  if (spelling.relaxed_delta) config.relaxed_delta = *spelling.relaxed_delta;
  if (spelling.disable_by_batch_size) config.disable_by_batch_size = *spelling.disable_by_batch_size;
  config.validate();
  return request;
}

runtime::SpeculativeConfig speculative_config(const SpeculativeRequest& request, int mtp_modules,
                                              std::string_view model) {
  if (!request.requested) return {};
  DSINFER_CHECK(mtp_modules > 0, "speculative decoding drafts with the model's MTP modules, and ", model,
                " has none: serve a checkpoint with them (DeepSeek-V3 and R1 have one; config.json's "
                "num_nextn_predict_layers) or leave out the speculative flags");
  runtime::SpeculativeConfig config = request.config;
  if (request.tokens_from_checkpoint) config.num_tokens = std::min(mtp_modules, kMaxDraftTokens);
  DSINFER_CHECK(config.mode != runtime::SpeculativeConfig::Mode::kVanilla || config.num_tokens <= mtp_modules,
                "speculative decoding in vanilla mode drafts position k with MTP module k, so ", config.num_tokens,
                " draft tokens need ", config.num_tokens, " modules, and ", model, " has ", mtp_modules,
                ": ask for at most ", mtp_modules, ", or use \"mode\": \"eagle\" (module 0 drafts every position)");
  config.validate();
  return config;
}

double mean_acceptance_length(const runtime::Metrics& metrics) {
  const uint64_t drafts = metrics.spec_decode_drafts.load();
  if (drafts == 0) return 0.0;
  return 1.0 + static_cast<double>(metrics.spec_decode_accepted_tokens.load()) / static_cast<double>(drafts);
}

std::string acceptance_summary(const runtime::Metrics& metrics) {
  const uint64_t drafts = metrics.spec_decode_drafts.load();
  const uint64_t draft_tokens = metrics.spec_decode_draft_tokens.load();
  const uint64_t accepted = metrics.spec_decode_accepted_tokens.load();
  if (drafts == 0 || draft_tokens == 0) return "";
  return str_cat("speculative decoding: ", drafts, " drafts of ", draft_tokens, " tokens, ", accepted,
                 " accepted (acceptance rate ", static_cast<double>(accepted) / static_cast<double>(draft_tokens),
                 ", mean acceptance length ", mean_acceptance_length(metrics), ")");
}

}  // namespace dsinfer::cli
