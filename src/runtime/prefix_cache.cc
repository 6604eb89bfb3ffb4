#include "runtime/prefix_cache.h"

#include <algorithm>

#include "core/error.h"

namespace dsinfer::runtime {

PrefixCache::PrefixCache(PagePool& pool, int page_size)
    : pool_(pool), page_size_(page_size), roots_(pool.groups()), leaves_(pool.groups()) {}

PrefixCache::~PrefixCache() {
  for (Node& root : roots_) release_subtree(root);
}

void PrefixCache::release_subtree(Node& node) {
  for (auto& [key, child] : node.children) {
    release_subtree(*child);
    pool_.set_cached(child->page, false);
    pool_.release(child->page);
  }
  node.children.clear();
}

void PrefixCache::touch(Node& node) {
  if (!node.children.empty()) {
    node.last_used = clock_;
    return;
  }
  Leaves& leaves = leaves_of(node);
  leaves.erase(&node);  // re-sorted under its new time
  node.last_used = clock_;
  leaves.insert(&node);
}

int64_t PrefixCache::matched_pages(const Node& root, std::span<const int32_t> tokens, int64_t limit) const {
  const Node* node = &root;
  int64_t pages = 0;
  for (int64_t start = 0; start + page_size_ <= limit; start += page_size_, ++pages) {
    auto it = node->children.find(std::vector<int32_t>(tokens.begin() + start, tokens.begin() + start + page_size_));
    if (it == node->children.end()) break;
    node = it->second.get();
  }
  return pages;
}

std::vector<int32_t> PrefixCache::match(std::span<const int32_t> tokens, int64_t max_tokens) {
  std::vector<int32_t> pages;
  int64_t limit = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size()));
  ++clock_;
  size_t best = 0;  // the group holding the longest prefix
  if (roots_.size() > 1) {
    int64_t longest = 0;
    for (size_t g = 0; g < roots_.size(); ++g)
      if (int64_t pages = matched_pages(roots_[g], tokens, limit); pages > longest) {
        longest = pages;
        best = g;
      }
  }
  Node* node = &roots_[best];
  for (int64_t start = 0; start + page_size_ <= limit; start += page_size_) {
    std::vector<int32_t> key(tokens.begin() + start, tokens.begin() + start + page_size_);
    auto it = node->children.find(key);
    if (it == node->children.end()) break;
    node = it->second.get();
    touch(*node);
    pool_.retain(node->page);
    pages.push_back(node->page);
  }
  queried_tokens_ += limit;
  hit_tokens_ += static_cast<int64_t>(pages.size()) * page_size_;
  return pages;
}

void PrefixCache::insert(std::span<const int32_t> tokens, const std::vector<int32_t>& pages) {
  if (pages.empty()) return;
  ++clock_;
  const int32_t group = pool_.group_of(pages[0]);
  Node* node = &roots_[group];
  size_t full_pages = std::min(pages.size(), tokens.size() / page_size_);
  for (size_t i = 0; i < full_pages; ++i)
    DSINFER_CHECK(pool_.group_of(pages[i]) == group, "prefix cache: a sequence's pages span page groups ", group,
                  " and ", pool_.group_of(pages[i]));
  for (size_t i = 0; i < full_pages; ++i) {
    std::vector<int32_t> key(tokens.begin() + i * page_size_, tokens.begin() + (i + 1) * page_size_);
    auto it = node->children.find(key);
    if (it != node->children.end()) {
      node = it->second.get();
      touch(*node);
      continue;
    }
    pool_.retain(pages[i]);
    pool_.set_cached(pages[i], true);
    ++cached_;
    if (node->parent && node->children.empty()) leaves_[group].erase(node);  // a leaf no more
    auto child = std::make_unique<Node>();
    child->parent = node;
    child->page = pages[i];
    child->id = next_id_++;
    child->last_used = clock_;
    if (eviction_sink_) child->path_key = next_page_key(node->path_key, key);
    it = node->children.emplace(std::move(key), std::move(child)).first;
    it->second->key = &it->first;
    node = it->second.get();
    leaves_[group].insert(node);
  }
}

int32_t PrefixCache::evict(int32_t count) {
  int32_t evicted = 0;
  for (int32_t group = 0; group < static_cast<int32_t>(roots_.size()) && evicted < count; ++group)
    evicted += evict(count - evicted, group);
  return evicted;
}

int32_t PrefixCache::evict(int32_t count, int32_t group) {
  if (!eviction_sink_) return evict_leaves(count, group, nullptr);
  evicted_.clear();
  const int32_t evicted = evict_leaves(count, group, &evicted_);
  if (!evicted_.empty()) eviction_sink_(evicted_);
  return evicted;
}

int32_t PrefixCache::clear() {
  int32_t dropped = 0;
  for (int32_t group = 0; group < static_cast<int32_t>(roots_.size()); ++group)
    dropped += evict_leaves(pool_.group_size(), group, nullptr);
  return dropped;
}

void PrefixCache::set_eviction_sink(EvictionSink sink) {
  DSINFER_CHECK(cached_ == 0, "prefix cache: an eviction sink must come before the first page");
  eviction_sink_ = std::move(sink);
}

int32_t PrefixCache::evict_leaves(int32_t count, int32_t group, std::vector<EvictedPage>* evicted_pages) {
  Leaves& leaves = leaves_.at(group);
  int32_t evicted = 0;
  auto next = leaves.begin();
  while (evicted < count && next != leaves.end()) {
    Node* leaf = *next;
    if (pool_.ref_count(leaf->page) > 1) {  // a sequence uses it: step over
      ++next;
      continue;
    }
    next = leaves.erase(next);
    if (evicted_pages) evicted_pages->push_back({leaf->path_key, leaf->page});
    Node* parent = leaf->parent;
    pool_.set_cached(leaf->page, false);
    pool_.release(leaf->page);
    --cached_;
    ++evicted;
    parent->children.erase(parent->children.find(*leaf->key));  // frees the leaf
    if (parent->parent && parent->children.empty()) {
      // The parent is a leaf now. It was used no earlier than its child, so it sorts after every
      // leaf stepped over so far: the walk goes on from it if it comes before `next`.
      auto at = leaves.insert(parent).first;
      if (next == leaves.end() || LeastRecentlyUsedFirst{}(parent, *next)) next = at;
    }
  }
  return evicted;
}

}  // namespace dsinfer::runtime
