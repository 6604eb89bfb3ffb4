// The host KV cache's serve flags (issue 14): ours and SGLang's spellings mean the same, and what the
// tier cannot honour is refused before anything loads.
#include "cli/host_kv_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/serve_flags.h"
#include "cli/flags_testing.h"
#include "core/error.h"

namespace dsinfer::cli {
namespace {

Flags parsed(std::vector<std::string> args) { return flag_testing::parsed_serve_flags(std::move(args)); }

// The message of the Error that checking `args` throws ("" when none).
std::string refusal(std::vector<std::string> args) {
  return flag_testing::error_of([&] { parsed(std::move(args)); });
}

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(HostKvFlags, OursAndSglangsSpellingsMeanTheSame) {
  const runtime::HostKvConfig ours = host_kv_cache(parsed({"/m", "--host-kv-cache-gb", "4"}));
  EXPECT_EQ(ours.bytes, 4 * kGiB);
  EXPECT_EQ(ours.ratio, 0.0);
  const runtime::HostKvConfig sglang =
      host_kv_cache(parsed({"/m", "--enable-hierarchical-cache", "--hicache-size", "4"}));
  EXPECT_EQ(sglang.bytes, ours.bytes);
  EXPECT_EQ(sglang.ratio, 0.0);
  EXPECT_EQ(host_kv_cache(parsed({"/m", "--host-kv-cache-gb", "0.5"})).bytes, kGiB / 2);
  // Both spellings at once, agreeing; SGLang's size wins over its ratio, as in SGLang.
  EXPECT_EQ(host_kv_cache(parsed({"/m", "--enable-hierarchical-cache", "--hicache-size", "4", "--host-kv-cache-gb",
                                  "4", "--hicache-ratio", "3", "--hicache-write-policy", "write_back"}))
                .bytes,
            4 * kGiB);
}

TEST(HostKvFlags, SglangsRatioSizesTheTierByTheDeviceCache) {
  EXPECT_EQ(host_kv_cache(parsed({"/m", "--enable-hierarchical-cache"})).ratio, 2.0);  // SGLang's default
  const runtime::HostKvConfig ratio = host_kv_cache(parsed({"/m", "--enable-hierarchical-cache", "--hicache-ratio",
                                                            "1.5", "--hicache-size", "0"}));
  EXPECT_EQ(ratio.ratio, 1.5);
  EXPECT_EQ(ratio.bytes, 0);
}

TEST(HostKvFlags, WithoutThemThereIsNoTier) {
  EXPECT_FALSE(host_kv_cache(parsed({"/m"})).enabled());
  EXPECT_FALSE(host_kv_cache(parsed({"/m", "--host-kv-cache-gb", "0"})).enabled());
  EXPECT_FALSE(host_kv_cache(parsed({"/m", "--host-kv-cache-gb", "0", "--no-enable-prefix-caching"})).enabled());
  EXPECT_NE(serve_flags().help().find("--host-kv-cache-gb"), std::string::npos);
}

TEST(HostKvFlags, WhatTheTierCannotHonourIsRefused) {
  auto refused = [](std::vector<std::string> args, const std::string& expected) {
    const std::string message = refusal(std::move(args));
    EXPECT_NE(message.find(expected), std::string::npos) << "message: " << message;
  };
  refused({"/m", "--enable-hierarchical-cache", "--hicache-storage-backend", "mooncake"}, "no remote KV store");
  refused({"/m", "--enable-hierarchical-cache", "--hicache-write-policy", "write_through"},
          "--hicache-write-policy write_through is not supported");
  refused({"/m", "--hicache-size", "4"}, "--hicache-size needs --enable-hierarchical-cache");
  refused({"/m", "--hicache-ratio", "2"}, "--hicache-ratio needs --enable-hierarchical-cache");
  refused({"/m", "--host-kv-cache-gb", "4", "--enable-hierarchical-cache", "--hicache-size", "8"}, "disagree");
  refused({"/m", "--host-kv-cache-gb", "0", "--enable-hierarchical-cache"}, "give one");
  refused({"/m", "--enable-hierarchical-cache", "--hicache-ratio", "0"}, "--hicache-ratio must be above 0");
  refused({"/m", "--host-kv-cache-gb", "-1"}, "--host-kv-cache-gb");
  refused({"/m", "--host-kv-cache-gb", "4", "--disable-radix-cache"}, "needs prefix caching");
  refused({"/m", "--host-kv-cache-gb", "4", "--tp", "2"}, "serves one rank");
  refused({"/m", "--enable-hierarchical-cache", "--tp", "4", "--dp", "4", "--enable-dp-attention"}, "serves one rank");
}

}  // namespace
}  // namespace dsinfer::cli
