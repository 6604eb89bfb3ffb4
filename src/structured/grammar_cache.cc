#include "structured/grammar_cache.h"

#include <iterator>

namespace dsinfer::structured {

GrammarCache::Lookup GrammarCache::find_or_reserve(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(key);
  if (found != entries_.end()) {
    ++stats_.hits;
    recency_.splice(recency_.begin(), recency_, found->second.recency);
    return Lookup{found->second.future, nullptr};
  }
  ++stats_.misses;
  auto promise = std::make_shared<Promise>();
  recency_.push_front(key);
  Entry entry{promise->get_future().share(), 0, false, recency_.begin()};
  Future future = entry.future;
  entries_.emplace(key, std::move(entry));
  return Lookup{std::move(future), std::move(promise)};
}

void GrammarCache::finished(const std::string& key, size_t bytes) {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(key);
  if (found == entries_.end() || found->second.done) return;
  found->second.done = true;
  found->second.bytes = bytes;
  stats_.bytes += bytes;
  // Oldest first, skipping the entry just finished and those still compiling.
  for (auto it = std::prev(recency_.end()); stats_.bytes > capacity_bytes_;) {
    bool at_front = it == recency_.begin();
    auto entry = entries_.find(*it);
    auto older = at_front ? it : std::prev(it);
    if (entry->second.done && entry->first != key) {
      stats_.bytes -= entry->second.bytes;
      ++stats_.evictions;
      entries_.erase(entry);
      recency_.erase(it);
    }
    if (at_front) break;
    it = older;
  }
}

void GrammarCache::forget(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(key);
  if (found == entries_.end() || found->second.done) return;
  recency_.erase(found->second.recency);
  entries_.erase(found);
}

GrammarCacheStats GrammarCache::stats() const {
  std::lock_guard lock(mutex_);
  GrammarCacheStats stats = stats_;
  stats.entries = entries_.size();
  return stats;
}

}  // namespace dsinfer::structured
