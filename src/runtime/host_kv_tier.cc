#include "runtime/host_kv_tier.h"

#include <algorithm>
#include <cstdio>

#include "core/log.h"
#include "runtime/capacity.h"
#include "runtime/host_kv_store.h"

namespace dsinfer::runtime {

int64_t cache_page_bytes(model::LatentCache& cache) {
  int64_t bytes = 0;
  for (int64_t layer = 0; layer < cache.num_layers(); ++layer)
    bytes += static_cast<int64_t>(cache.layer(layer).nbytes()) / cache.layer(layer).dim(0);
  return bytes;
}

HostKvTier::HostKvTier(std::unique_ptr<KvStore> store, CacheAccess cache, PagePool& pool, PrefixCache& prefix_cache)
    : store_(std::move(store)),
      backend_(*cache.backend),
      cache_(*cache.cache),
      pool_(pool),
      prefix_cache_(prefix_cache) {
  for (int64_t layer = 0; layer < cache_.num_layers(); ++layer)
    layer_page_bytes_.push_back(cache_.layer(layer).nbytes() / static_cast<size_t>(cache_.layer(layer).dim(0)));
  DSINFER_CHECK(store_->page_bytes() == cache_page_bytes(cache_), "host KV tier: the store's pages are ",
                store_->page_bytes(), " bytes, the cache's ", cache_page_bytes(cache_));
}

HostKvTier::~HostKvTier() {
  try {
    backend_.synchronize();  // the store's memory goes with it
  } catch (const std::exception& error) {
    log_warning("host KV tier: the device failed while its last copies ran: ", error.what());
  }
}

std::byte* HostKvTier::staging() {
  if (!staging_) staging_ = backend_.allocate_host(static_cast<size_t>(store_->page_bytes()));
  return staging_.get();
}

// A page's bytes in the store: layer 0's row block of the page, then layer 1's, ...
void HostKvTier::copy_out(int32_t page, std::byte* host) {
  for (size_t layer = 0; layer < layer_page_bytes_.size(); ++layer) {
    const size_t bytes = layer_page_bytes_[layer];
    const size_t offset = static_cast<size_t>(page) * bytes;
    backend_.queue_copy_to_host(host, cache_.layer(static_cast<int64_t>(layer)), offset, bytes);
    host += bytes;
  }
}

void HostKvTier::copy_in(const std::byte* host, int32_t page) {
  for (size_t layer = 0; layer < layer_page_bytes_.size(); ++layer) {
    const size_t bytes = layer_page_bytes_[layer];
    const size_t offset = static_cast<size_t>(page) * bytes;
    backend_.queue_copy_from_host(cache_.layer(static_cast<int64_t>(layer)), offset, host, bytes);
    host += bytes;
  }
}

void HostKvTier::spill(std::span<const PrefixCache::EvictedPage> evicted) {
  for (const PrefixCache::EvictedPage& page : evicted) {
    if (store_->contains(page.key)) {  // the same key, the same bytes: only its use counts
      (void)store_->get(page.key);
      continue;
    }
    if (std::span<std::byte> room = store_->lend(page.key); !room.empty()) {
      copy_out(page.page, room.data());
    } else {
      copy_out(page.page, staging());
      backend_.synchronize();  // put reads the bytes on the host
      if (!store_->put(page.key, std::span<const std::byte>(staging(), static_cast<size_t>(store_->page_bytes()))))
        continue;
    }
    ++spilled_pages_;
  }
}

int64_t HostKvTier::restore(std::span<const int32_t> tokens, int64_t max_tokens, std::vector<int32_t>& pages) {
  const int page_size = static_cast<int>(cache_.page_size());
  const auto first = static_cast<int64_t>(pages.size());
  const int64_t last = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size())) / page_size;
  if (first >= last || store_->usage().pages == 0) return 0;
  const std::vector<PageKey> keys = page_keys(tokens, page_size, last);
  // The pages the store holds from there, marked used, so that the room made below evicts others.
  int64_t held = 0;
  while (first + held < last && !store_->get(keys[first + held]).empty()) ++held;
  if (held == 0) return 0;
  const int32_t group = 0;  // one group (make_host_kv_tier)
  if (pool_.free_count(group) < held) prefix_cache_.evict(static_cast<int32_t>(held - pool_.free_count(group)), group);
  std::vector<int32_t> fresh =
      pool_.allocate(static_cast<int32_t>(std::min<int64_t>(held, pool_.free_count(group))), group);
  size_t restored = 0;
  for (; restored < fresh.size(); ++restored) {
    // What the eviction above spilled may have pushed the page out of a small store.
    std::span<const std::byte> bytes = store_->get(keys[first + static_cast<int64_t>(restored)]);
    if (bytes.empty()) break;
    copy_in(bytes.data(), fresh[restored]);
  }
  for (size_t i = restored; i < fresh.size(); ++i) pool_.release(fresh[i]);
  if (restored == 0) return 0;
  pages.insert(pages.end(), fresh.begin(), fresh.begin() + static_cast<std::ptrdiff_t>(restored));
  prefix_cache_.insert(tokens.first(pages.size() * static_cast<size_t>(page_size)), pages);  // the tree adds its hold
  restored_pages_ += static_cast<int64_t>(restored);
  return static_cast<int64_t>(restored);
}

