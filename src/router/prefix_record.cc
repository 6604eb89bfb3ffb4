#include "router/prefix_record.h"

#include "core/error.h"

namespace dsinfer::router {
namespace {

// 64-bit FNV-1a: deterministic across runs and platforms, and its state after a block is the hash
// of everything before, which is what chains the blocks.
constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

}  // namespace

std::vector<uint64_t> prefix_block_hashes(std::string_view text, size_t block_chars) {
  DSINFER_CHECK(block_chars > 0, "prefix blocks need at least one character");
  std::vector<uint64_t> hashes;
  hashes.reserve(text.size() / block_chars);
  uint64_t hash = kFnvOffset;
  for (size_t end = block_chars; end <= text.size(); end += block_chars) {
    for (const char c : text.substr(end - block_chars, block_chars)) {
      hash ^= static_cast<unsigned char>(c);
      hash *= kFnvPrime;
    }
    hashes.push_back(hash);
  }
  return hashes;
}

PrefixRecord::PrefixRecord(size_t capacity_blocks) : capacity_(capacity_blocks) {}

size_t PrefixRecord::match(std::span<const uint64_t> blocks) const {
  size_t matched = 0;
  while (matched < blocks.size() && blocks_.contains(blocks[matched])) ++matched;
  return matched;
}

void PrefixRecord::insert(std::span<const uint64_t> blocks) {
  for (auto block = blocks.rbegin(); block != blocks.rend(); ++block) {  // deepest first: see the header
    if (auto known = blocks_.find(*block); known != blocks_.end()) {
      recency_.splice(recency_.begin(), recency_, known->second);
    } else {
      recency_.push_front(*block);
      blocks_.emplace(*block, recency_.begin());
    }
  }
  while (blocks_.size() > capacity_) {
    blocks_.erase(recency_.back());
    recency_.pop_back();
  }
}

void PrefixRecord::clear() {
  recency_.clear();
  blocks_.clear();
}

}  // namespace dsinfer::router
