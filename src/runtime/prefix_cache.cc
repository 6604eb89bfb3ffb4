#include "runtime/prefix_cache.h"

#include <algorithm>

namespace dsinfer::runtime {

PrefixCache::PrefixCache(PagePool& pool, int page_size) : pool_(pool), page_size_(page_size) {}

PrefixCache::~PrefixCache() { release_subtree(root_); }

void PrefixCache::release_subtree(Node& node) {
  for (auto& [key, child] : node.children) {
    release_subtree(*child);
    pool_.set_cached(child->page, false);
    pool_.release(child->page);
  }
  node.children.clear();
}

std::vector<int32_t> PrefixCache::match(std::span<const int32_t> tokens, int64_t max_tokens) {
  std::vector<int32_t> pages;
  int64_t limit = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size()));
  ++clock_;
  Node* node = &root_;
  for (int64_t start = 0; start + page_size_ <= limit; start += page_size_) {
    std::vector<int32_t> key(tokens.begin() + start, tokens.begin() + start + page_size_);
    auto it = node->children.find(key);
    if (it == node->children.end()) break;
    node = it->second.get();
    node->last_used = clock_;
    pool_.retain(node->page);
    pages.push_back(node->page);
  }
  queried_tokens_ += limit;
  hit_tokens_ += static_cast<int64_t>(pages.size()) * page_size_;
  return pages;
}

void PrefixCache::insert(std::span<const int32_t> tokens, const std::vector<int32_t>& pages) {
  ++clock_;
  Node* node = &root_;
  size_t full_pages = std::min(pages.size(), tokens.size() / page_size_);
  for (size_t i = 0; i < full_pages; ++i) {
    std::vector<int32_t> key(tokens.begin() + i * page_size_, tokens.begin() + (i + 1) * page_size_);
    auto& child = node->children[key];
    if (!child) {
      child = std::make_unique<Node>();
      child->parent = node;
      child->page = pages[i];
      pool_.retain(pages[i]);
      pool_.set_cached(pages[i], true);
      ++cached_;
    }
    child->last_used = clock_;
    node = child.get();
  }
}

void PrefixCache::collect_evictable_leaves(Node& node, std::vector<Node*>& out) const {
  for (auto& [key, child] : node.children) {
    if (child->children.empty()) {
      if (pool_.ref_count(child->page) == 1) out.push_back(child.get());
    } else {
      collect_evictable_leaves(*child, out);
    }
  }
}

int32_t PrefixCache::evict(int32_t count) {
  int32_t evicted = 0;
  while (evicted < count) {
    std::vector<Node*> leaves;
    collect_evictable_leaves(root_, leaves);
    if (leaves.empty()) break;
    std::sort(leaves.begin(), leaves.end(), [](Node* a, Node* b) { return a->last_used < b->last_used; });
    // Evicting a leaf can expose its parent as a new leaf; rescan after this batch.
    for (Node* leaf : leaves) {
      if (evicted == count) break;
      Node* parent = leaf->parent;
      pool_.set_cached(leaf->page, false);
      pool_.release(leaf->page);
      --cached_;
      ++evicted;
      for (auto it = parent->children.begin(); it != parent->children.end(); ++it) {
        if (it->second.get() == leaf) {
          parent->children.erase(it);
          break;
        }
      }
    }
  }
  return evicted;
}

}  // namespace dsinfer::runtime
