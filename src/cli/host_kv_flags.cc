#include "cli/host_kv_flags.h"

#include <limits>

#include "cli/parallel_flags.h"
#include "cli/serve_flags.h"
#include "core/error.h"

namespace dsinfer::cli {
namespace {

constexpr double kGiB = 1 << 30;
constexpr double kSglangRatio = 2.0;  // SGLang's --hicache-ratio default

}  // namespace

void add_host_kv_flags(Flags& flags) {
  flags.add_double("host-kv-cache-gb", "GiB of host memory for the KV pages the prefix cache evicts, which come "
                   "back for later prompts instead of being computed again (default 0: none)");
  flags.add_bool("enable-hierarchical-cache", "SGLang's spelling of the host KV cache: --hicache-size GiB, else "
                 "--hicache-ratio times the device's KV cache");
  flags.add_double("hicache-size", "with --enable-hierarchical-cache: GiB of host memory (0: from --hicache-ratio)");
  flags.add_double("hicache-ratio", "with --enable-hierarchical-cache: host memory as a multiple of the device's KV "
                   "cache (default 2)");
  flags.add_string("hicache-write-policy", "POLICY", "with --enable-hierarchical-cache: write_back only (a page goes "
                   "to host memory when the prefix cache evicts it)");
  flags.add_string("hicache-storage-backend", "NAME", "refused: no remote KV store is built in (issue 14)");
  constexpr double kNoMax = std::numeric_limits<double>::infinity();
  flags.set_range("host-kv-cache-gb", 0, kNoMax);
  flags.set_range("hicache-size", 0, kNoMax);
  flags.set_range("hicache-ratio", 0, kNoMax);
}

runtime::HostKvConfig host_kv_cache(const Flags& flags) {
  DSINFER_CHECK(!flags.has("hicache-storage-backend"), "--hicache-storage-backend ",
                flags.get_string("hicache-storage-backend"), ": dsinfer has no remote KV store built in; the host KV "
                "cache (--host-kv-cache-gb) keeps pages in this process's memory (a store run by the operator, such "
                "as Mooncake's or LMCache's, would implement runtime::KvStore)");
  const bool sglang = flags.get_bool("enable-hierarchical-cache");
  for (const char* name : {"hicache-size", "hicache-ratio", "hicache-write-policy"})
    DSINFER_CHECK(sglang || !flags.has(name), "--", name, " needs --enable-hierarchical-cache (or give "
                  "--host-kv-cache-gb)");
  if (flags.has("hicache-write-policy")) {
    const std::string policy = flags.get_string("hicache-write-policy");
    DSINFER_CHECK(policy == "write_back", "--hicache-write-policy ", policy, " is not supported: dsinfer copies a "
                  "page to host memory when the prefix cache evicts it (write_back)");
  }
  runtime::HostKvConfig config;
  const bool ours = flags.has("host-kv-cache-gb");
  const double gib = ours ? flags.get_double("host-kv-cache-gb") : 0.0;
  const double sglang_gib = flags.has("hicache-size") ? flags.get_double("hicache-size") : 0.0;
  DSINFER_CHECK(!(ours && sglang_gib > 0 && gib != sglang_gib), "--host-kv-cache-gb ", gib, " and --hicache-size ",
                sglang_gib, " disagree; give one");
  DSINFER_CHECK(!(ours && gib == 0 && sglang), "--host-kv-cache-gb 0 turns off the host KV cache that "
                "--enable-hierarchical-cache turns on; give one");
  if (gib > 0 || sglang_gib > 0) {
    config.bytes = static_cast<int64_t>((gib > 0 ? gib : sglang_gib) * kGiB);
  } else if (sglang) {
    config.ratio = flags.has("hicache-ratio") ? flags.get_double("hicache-ratio") : kSglangRatio;
    DSINFER_CHECK(config.ratio > 0, "--hicache-ratio must be above 0, got ", config.ratio);
  }
  if (!config.enabled()) return config;
  DSINFER_CHECK(prefix_caching_enabled(flags), "the host KV cache keeps the pages the prefix cache evicts: it needs "
                "prefix caching (drop --no-enable-prefix-caching / --disable-radix-cache)");
  const int ranks = parallel_config(flags).world_size();
  DSINFER_CHECK(ranks == 1, "the host KV cache serves one rank (the CPU or one GPU) yet; this layout has ", ranks,
                " (--tp, --dp, --ep)");
  return config;
}

}  // namespace dsinfer::cli
