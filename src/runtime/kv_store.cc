#include "runtime/kv_store.h"

#include "core/error.h"

namespace dsinfer::runtime {
namespace {

// splitmix64's finalizer: every input bit reaches every output bit.
uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

PageKey next_page_key(const PageKey& parent, std::span<const int32_t> tokens) {
  // Two chains with different constants make the 128 bits; each step mixes the state with one
  // token, so the order of the tokens matters, and the parent's key seeds both.
  uint64_t high = mix(parent.high ^ 0x243f6a8885a308d3ull);
  uint64_t low = mix(parent.low ^ 0x13198a2e03707344ull);
  for (int32_t token : tokens) {
    const auto value = static_cast<uint64_t>(static_cast<uint32_t>(token));
    high = mix(high + 0x9e3779b97f4a7c15ull + value);
    low = mix((low ^ (value << 17)) + 0xc2b2ae3d27d4eb4full);
  }
  return {high, low ^ tokens.size()};
}

std::vector<PageKey> page_keys(std::span<const int32_t> tokens, int page_size, int64_t pages) {
  DSINFER_CHECK(pages * page_size <= static_cast<int64_t>(tokens.size()), "page keys: ", pages, " pages of ",
                page_size, " tokens asked of ", tokens.size(), " tokens");
  std::vector<PageKey> keys;
  keys.reserve(static_cast<size_t>(pages));
  PageKey key;
  for (int64_t page = 0; page < pages; ++page) {
    key = next_page_key(key, tokens.subspan(page * page_size, page_size));
    keys.push_back(key);
  }
  return keys;
}

}  // namespace dsinfer::runtime