void HostKvTier::clear() { store_->clear(); }

HostKvStats HostKvTier::stats() const {
  const KvStoreUsage usage = store_->usage();
  HostKvStats stats;
  stats.capacity_bytes = usage.capacity_bytes;
  stats.pages = usage.pages;
  stats.bytes = usage.bytes;
  stats.spilled_pages = spilled_pages_;
  stats.restored_pages = restored_pages_;
  stats.hit_tokens = restored_pages_ * cache_.page_size();
  return stats;
}

std::unique_ptr<HostKvTier> make_host_kv_tier(const HostKvConfig& config, StepExecutor& executor, PagePool& pool,
                                              PrefixCache* prefix_cache, CapacityScheduler& capacity) {
  if (!config.enabled()) return nullptr;
  DSINFER_CHECK(prefix_cache, "the host KV cache keeps the pages the prefix cache evicts: it needs prefix caching on");
  DSINFER_CHECK(pool.groups() == 1, "the host KV cache serves one page group; DP attention splits the KV cache into ",
                pool.groups());
  const CacheAccess cache = executor.cache_access();
  DSINFER_CHECK(cache.cache && cache.backend, "the host KV cache copies pages of one latent cache: a sharded model "
                "(--tp, --dp, --ep above 1) holds one a rank, which it does not serve yet");
  const int64_t page_bytes = cache_page_bytes(*cache.cache);
  const int64_t budget = config.bytes > 0 ? config.bytes
                                          : static_cast<int64_t>(config.ratio * static_cast<double>(pool.total()) *
                                                                 static_cast<double>(page_bytes));
  DSINFER_CHECK(budget >= page_bytes, "the host KV cache of ", budget, " bytes holds no page (a page of every layer ",
                "is ", page_bytes, " bytes)");
  backend::Backend& backend = *cache.backend;
  auto store = std::make_unique<HostKvStore>(page_bytes, budget,
                                             [&backend](size_t bytes) { return backend.allocate_host(bytes); });
  const int64_t store_pages = store->capacity_pages();
  auto tier = std::make_unique<HostKvTier>(std::move(store), cache, pool, *prefix_cache);
  prefix_cache->set_eviction_sink([spill_to = tier.get()](std::span<const PrefixCache::EvictedPage> evicted) {
    spill_to->spill(evicted);
  });
  capacity.set_host_tier(tier.get());
  char size[64];
  std::snprintf(size, sizeof(size), "%.2f GiB", static_cast<double>(store_pages * page_bytes) / (1 << 30));
  log_info("host KV cache: ", store_pages, " pages of ", page_bytes, " bytes (", size, " of ",
           backend.device() == Device::kCpu ? "host" : "page-locked host", " memory) under a KV cache of ",
           pool.total(), " pages");
  return tier;
}

}  // namespace dsinfer::runtime
