#include "tokenizer/word_cache.h"

namespace dsinfer::tokenizer {

WordCache::WordCache(size_t capacity) : shard_capacity_((capacity + kShards - 1) / kShards) {}

bool WordCache::lookup(std::string_view word, std::vector<int32_t>& ids) const {
  if (!enabled() || word.size() > kMaxWordBytes) return false;
  size_t hash = StringHash{}(word);
  Shard& shard = shard_for(hash);
  std::lock_guard lock(shard.mutex);
  auto found = shard.words.find(word);
  if (found == shard.words.end()) return false;
  ids.insert(ids.end(), found->second.begin(), found->second.end());
  return true;
}

void WordCache::insert(std::string_view word, std::span<const int32_t> ids) {
  if (!enabled() || word.size() > kMaxWordBytes) return;
  Shard& shard = shard_for(StringHash{}(word));
  std::lock_guard lock(shard.mutex);
  if (shard.words.size() >= shard_capacity_) return;
  shard.words.try_emplace(std::string(word), ids.begin(), ids.end());
}

}  // namespace dsinfer::tokenizer
