// A request's latent-cache pages moved from one serving instance's cache into another's (prefill/
// decode disaggregation) through a transfer::KvTransfer: every layer's cache tensor registered once,
// the receiving cache described to the sender in one blob through the control plane, and a
// request's pages written layer by layer, runs of consecutive pages as one write.
//
// The decode instance allocates the pages and describes its cache; the prefill instance imports the
// description once per peer and pushes each request's pages into the pages it was given, with the
// request's note on the last layer's transfer (a note tells that every earlier write to that peer
// has landed), so the decode side starts the request when its note arrives.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/kv_cache.h"
#include "transfer/kv_transfer.h"

namespace dsinfer::runtime {

// This instance's cache, registered with `agent` for transfers in and out. Both must outlive it.
class CacheRegions {
 public:
  CacheRegions(transfer::KvTransfer& agent, model::LatentCache& cache);

  // Every layer's region descriptor and the page size in bytes, for a peer's RemoteCache.
  transfer::Blob describe() const;
  int region(int64_t layer) const { return regions_.at(static_cast<size_t>(layer)); }
  int64_t num_layers() const { return static_cast<int64_t>(regions_.size()); }
  int64_t num_pages() const { return pages_; }
  uint64_t page_bytes() const { return page_bytes_; }

 private:
  transfer::KvTransfer& agent_;
  std::vector<int> regions_;
  int64_t pages_;
  uint64_t page_bytes_;
};

// A peer's cache, from its CacheRegions::describe() blob.
class RemoteCache {
 public:
  RemoteCache(transfer::KvTransfer& agent, int peer, const transfer::Blob& description);

  int region(int64_t layer) const { return regions_.at(static_cast<size_t>(layer)); }
  int64_t num_layers() const { return static_cast<int64_t>(regions_.size()); }
  uint64_t page_bytes() const { return page_bytes_; }

 private:
  std::vector<int> regions_;
  uint64_t page_bytes_ = 0;
};

// Posts layers [first_layer, last_layer) of local pages `from` into the peer's pages `to` (the same
// count, pairwise), one transfer a layer; the last carries `note`. The caches must match (layers and
// page bytes), and every page id must lie in its cache: dsinfer::Error before anything is posted.
// Returns the transfers, in layer order.
std::vector<uint64_t> post_pages(transfer::KvTransfer& agent, const CacheRegions& local, const RemoteCache& remote,
                                 std::span<const int32_t> from, std::span<const int32_t> to, int64_t first_layer,
                                 int64_t last_layer, const transfer::Blob& note);

// Posts `note` alone, one transfer with no writes: the peer receives it once every transfer posted
// to it before has landed (a layer-wise send whose layers went without one). Returns the transfer.
uint64_t post_note(transfer::KvTransfer& agent, const CacheRegions& local, const RemoteCache& remote,
                   const transfer::Blob& note);

}  // namespace dsinfer::runtime
