// PrefixCache: a radix tree over full KV pages, so a prompt that starts like an earlier one
// reuses that one's pages instead of recomputing them.
//
// Each node is one page: its key is the page's tokens, its path from the root the tokens before
// it. The tree holds one reference on every page it keeps (PagePool); a sequence that reuses a
// page holds another. Pages only the tree holds are evictable, leaves only (a page is useful only
// after those of its prefix), least recently used first.
//
// Eviction reads an ordered set of the leaves instead of walking the tree, so its cost follows the
// pages it frees (and the leaves that running sequences hold, which it steps over), not the size
// of the cache. Each eviction takes the least recently used evictable leaf of the whole tree; a
// parent whose last child goes joins the leaves at once, in its own place. (The rescan this
// replaced evicted the leaves it had found in one batch before looking at the parents they
// exposed, so it could drop a page used later than a parent it kept.)
//
// With a pool of several page groups (DP attention: page_pool.h) the cache is a tree per group,
// since a sequence's pages all lie in one: a sequence's pages go into their group's tree, a prompt
// matches the group that holds the longest part of it (its prefix is read where it was computed),
// and eviction can free a given group's pages.
//
// The host KV tier (host_kv_tier.h) sits below: given an eviction sink, the tree keys each page by
// its token path (kv_store.h's PageKey) and hands every page it evicts to the sink, which copies its
// contents out before anything can reuse the page.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <vector>

#include "runtime/kv_store.h"
#include "runtime/page_pool.h"

namespace dsinfer::runtime {

class PrefixCache {
 public:
  PrefixCache(PagePool& pool, int page_size);
  ~PrefixCache();  // releases the tree's holds

  // Pages of the longest cached prefix of `tokens` (whole pages, at most max_tokens tokens), in
  // the group that holds the longest one (the lowest such group on a tie). The caller gets one
  // hold on each returned page. Counts the lookup in the hit statistics.
  std::vector<int32_t> match(std::span<const int32_t> tokens, int64_t max_tokens);
  // Offers a sequence's pages (all of one group): pages[i] holds tokens [i * page_size,
  // (i + 1) * page_size). Only full pages are taken; the tree adds its own hold on pages it did not know.
  void insert(std::span<const int32_t> tokens, const std::vector<int32_t>& pages);
  // Drops up to `count` pages that only the tree holds, oldest leaves first, of every group or of
  // `group`; returns how many.
  int32_t evict(int32_t count);
  int32_t evict(int32_t count, int32_t group);
  // Drops every page that only the tree holds (all of them while no sequence runs), handing none to
  // the eviction sink (/flush_cache); returns how many.
  int32_t clear();

  // The pages evict() drops, each with its token path's key, while their contents are still
  // theirs (nothing reuses a page before the sink returns). Set before the first insert.
  struct EvictedPage {
    PageKey key;
    int32_t page = -1;
  };
  using EvictionSink = std::function<void(std::span<const EvictedPage>)>;
  void set_eviction_sink(EvictionSink sink);

  int32_t evictable() const { return pool_.cached_only_count(); }  // pages only the tree holds
  int32_t evictable(int32_t group) const { return pool_.cached_only_count(group); }
  int32_t cached() const { return cached_; }
  int64_t queried_tokens() const { return queried_tokens_; }
  int64_t hit_tokens() const { return hit_tokens_; }

 private:
  struct Node {
    Node* parent = nullptr;
    const std::vector<int32_t>* key = nullptr;  // this node's key in parent->children
    int32_t page = -1;
    uint64_t id = 0;         // creation order: gives every node its own place among the leaves
    uint64_t last_used = 0;  // every use of a node uses its ancestors too: never older than a child
    PageKey path_key;        // with an eviction sink: the key of the tokens from the root to this page's end
    std::map<std::vector<int32_t>, std::unique_ptr<Node>> children;
  };
  struct LeastRecentlyUsedFirst {
    bool operator()(const Node* a, const Node* b) const {
      return a->last_used != b->last_used ? a->last_used < b->last_used : a->id < b->id;
    }
  };
  using Leaves = std::set<Node*, LeastRecentlyUsedFirst>;
  void touch(Node& node);  // marks the node used now
  void release_subtree(Node& node);
  // The cached pages of the longest prefix of `tokens` under `root`, up to `limit` tokens.
  int64_t matched_pages(const Node& root, std::span<const int32_t> tokens, int64_t limit) const;
  Leaves& leaves_of(const Node& node) { return leaves_[pool_.group_of(node.page)]; }
  // Evicts as evict(count, group) does; appends what it dropped to `evicted` when given.
  int32_t evict_leaves(int32_t count, int32_t group, std::vector<EvictedPage>* evicted);

  PagePool& pool_;
  int page_size_;
  std::vector<Node> roots_;  // one a page group
  // Per group, every node but the root without children, whether a sequence holds its page or not
  // (the pool counts those holds; the cache is not told when they end). A node's fields that order
  // it change only while it is out of the set.
  std::vector<Leaves> leaves_;
  uint64_t clock_ = 0;
  uint64_t next_id_ = 0;
  int32_t cached_ = 0;
  int64_t queried_tokens_ = 0;
  int64_t hit_tokens_ = 0;
  EvictionSink eviction_sink_;
  std::vector<EvictedPage> evicted_;  // reused by each eviction with a sink
};

}  // namespace dsinfer::runtime
