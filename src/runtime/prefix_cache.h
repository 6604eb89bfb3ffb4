// PrefixCache: a radix tree over full KV pages, so a prompt that starts like an earlier one
// reuses that one's pages instead of recomputing them.
//
// Each node is one page: its key is the page's tokens, its path from the root the tokens before
// it. The tree holds one reference on every page it keeps (PagePool); a sequence that reuses a
// page holds another. Pages only the tree holds are evictable, least recently used leaves first.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "runtime/page_pool.h"

namespace dsinfer::runtime {

class PrefixCache {
 public:
  PrefixCache(PagePool& pool, int page_size);
  ~PrefixCache();  // releases the tree's holds

  // Pages of the longest cached prefix of `tokens` (whole pages, at most max_tokens tokens).
  // The caller gets one hold on each returned page. Counts the lookup in the hit statistics.
  std::vector<int32_t> match(std::span<const int32_t> tokens, int64_t max_tokens);
  // Offers a sequence's pages: pages[i] holds tokens [i * page_size, (i + 1) * page_size). Only
  // full pages are taken; the tree adds its own hold on pages it did not know.
  void insert(std::span<const int32_t> tokens, const std::vector<int32_t>& pages);
  // Drops up to `count` pages that only the tree holds, oldest leaves first; returns how many.
  int32_t evict(int32_t count);

  int32_t evictable() const { return pool_.cached_only_count(); }  // pages only the tree holds
  int32_t cached() const { return cached_; }
  int64_t queried_tokens() const { return queried_tokens_; }
  int64_t hit_tokens() const { return hit_tokens_; }

 private:
  struct Node {
    Node* parent = nullptr;
    int32_t page = -1;
    uint64_t last_used = 0;
    std::map<std::vector<int32_t>, std::unique_ptr<Node>> children;
  };
  void release_subtree(Node& node);
  void collect_evictable_leaves(Node& node, std::vector<Node*>& out) const;

  PagePool& pool_;
  int page_size_;
  Node root_;
  uint64_t clock_ = 0;
  int32_t cached_ = 0;
  int64_t queried_tokens_ = 0;
  int64_t hit_tokens_ = 0;
};

}  // namespace dsinfer::runtime
