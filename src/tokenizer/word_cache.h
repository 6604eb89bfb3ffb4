// WordCache: remembers the ids of words the BPE model has already encoded.
//
// Natural text repeats its words, and a lookup is much cheaper than merging again. The cache is
// shared by the threads that encode with one tokenizer: it is split into shards, each behind its
// own mutex, so concurrent encodes rarely wait on each other. It is bounded the simple way Hugging
// Face bounds its own: once full, it stops taking new words (no eviction, so no bookkeeping on the
// hit path). Long words are not cached; they rarely come back.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dsinfer::tokenizer {

// Hashes std::string keys and std::string_view probes alike (heterogeneous lookup), so finding a
// word never copies it. Also used for the vocabulary.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};

class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 256;

  // capacity: the most words held; 0 turns the cache off.
  explicit WordCache(size_t capacity);

  // Appends the cached ids of word to ids and returns true, or returns false.
  bool lookup(std::string_view word, std::vector<int32_t>& ids) const;
  void insert(std::string_view word, std::span<const int32_t> ids);

  bool enabled() const { return shard_capacity_ > 0; }

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> words;
  };
  Shard& shard_for(size_t hash) const { return shards_[hash % kShards]; }

  size_t shard_capacity_;
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace dsinfer::tokenizer
