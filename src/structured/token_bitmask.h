// The token bitmask: which tokens a grammar allows next, one bit per vocabulary id.
//
// Layout (xgrammar's, so the GPU kernel later reads the same rows): a row is
// bitmask_words(vocab) int32 words; token t is allowed when bit (t % 32) of word t / 32 is set.
// A step's masks are [rows, bitmask_words(vocab)] int32, row-major.
//
// apply_bitmask is the CPU reference of the masking op the sampler calls before temperature,
// penalties and top-k/p: a disallowed token's logit becomes -inf, an allowed one is unchanged.
#pragma once

#include <cstdint>

namespace dsinfer::structured {

constexpr int32_t bitmask_words(int32_t vocab_size) { return (vocab_size + 31) / 32; }

inline bool token_allowed(const int32_t* bitmask_row, int32_t token) {
  return (static_cast<uint32_t>(bitmask_row[token >> 5]) >> (token & 31)) & 1u;
}

// logits: [vocab] f32, bitmask: [bitmask_words(vocab)] int32. Bits past vocab are ignored.
void apply_bitmask(float* logits, const int32_t* bitmask, int32_t vocab);

}  // namespace dsinfer::structured
