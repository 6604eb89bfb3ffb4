// The host KV tier: a KvStore under the prefix cache, so that a page the cache evicts is copied out
// instead of lost, and comes back when a later prompt needs it (SGLang's HiCache with its write_back
// policy, vLLM's CPU offload).
//
//   spill:   the prefix cache hands each page it evicts to spill(), with its token path's key; the
//            page's rows (every layer's) are copied into the store, which keeps what fits in its
//            budget, least recently used out first. A page the store holds already is not copied.
//   restore: when a new prompt's match in the prefix cache stops at page i and the store holds pages
//            i, i + 1, ... of the same path, restore() takes pool pages for them (evicting, and so
//            spilling, the cache's least recently used pages if need be), copies them in and puts
//            them in the prefix cache like computed pages; the sequence counts them as cached tokens.
//            A restore that gets no pages, or finds a page gone, stops there: the rest is computed.
//
// Ordering on a GPU: the copies are queued on the backend's stream (Backend::queue_copy_to_host and
// _from_host, page-locked memory), between the steps. A spill's copy runs after every step launched
// before it (one still writing the page included) and a restore's before every step launched after
// it, so neither waits for the device. The host never touches the store's bytes itself (the store
// lends its slots, KvStore::lend); only a store that cannot lend makes a spill wait for its copy.
//
// One page group on one rank: DP attention and sharded models are refused (make_host_kv_tier).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/executor.h"
#include "runtime/kv_store.h"
#include "runtime/page_pool.h"
#include "runtime/prefix_cache.h"

namespace dsinfer::runtime {

class CapacityScheduler;

// --host-kv-cache-gb and SGLang's --hicache-size / --hicache-ratio.
struct HostKvConfig {
  int64_t bytes = 0;   // the store's budget; 0: from ratio
  double ratio = 0.0;  // else this many times the device cache's bytes; both 0: no tier
  bool enabled() const { return bytes > 0 || ratio > 0.0; }
};

struct HostKvStats {
  int64_t capacity_bytes = 0;  // 0: no tier
  int64_t pages = 0;           // held now
  int64_t bytes = 0;           // held now
  int64_t spilled_pages = 0;   // copied out of the device cache
  int64_t restored_pages = 0;  // copied back into it
  int64_t hit_tokens = 0;      // prompt tokens restored instead of computed
};

class HostKvTier {
 public:
  // The cache, pool and prefix cache must outlive the tier.
  HostKvTier(std::unique_ptr<KvStore> store, CacheAccess cache, PagePool& pool, PrefixCache& prefix_cache);
  ~HostKvTier();  // waits for the copies still queued on the device
  HostKvTier(const HostKvTier&) = delete;
  HostKvTier& operator=(const HostKvTier&) = delete;

  // The prefix cache's eviction sink.
  void spill(std::span<const PrefixCache::EvictedPage> evicted);
  // `pages` hold the prefix cache's match of `tokens` (whole pages, one hold each); appends the pages
  // that follow them in the store, up to max_tokens, restored into pool pages the caller then holds
  // once each, and returns how many.
  int64_t restore(std::span<const int32_t> tokens, int64_t max_tokens, std::vector<int32_t>& pages);
  void clear();  // drops every page of the store
  HostKvStats stats() const;

 private:
  std::byte* staging();  // a page of page-locked memory, for a store that cannot lend
  void copy_out(int32_t page, std::byte* host);
  void copy_in(const std::byte* host, int32_t page);

  std::unique_ptr<KvStore> store_;
  backend::Backend& backend_;
  model::LatentCache& cache_;
  PagePool& pool_;
  PrefixCache& prefix_cache_;
  std::vector<size_t> layer_page_bytes_;  // per layer: one page's row block
  std::shared_ptr<std::byte> staging_;
  int64_t spilled_pages_ = 0;
  int64_t restored_pages_ = 0;
};

// The bytes of one page of `cache`: every layer's row block.
int64_t cache_page_bytes(model::LatentCache& cache);

// The tier `config` asks for, spilling what `prefix_cache` evicts and restoring for `capacity`'s
// admissions; null when config is off. Throws dsinfer::Error for what it cannot serve: prefix caching
// off, several page groups (DP attention), an executor without one latent cache (a sharded model),
// a budget under one page.
std::unique_ptr<HostKvTier> make_host_kv_tier(const HostKvConfig& config, StepExecutor& executor, PagePool& pool,
                                              PrefixCache* prefix_cache, CapacityScheduler& capacity);

}  // namespace dsinfer::runtime
