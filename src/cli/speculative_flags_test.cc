// The speculative decoding flags as vLLM, SGLang and our own spellings give them (serve's flags, and
// the bare set that generate and eval add): what each means, what is refused and why, and the
// check against the model's MTP modules.
#include "cli/speculative_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/serve_flags.h"
#include "cli/flags_testing.h"
#include "core/error.h"

namespace dsinfer::cli {
namespace {

using Mode = runtime::SpeculativeConfig::Mode;

// serve's flags parsed from `args` and checked as serve checks them; then what they ask for.
SpeculativeRequest served(std::vector<std::string> args) {
  args.insert(args.begin(), "/m");
  return speculative_request(flag_testing::parsed_serve_flags(std::move(args)));
}

// The same through the speculative flags alone, as generate and eval declare them.
SpeculativeRequest bare(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  Flags flags("dsinfer generate", "test");
  add_speculative_flags(flags);
  EXPECT_TRUE(flags.parse(static_cast<int>(argv.size()), argv.data()));
  return speculative_request(flags);
}

// The message of the Error that serve's check of `args` throws ("" when none).
std::string refusal(std::vector<std::string> args) {
  return flag_testing::error_of([&] { served(std::move(args)); });
}

bool says(const std::string& message, const std::string& part) { return message.find(part) != std::string::npos; }

TEST(SpeculativeFlags, NoFlagsMeansOff) {
  const SpeculativeRequest off = served({});
  EXPECT_FALSE(off.requested);
  EXPECT_FALSE(off.config.enabled());
  EXPECT_FALSE(speculative_config(off, 0, "m").enabled());  // a model without MTP serves as before
}

TEST(SpeculativeFlags, VllmJsonTakesMtpAndDeepseekMtp) {
  for (const char* method : {"mtp", "deepseek_mtp"}) {
    const SpeculativeRequest request =
        served({"--speculative-config", str_cat(R"({"method": ")", method, R"(", "num_speculative_tokens": 2})")});
    EXPECT_TRUE(request.requested) << method;
    EXPECT_EQ(request.config.num_tokens, 2);
    EXPECT_EQ(request.config.mode, Mode::kEagle);
    EXPECT_FALSE(request.config.relaxed);
    EXPECT_FALSE(request.tokens_from_checkpoint);
  }
  for (int n = 1; n <= 3; ++n)
    EXPECT_EQ(bare({"--speculative-config", str_cat(R"({"method": "mtp", "num_speculative_tokens": )", n, "}")})
                  .config.num_tokens, n);
}

TEST(SpeculativeFlags, VllmJsonTakesTensorRtLlmsRelaxedKeysAndTheMode) {
  const SpeculativeRequest request = served(
      {"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 3, "mode": "vanilla",
           "use_relaxed_acceptance_for_thinking": true, "relaxed_topk": 4, "relaxed_delta": 0.25})"});
  EXPECT_EQ(request.config.num_tokens, 3);
  EXPECT_EQ(request.config.mode, Mode::kVanilla);
  EXPECT_TRUE(request.config.relaxed);
  EXPECT_EQ(request.config.relaxed_topk, 4);
  EXPECT_FLOAT_EQ(request.config.relaxed_delta, 0.25f);
  // Null is a key left out, as vLLM reads it.
  const SpeculativeRequest nulls =
      served({"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 1, "relaxed_topk": null})"});
  EXPECT_EQ(nulls.config.relaxed_topk, runtime::SpeculativeConfig{}.relaxed_topk);
}

TEST(SpeculativeFlags, VllmJsonWithoutACountTakesTheCheckpointsModules) {
  const SpeculativeRequest request = served({"--speculative-config", R"({"method": "mtp"})"});
  EXPECT_TRUE(request.tokens_from_checkpoint);
  EXPECT_EQ(speculative_config(request, 1, "m").num_tokens, 1);  // DeepSeek-V3 and R1
  EXPECT_EQ(speculative_config(request, 2, "m").num_tokens, 2);
  EXPECT_EQ(speculative_config(request, 5, "m").num_tokens, 3);  // at most 3
}

TEST(SpeculativeFlags, DisableByBatchSizeFromTheJsonOrOurFlag) {
  EXPECT_EQ(served({"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 1})"})
                .config.disable_by_batch_size,
            64);  // the default
  EXPECT_EQ(served({"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 1, )"
                                            R"("disable_by_batch_size": 8})"})
                .config.disable_by_batch_size,
            8);
  EXPECT_EQ(served({"--speculative-algorithm", "EAGLE", "--speculative-disable-by-batch-size", "0"})
                .config.disable_by_batch_size,
            0);  // never
  EXPECT_EQ(bare({"--speculative-config", R"({"method": "mtp", "disable_by_batch_size": 16})",
                  "--speculative-disable-by-batch-size", "16"})
                .config.disable_by_batch_size,
            16);
  std::string message = refusal({"--speculative-config", R"({"method": "mtp", "disable_by_batch_size": 8})",
                                 "--speculative-disable-by-batch-size", "9"});
  EXPECT_TRUE(says(message, "the drafting batch limit is given twice and the values disagree")) << message;
  message = refusal({"--speculative-config", R"({"method": "mtp", "disable_by_batch_size": -1})"});
  EXPECT_TRUE(says(message, "disable_by_batch_size must be 0 (never) or a number of requests, not -1")) << message;
  message = refusal({"--speculative-disable-by-batch-size", "8"});
  EXPECT_TRUE(says(message, "--speculative-disable-by-batch-size needs speculative decoding")) << message;
}

TEST(SpeculativeFlags, VllmJsonRefusesOtherMethodsKeysAndCounts) {
  for (const char* method : {"ngram", "eagle3", "medusa", "eagle", "draft_model"}) {
    const std::string message =
        refusal({"--speculative-config", str_cat(R"({"method": ")", method, R"(", "num_speculative_tokens": 1})")});
    EXPECT_TRUE(says(message, str_cat("method \"", method, "\" is not supported"))) << message;
  }
  std::string message = refusal({"--speculative-config", R"({"num_speculative_tokens": 1})"});
  EXPECT_TRUE(says(message, "needs \"method\": \"mtp\"")) << message;
  for (const char* key : {"model", "prompt_lookup_max", "draft_tensor_parallel_size", "disable_logprobs"}) {
    message = refusal({"--speculative-config", str_cat(R"({"method": "mtp", "num_speculative_tokens": 1, ")", key,
                                                       R"(": 4})")});
    EXPECT_TRUE(says(message, str_cat("key \"", key, "\" is not supported"))) << message;
  }
  for (const char* n : {"0", "4", "-1"}) {
    message = refusal({"--speculative-config", str_cat(R"({"method": "mtp", "num_speculative_tokens": )", n, "}")});
    EXPECT_TRUE(says(message, str_cat("num_speculative_tokens must be 1 to 3 (draft tokens a step), not ", n)))
        << message;
  }
  message = refusal({"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": "2"})"});
  EXPECT_TRUE(says(message, "\"num_speculative_tokens\" must be an integer")) << message;
  message = refusal({"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 1, "mode": "tree"})"});
  EXPECT_TRUE(says(message, "\"mode\" must be \"eagle\" or \"vanilla\"")) << message;
  message = refusal({"--speculative-config", R"({"method": "mtp", "use_relaxed_acceptance_for_thinking": 1})"});
  EXPECT_TRUE(says(message, "must be true or false")) << message;
  message = refusal({"--speculative-config", "{\"method\": \"mtp\""});
  EXPECT_TRUE(says(message, "--speculative-config: ")) << message;
  message = refusal({"--speculative-config", R"(["mtp"])"});
  EXPECT_TRUE(says(message, "must be a JSON object")) << message;
}

TEST(SpeculativeFlags, ValidateRefusesRelaxedValuesOutOfRange) {
  std::string message = refusal({"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 1,
      "use_relaxed_acceptance_for_thinking": true, "relaxed_delta": 1.5})"});
  EXPECT_TRUE(says(message, "relaxed_delta must be within [0, 1], not 1.5")) << message;
  message = refusal({"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 1,
      "use_relaxed_acceptance_for_thinking": true, "relaxed_topk": 0})"});
  EXPECT_TRUE(says(message, "relaxed_topk must be at least 1, not 0")) << message;
  message = refusal({"--speculative-algorithm", "EAGLE", "--speculative-relaxed-acceptance",
                     "--speculative-relaxed-delta", "2"});
  EXPECT_TRUE(says(message, "--speculative-relaxed-delta")) << message;
}

TEST(SpeculativeFlags, SglangSpellingsMeanTheSameChain) {
  for (const char* algorithm : {"EAGLE", "NEXTN", "MTP", "eagle", "nextn"}) {
    const SpeculativeRequest request = served({"--speculative-algorithm", algorithm, "--speculative-num-steps", "2"});
    EXPECT_TRUE(request.requested) << algorithm;
    EXPECT_EQ(request.config.num_tokens, 2) << algorithm;
    EXPECT_EQ(request.config.mode, Mode::kEagle);
  }
  // SGLang's own launch line for DeepSeek MTP, and its choice when only the algorithm is named.
  EXPECT_EQ(served({"--speculative-algorithm", "EAGLE", "--speculative-num-steps", "1", "--speculative-eagle-topk",
                    "1", "--speculative-num-draft-tokens", "2"})
                .config.num_tokens,
            1);
  EXPECT_EQ(served({"--speculative-algorithm", "EAGLE"}).config.num_tokens, 3);
  EXPECT_EQ(served({"--speculative-algorithm", "NEXTN", "--speculative-num-draft-tokens", "3"}).config.num_tokens, 2);
  EXPECT_EQ(bare({"--speculative-algorithm", "MTP", "--speculative-num-steps", "3"}).config.num_tokens, 3);
}

TEST(SpeculativeFlags, SglangRefusesTreesOtherAlgorithmsAndDisagreeingCounts) {
  std::string message = refusal({"--speculative-algorithm", "EAGLE", "--speculative-num-steps", "2",
                                 "--speculative-eagle-topk", "2"});
  EXPECT_TRUE(says(message, "--speculative-eagle-topk 2 asks for tree drafting")) << message;
  message = refusal({"--speculative-algorithm", "EAGLE", "--speculative-num-steps", "2",
                     "--speculative-num-draft-tokens", "4"});
  EXPECT_TRUE(says(message, "--speculative-num-draft-tokens 4 disagrees with --speculative-num-steps 2")) << message;
  EXPECT_TRUE(says(message, "give 3")) << message;
  for (const char* algorithm : {"EAGLE3", "STANDALONE", "NGRAM"}) {
    message = refusal({"--speculative-algorithm", algorithm});
    EXPECT_TRUE(says(message, str_cat("--speculative-algorithm ", algorithm, " is not supported"))) << message;
  }
  for (const char* n : {"0", "4"}) {
    message = refusal({"--speculative-algorithm", "EAGLE", "--speculative-num-steps", n});
    EXPECT_TRUE(says(message, str_cat("--speculative-num-steps must be 1 to 3 (draft tokens a step), not ", n)))
        << message;
  }
  message = refusal({"--speculative-num-steps", "2"});
  EXPECT_TRUE(says(message, "--speculative-num-steps needs --speculative-algorithm")) << message;
  message = refusal({"--speculative-eagle-topk", "1"});
  EXPECT_TRUE(says(message, "--speculative-eagle-topk needs --speculative-algorithm")) << message;
}

TEST(SpeculativeFlags, BothSpellingsMustAgree) {
  const SpeculativeRequest agreeing =
      served({"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 2})", "--speculative-algorithm",
              "EAGLE", "--speculative-num-steps", "2"});
  EXPECT_EQ(agreeing.config.num_tokens, 2);
  // vLLM's JSON without a count takes SGLang's.
  EXPECT_EQ(served({"--speculative-config", R"({"method": "mtp"})", "--speculative-algorithm", "NEXTN",
                    "--speculative-num-steps", "1"})
                .config.num_tokens,
            1);
  std::string message = refusal({"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 2})",
                                 "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3"});
  EXPECT_TRUE(says(message, "the number of draft tokens is given twice and the values disagree "
                            "(--speculative-config's num_speculative_tokens: 2, --speculative-algorithm's "
                            "--speculative-num-steps: 3)"))
      << message;
  // SGLang's default of 3 steps applies only where no spelling gives a count.
  EXPECT_EQ(served({"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 1})",
                    "--speculative-algorithm", "EAGLE"})
                .config.num_tokens,
            1);
  EXPECT_EQ(served({"--speculative-config", R"({"method": "mtp"})", "--speculative-algorithm", "EAGLE"})
                .config.num_tokens,
            3);
  message = refusal({"--speculative-config",
                     R"({"method": "mtp", "num_speculative_tokens": 1, "use_relaxed_acceptance_for_thinking": false})",
                     "--speculative-relaxed-acceptance"});
  EXPECT_TRUE(says(message, "relaxed acceptance is given twice")) << message;
  EXPECT_TRUE(says(message, "use_relaxed_acceptance_for_thinking: false, --speculative-relaxed-acceptance: true"))
      << message;
  message = refusal({"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 1,
      "use_relaxed_acceptance_for_thinking": true, "relaxed_topk": 4})", "--speculative-relaxed-topk", "5"});
  EXPECT_TRUE(says(message, "the relaxed top-k is given twice")) << message;
}

TEST(SpeculativeFlags, OurRelaxedFlagsGoWithEitherSpelling) {
  const SpeculativeRequest request =
      served({"--speculative-algorithm", "EAGLE", "--speculative-num-steps", "1", "--speculative-relaxed-acceptance",
              "--speculative-relaxed-topk", "8", "--speculative-relaxed-delta", "0.3"});
  EXPECT_TRUE(request.config.relaxed);
  EXPECT_EQ(request.config.relaxed_topk, 8);
  EXPECT_FLOAT_EQ(request.config.relaxed_delta, 0.3f);
  const SpeculativeRequest mixed =
      bare({"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 2, "relaxed_delta": 0.5})",
            "--speculative-relaxed-acceptance", "--speculative-relaxed-delta", "0.5"});
  EXPECT_TRUE(mixed.config.relaxed);
  EXPECT_FLOAT_EQ(mixed.config.relaxed_delta, 0.5f);
  // Defaults: TensorRT-LLM's.
  const SpeculativeRequest defaults = served({"--speculative-algorithm", "MTP", "--speculative-relaxed-acceptance"});
  EXPECT_EQ(defaults.config.relaxed_topk, 10);
  EXPECT_FLOAT_EQ(defaults.config.relaxed_delta, 0.6f);
}

TEST(SpeculativeFlags, RelaxedSettingsAloneAreRefused) {
  std::string message = refusal({"--speculative-relaxed-acceptance"});
  EXPECT_TRUE(says(message, "need speculative decoding")) << message;
  message = refusal({"--speculative-algorithm", "EAGLE", "--speculative-relaxed-topk", "4"});
  EXPECT_TRUE(says(message, "apply only with relaxed acceptance")) << message;
  message =
      refusal({"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 1, "relaxed_delta": 0.1})"});
  EXPECT_TRUE(says(message, "apply only with relaxed acceptance")) << message;
}

TEST(SpeculativeFlags, AModelWithoutEnoughMtpModulesIsRefused) {
  const SpeculativeRequest eagle =
      served({"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 3})"});
  EXPECT_EQ(speculative_config(eagle, 1, "m").num_tokens, 3);  // module 0 drafts every position
  try {
    speculative_config(eagle, 0, "DIR/config.json (num_nextn_predict_layers)");
    FAIL() << "a model without MTP modules was taken";
  } catch (const Error& error) {
    EXPECT_TRUE(says(error.what(), "DIR/config.json (num_nextn_predict_layers) has none")) << error.what();
  }
  const SpeculativeRequest vanilla =
      served({"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 2, "mode": "vanilla"})"});
  EXPECT_EQ(speculative_config(vanilla, 2, "m").num_tokens, 2);
  try {
    speculative_config(vanilla, 1, "the loaded model");
    FAIL() << "vanilla mode took 2 drafts from 1 module";
  } catch (const Error& error) {
    EXPECT_TRUE(says(error.what(), "2 draft tokens need 2 modules, and the loaded model has 1")) << error.what();
  }
}

TEST(SpeculativeFlags, HelpListsEverySpelling) {
  const std::string help = serve_flags().help();
  for (const char* flag : {"--speculative-config", "--speculative-algorithm", "--speculative-num-steps",
                           "--speculative-eagle-topk", "--speculative-num-draft-tokens",
                           "--speculative-relaxed-acceptance", "--speculative-relaxed-topk",
                           "--speculative-relaxed-delta"})
    EXPECT_TRUE(says(help, flag)) << flag;
}

TEST(SpeculativeFlags, AcceptanceSummaryReadsTheEnginesCounters) {
  runtime::Metrics metrics;
  EXPECT_EQ(acceptance_summary(metrics), "");
  EXPECT_EQ(mean_acceptance_length(metrics), 0.0);
  metrics.spec_decode_drafts = 10;
  metrics.spec_decode_draft_tokens = 20;
  metrics.spec_decode_accepted_tokens = 15;
  EXPECT_DOUBLE_EQ(mean_acceptance_length(metrics), 2.5);
  const std::string summary = acceptance_summary(metrics);
  EXPECT_TRUE(says(summary, "acceptance rate 0.75")) << summary;
  EXPECT_TRUE(says(summary, "mean acceptance length 2.5")) << summary;
}

}  // namespace
}  // namespace dsinfer::cli
