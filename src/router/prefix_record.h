// An approximate record of the prompts recently sent to one prefill instance, so that a prompt goes
// where its prefix is likely still in the prefix cache (SGLang's cache-aware routing idea).
//
// The router does not tokenize. A prompt is its text cut into blocks of a fixed number of
// characters (256 by default: about 64 tokens, one KV page), each block named by the hash of the
// whole text up to its end. The names of a prompt's blocks are so a path in a radix tree of prompts,
// and a prompt's match on an instance is the number of its leading blocks the record holds. Only
// whole blocks count, as the worker's prefix cache reuses only whole pages.
//
// The record keeps a bounded number of blocks and forgets the least recently used first. A
// prompt's blocks are touched deepest first, so a prefix is always at least as recent as the blocks
// below it, and forgetting trims paths from their ends, as a radix cache evicts its leaves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dsinfer::router {

// The chained hashes of `text`'s whole blocks of `block_chars` characters: element i names the
// first (i + 1) * block_chars characters. A trailing partial block has no name.
std::vector<uint64_t> prefix_block_hashes(std::string_view text, size_t block_chars);

class PrefixRecord {
 public:
  explicit PrefixRecord(size_t capacity_blocks);

  // How many of `blocks`' leading blocks the record holds.
  size_t match(std::span<const uint64_t> blocks) const;
  // Records the prompt as sent now, forgetting the least recently used blocks past the capacity.
  void insert(std::span<const uint64_t> blocks);
  // The instance lost its cache (it restarted, or failed its health check).
  void clear();
  size_t size() const { return blocks_.size(); }

 private:
  size_t capacity_;
  std::list<uint64_t> recency_;  // most recently used first
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> blocks_;
};

}  // namespace dsinfer::router
