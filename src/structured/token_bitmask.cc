#include "structured/token_bitmask.h"

#include <limits>

namespace dsinfer::structured {
namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

// Branch-free over one word's tokens, so the compiler vectorizes the select (count is 32 for
// every word but the last).
inline void mask_word(float* logits, uint32_t bits, int32_t count) {
  for (int32_t bit = 0; bit < count; ++bit) {
    logits[bit] = ((bits >> bit) & 1u) ? logits[bit] : kMasked;
  }
}

}  // namespace

void apply_bitmask(float* logits, const int32_t* bitmask, int32_t vocab) {
  const int32_t full_words = vocab / 32;
  for (int32_t word = 0; word < full_words; ++word) {
    uint32_t bits = static_cast<uint32_t>(bitmask[word]);
    if (bits == 0xFFFFFFFFu) continue;  // the common case inside free text: nothing to mask
    mask_word(logits + word * 32, bits, 32);
  }
  if (vocab % 32) mask_word(logits + full_words * 32, static_cast<uint32_t>(bitmask[full_words]), vocab % 32);
}

}  // namespace dsinfer::structured
