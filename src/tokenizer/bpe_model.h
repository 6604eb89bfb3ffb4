// BpeModel: byte-pair encoding of one piece, from tokenizer.json's "model" (type BPE).
//
// A piece starts as one symbol per character (per byte when the pre-tokenizer is byte-level: the
// byte stands for its GPT-2 alphabet character) and adjacent symbols are merged, always the pair
// whose merge rule comes first in "merges" (leftmost on ties), until no rule applies. With a heap
// of candidate pairs over a linked list of symbols this is O(n log n) for n symbols.
//
// A character missing from the vocabulary becomes its bytes' <0xXX> tokens (byte_fallback),
// else the unknown token (fused with its neighbours under fuse_unk), else nothing: Hugging Face's
// rules. Encoded words are remembered in a WordCache.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/json.h"
#include "tokenizer/word_cache.h"

namespace dsinfer::tokenizer {

class BpeModel {
 public:
  // From the "model" object. byte_level: pieces come as raw bytes, to be read in the byte-level
  // alphabet. Throws dsinfer::Error naming what is wrong (a merge naming an unknown token, ...).
  static BpeModel from_json(const Json& model, bool byte_level, size_t cache_capacity);
  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;
  ~BpeModel();

  // Appends the ids of one (non-empty) piece.
  void encode(std::string_view piece, std::vector<int32_t>& ids) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The vocabulary entry of id; nullopt when the vocabulary has no such id.
  std::optional<std::string_view> id_to_token(int32_t id) const;
  // Entries in the vocabulary.
  size_t vocab_size() const { return vocab_.size(); }
  // One past the largest id of the vocabulary.
  int32_t id_limit() const { return static_cast<int32_t>(tokens_.size()); }

 private:
  // One symbol of a word being merged, in a linked list over a vector (merging never moves one).
  struct Symbol {
    int32_t id;    // -1 once absorbed by the symbol on its left
    int32_t prev;  // index of the previous live symbol, -1 at the start
    int32_t next;  // index of the next live symbol, -1 at the end
  };
  struct MergeRule {
    int32_t rank;
    int32_t result;
  };
  class MergeTable;

  BpeModel();
  static void push_symbol(std::vector<Symbol>& symbols, int32_t id);
  void add_symbol(std::string_view text, std::vector<Symbol>& symbols,
                  int32_t& pending_unk) const;
  void split_into_symbols(std::string_view piece, std::vector<Symbol>& symbols) const;
  void merge(std::vector<Symbol>& symbols) const;

  using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;
  Vocab vocab_;
  std::vector<std::string_view> tokens_;  // by id, viewing vocab_'s keys; data() null for gaps
  std::unique_ptr<MergeTable> merges_;
  bool byte_level_ = false;
  std::array<int32_t, 256> byte_ids_{};  // byte-level: the id of each byte's character, or -1
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::unique_ptr<WordCache> cache_;  // mutable state behind a const encode(), thread-safe
};

}  // namespace dsinfer::tokenizer
