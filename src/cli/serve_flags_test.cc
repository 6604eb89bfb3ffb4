// dsinfer serve's flags as vLLM and SGLang launch scripts spell them: what is accepted, what it
// means, and what is refused with the issue that brings it.
#include "cli/serve_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/model_files.h"
#include "cli/parallel_flags.h"
#include "cli/speculative_flags.h"
#include "cli/flags_testing.h"
#include "core/error.h"

namespace dsinfer::cli {
namespace {

Flags parsed(std::vector<std::string> args) { return flag_testing::parsed_serve_flags(std::move(args)); }

// The message of the Error that checking `args` throws ("" when none).
std::string refusal(std::vector<std::string> args) {
  return flag_testing::error_of([&] { parsed(std::move(args)); });
}

TEST(ServeFlags, VllmAndSglangSpellingsAreAccepted) {
  Flags vllm = parsed({"/m", "--reasoning-parser", "deepseek_r1", "--max-model-len", "32k", "--trust-remote-code",
                       "--dtype", "bfloat16", "--enable-prefix-caching", "--kv-cache-dtype", "auto",
                       "--tensor-parallel-size", "1", "--gpu-memory-utilization", "0.8"});
  EXPECT_EQ(vllm.get_string("model"), "/m");
  EXPECT_TRUE(reasoning_enabled(vllm));
  EXPECT_EQ(vllm.get_int("max-model-len"), 32000);
  EXPECT_TRUE(prefix_caching_enabled(vllm));
  EXPECT_DOUBLE_EQ(vllm.get_double("gpu-memory-utilization"), 0.8);

  Flags sglang = parsed({"--model-path", "/m", "--reasoning-parser", "deepseek-r1", "--mem-fraction-static", "0.7",
                         "--context-length", "4K", "--tp", "1", "--disable-radix-cache"});
  EXPECT_EQ(sglang.get_string("model"), "/m");
  EXPECT_TRUE(reasoning_enabled(sglang));
  EXPECT_DOUBLE_EQ(sglang.get_double("gpu-memory-utilization"), 0.7);
  EXPECT_EQ(sglang.get_int("max-model-len"), 4096);
  EXPECT_FALSE(prefix_caching_enabled(sglang));

  Flags plain = parsed({"--model", "/m"});
  EXPECT_FALSE(reasoning_enabled(plain));
  EXPECT_TRUE(prefix_caching_enabled(plain));
}

// Speculative decoding in both servers' spellings (speculative_flags_test.cc has the rest).
TEST(ServeFlags, SpeculativeDecodingTakesVllmsAndSglangsSpellings) {
  const Flags vllm = parsed({"/m", "--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 2})"});
  EXPECT_EQ(speculative_request(vllm).config.num_tokens, 2);
  EXPECT_EQ(speculative_request(parsed({"/m", "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "1"}))
                .config.num_tokens,
            1);
  EXPECT_FALSE(speculative_request(parsed({"/m"})).requested);
  EXPECT_NE(refusal({"/m", "--speculative-config", R"({"method": "ngram", "num_speculative_tokens": 2})"})
                .find("method \"ngram\" is not supported"),
            std::string::npos);
  EXPECT_NE(refusal({"/m", "--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "4"}).find("tree drafting"),
            std::string::npos);
}

// vLLM's spellings of the FP8 caches parse (the model refuses them on a backend without them); a
// dtype dsinfer has no cache of is refused with the ones it has.
TEST(ServeFlags, KvCacheDtypesReadAsVllmSpellsThem) {
  for (const char* dtype : {"auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_ds_mla"})
    EXPECT_NO_THROW(check_serve_flags(parsed({"/m", "--kv-cache-dtype", dtype}))) << dtype;
  EXPECT_EQ(model_options(parsed({"/m", "--kv-cache-dtype", "fp8_e4m3"})).cache_format, model::CacheFormat::kFp8);
  EXPECT_EQ(model_options(parsed({"/m", "--kv-cache-dtype", "fp8_ds_mla"})).cache_format,
            model::CacheFormat::kFp8DsMla);
  EXPECT_EQ(model_options(parsed({"/m"})).cache_format, model::CacheFormat::kCompute);
  const std::string refused = refusal({"/m", "--kv-cache-dtype", "fp8_e5m2"});
  EXPECT_NE(refused.find("fp8_e5m2 is not known"), std::string::npos) << refused;
  EXPECT_NE(refused.find("fp8_ds_mla"), std::string::npos) << refused;
}

TEST(ServeFlags, ParallelLayoutsReadAsVllmAndSglangMeanThem) {
  parallel::ParallelConfig vllm = parallel_config(parsed({"/m", "--tensor-parallel-size", "2",
                                                          "--data-parallel-size", "4", "--enable-expert-parallel"}));
  EXPECT_EQ(vllm.attention_tp, 2);
  EXPECT_EQ(vllm.attention_dp, 4);
  EXPECT_TRUE(vllm.expert_parallel);
  parallel::ParallelConfig sglang = parallel_config(parsed({"/m", "--tp", "8", "--dp", "8", "--enable-dp-attention",
                                                            "--ep", "8"}));
  EXPECT_EQ(sglang.attention_tp, 1);
  EXPECT_EQ(sglang.world_size(), 8);
  EXPECT_TRUE(sglang.expert_parallel);
  parallel::ParallelConfig tp_only = parallel_config(parsed({"/m", "--tp", "4"}));
  EXPECT_EQ(tp_only.world_size(), 4);
  EXPECT_FALSE(tp_only.expert_parallel);  // each rank holds a slice of every expert
  EXPECT_NE(refusal({"/m", "--tp", "4", "--ep", "2"}).find("must be 1 or the number of ranks (4)"), std::string::npos);
  EXPECT_NE(refusal({"/m", "--tp", "4", "--dp", "3", "--enable-dp-attention"}).find("must divide --tp 4"),
            std::string::npos);
  runtime::ExpertBalance eplb = expert_balance(
      parsed({"/m", "--tp", "8", "--ep", "8", "--enable-eplb", "--ep-num-redundant-experts", "32",
              "--eplb-rebalance-num-iterations", "500"}),
      parallel_config(parsed({"/m", "--tp", "8", "--ep", "8"})));
  EXPECT_EQ(eplb.redundant_experts, 32);
  EXPECT_EQ(eplb.rebalance_steps, 500);
  EXPECT_NE(refusal({"/m", "--tp", "2", "--enable-eplb"}).find("--enable-expert-parallel"), std::string::npos);
  EXPECT_NE(refusal({"/m", "--num-redundant-experts", "8"}).find("needs --enable-eplb"), std::string::npos);
}

TEST(ServeFlags, UnknownOrContradictoryValuesAreRefused) {
  EXPECT_NE(refusal({"/m", "--dtype", "float16"}).find("--dtype float16 is not supported"), std::string::npos);
  EXPECT_NE(refusal({"/m", "--reasoning-parser", "qwen3"}).find("is not known"), std::string::npos);
  EXPECT_NE(refusal({"/m", "--enable-prefix-caching", "--no-enable-prefix-caching"}).find("contradict"),
            std::string::npos);
  EXPECT_EQ(refusal({"/m", "--dtype", "auto"}), "");
}

TEST(ServeFlags, TheApiKeyComesFromTheFlagThenDsinferThenVllm) {
  Flags with_flag = parsed({"/m", "--api-key", "flag"});
  EXPECT_EQ(api_key(with_flag, "dsinfer", "vllm"), "flag");
  Flags without = parsed({"/m"});
  EXPECT_EQ(api_key(without, "dsinfer", "vllm"), "dsinfer");
  EXPECT_EQ(api_key(without, nullptr, "vllm"), "vllm");
  EXPECT_EQ(api_key(without, "", "vllm"), "vllm");
  EXPECT_EQ(api_key(without, nullptr, nullptr), "");
}

TEST(ServeFlags, AllowedOriginsTakeVllmsJsonListOrCommas) {
  using Origins = std::vector<std::string>;
  EXPECT_EQ(allowed_origins(parsed({"/m"})), Origins{"*"});
  EXPECT_EQ(allowed_origins(parsed({"/m", "--allowed-origins", R"(["https://a.example", "http://b:3000"])"})),
            (Origins{"https://a.example", "http://b:3000"}));
  EXPECT_EQ(allowed_origins(parsed({"/m", "--allowed-origins", "https://a.example, http://b:3000"})),
            (Origins{"https://a.example", "http://b:3000"}));
  EXPECT_TRUE(allowed_origins(parsed({"/m", "--allowed-origins", ""})).empty());
  EXPECT_NE(refusal({"/m", "--allowed-origins", "[1]"}).find("--allowed-origins"), std::string::npos);
  EXPECT_NE(refusal({"/m", "--allowed-origins", "[\"a\""}).find("--allowed-origins"), std::string::npos);
}

TEST(ServeFlags, RequestsAreLoggedUnlessDisableLogRequestsIsGiven) {
  EXPECT_TRUE(log_requests_enabled(parsed({"/m"})));
  EXPECT_FALSE(log_requests_enabled(parsed({"/m", "--disable-log-requests"})));
  EXPECT_NE(serve_flags().help().find("--disable-log-requests"), std::string::npos);
}

TEST(ServeFlags, HelpSaysWhatHasNoEffectAndWhichIssueBringsTheRest) {
  std::string help = serve_flags().help();
  for (const char* expected : {"--model,--model-path DIR", "--gpu-memory-utilization,--mem-fraction-static X",
                               "--tensor-parallel-size,--tp,--tp-size N", "no effect", "issue 9", "--speculative-config",
                               "--enable-dp-attention", "VLLM_API_KEY", "DSINFER_API_KEY wins", "[0, 65535]"})
    EXPECT_NE(help.find(expected), std::string::npos) << expected;
}

TEST(ServeFlags, NumbersOutOfRangeAreRefusedWhileParsing) {
  EXPECT_NE(refusal({"/m", "--port", "70000"}).find("--port: must be in [0, 65535]"), std::string::npos);
  EXPECT_NE(refusal({"/m", "--gpu-memory-utilization", "1.2"}).find("must be in [0, 1]"), std::string::npos);
  EXPECT_NE(refusal({"/m", "--mem-fraction-static", "-0.5"}).find("must be in [0, 1]"), std::string::npos);
  EXPECT_NE(refusal({"/m", "--max-num-seqs", "0"}).find("--max-num-seqs: must be at least 1, got 0"),
            std::string::npos);
  EXPECT_NE(refusal({"/m", "--shutdown-timeout", "100000"}).find("[0, 86400]"), std::string::npos);
  EXPECT_NE(refusal({"/m", "--tp", "0"}).find("must be in [1, 4096]"), std::string::npos);
  EXPECT_NE(refusal({"/m", "--max-model-len", "-1k"}).find("--max-model-len: must be an integer"),
            std::string::npos);
  EXPECT_NE(refusal({"/m", "--no-such-flag"}).find("not expected: --no-such-flag"), std::string::npos);
  EXPECT_EQ(refusal({"/m", "--port", "0", "--max-num-seqs", "1", "--gpu-memory-utilization", "1"}), "");
}

}  // namespace
}  // namespace dsinfer::cli
