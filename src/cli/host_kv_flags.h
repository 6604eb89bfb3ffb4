// The host KV tier's flags of `serve` (issue 14, runtime/host_kv_tier.h: pages the prefix cache
// evicts are copied to host memory and come back for later prompts), in our and SGLang's spellings:
//
//   ours:   --host-kv-cache-gb G    G GiB of host memory (0 or unset: no tier)
//   SGLang: --enable-hierarchical-cache [--hicache-size G] [--hicache-ratio R]
//           G GiB when given and above 0, else R times the device's KV cache (SGLang's default 2);
//           --hicache-write-policy write_back (what the tier does: a page is copied out when the
//           prefix cache evicts it; write_through and write_through_selective are refused).
//
// Refused, before anything loads: --hicache-storage-backend (no remote store is built in; one run
// by the operator, Mooncake's or LMCache's, would implement runtime::KvStore), any --hicache-* flag
// without --enable-hierarchical-cache (SGLang would ignore it silently), --host-kv-cache-gb and
// --hicache-size that disagree, or --host-kv-cache-gb 0 beside --enable-hierarchical-cache, the
// tier with prefix caching off (it keeps what the prefix cache evicts), and the tier on several
// ranks (--tp, --dp or --ep above 1: each rank holds a cache of its own, which it does not serve yet).
#pragma once

#include "cli/flags.h"
#include "runtime/host_kv_tier.h"

namespace dsinfer::cli {

void add_host_kv_flags(Flags& flags);
// What the flags ask for (HostKvConfig::enabled() false: no tier). Throws dsinfer::Error naming
// the flag for the refusals above.
runtime::HostKvConfig host_kv_cache(const Flags& flags);

}  // namespace dsinfer::cli
