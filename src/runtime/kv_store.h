// KvStore: KV-cache pages kept below the device's cache, each under the key of its token path, so
// that a page the prefix cache evicted can come back instead of being computed again (the host KV
// tier, host_kv_tier.h, is its user).
//
// A page here is every layer's row block of one page of model::LatentCache, layer after layer:
// page_bytes() = sum over layers of page_size * row bytes. Its key (PageKey) hashes every token
// from the start of the sequence to the end of the page, since a page's rows depend on all of
// them: the same key means the same bytes, so a store never needs to overwrite a page it holds.
//
// HostKvStore (host_kv_store.h) keeps pages in this process's host memory. A store run by the
// operator outside the process, such as Mooncake's distributed store or LMCache's server, would
// implement the same interface (put copies the bytes out, get brings them back into a buffer of its
// own); dsinfer builds none in. Such a store shared by several instances must also key by the
// model and the cache's format, which a process-local store need not: that belongs to its
// implementation.
//
// Every call comes from the engine thread: a store needs no locking of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace dsinfer::runtime {

// The key of a page: a 128-bit hash chain over the token path, each page's key mixing its parent's
// with the page's tokens. Not cryptographic: enough against accidental collisions (2^-64 for a
// billion pages), not against prompts crafted to collide; a store shared between tenants should
// rehash it with a secret.
struct PageKey {
  uint64_t high = 0;
  uint64_t low = 0;
  bool operator==(const PageKey&) const = default;
};

struct PageKeyHash {
  size_t operator()(const PageKey& key) const { return static_cast<size_t>(key.low ^ (key.high >> 1)); }
};

// The key of the page holding `tokens` after the page keyed `parent` (PageKey{} before the first).
PageKey next_page_key(const PageKey& parent, std::span<const int32_t> tokens);
// The keys of the first `pages` full pages of `tokens` (page_size tokens each).
std::vector<PageKey> page_keys(std::span<const int32_t> tokens, int page_size, int64_t pages);

struct KvStoreUsage {
  int64_t pages = 0;           // held now
  int64_t bytes = 0;           // of page data held now
  int64_t capacity_bytes = 0;  // the budget (pages beyond it are evicted, least recently used first)
};

class KvStore {
 public:
  virtual ~KvStore() = default;

  virtual int64_t page_bytes() const = 0;
  // Keeps a copy of `page` (page_bytes() bytes) under `key`, evicting by the store's own policy to
  // make room; false when it cannot take it. A key already held is only marked used.
  virtual bool put(const PageKey& key, std::span<const std::byte> page) = 0;
  // The bytes under `key`, or an empty span on a miss; counts as a use of the page. The bytes stay
  // valid and unchanged until the next put, lend or clear.
  virtual std::span<const std::byte> get(const PageKey& key) = 0;
  // Whether `key` is held; not a use.
  virtual bool contains(const PageKey& key) const = 0;
  virtual KvStoreUsage usage() const = 0;
  virtual void clear() = 0;  // drops every page

  // A store in this process's page-locked memory may lend its own room for `key`'s page, so that a
  // device copy lands there directly (put without the second copy): page_bytes() bytes that are
  // `key`'s from now on, which the caller fills at once or by a copy queued on the device before
  // any later read of them (the store itself never reads them). Empty: use put. The default lends
  // nothing.
  virtual std::span<std::byte> lend(const PageKey& key) { return {}; }
};

}  // namespace dsinfer::runtime
