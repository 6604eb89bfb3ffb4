#include "structured/token_bitmask.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace dsinfer::structured {
namespace {

TEST(TokenBitmaskTest, WordsRoundUp) {
  EXPECT_EQ(bitmask_words(1), 1);
  EXPECT_EQ(bitmask_words(32), 1);
  EXPECT_EQ(bitmask_words(33), 2);
  EXPECT_EQ(bitmask_words(129280), 4040);
}

// Random masks, with whole words set and cleared as well, at DeepSeek-V3's width and at a width
// that ends inside a word: exactly the cleared ids become -inf, the others keep their value, and
// nothing past the row is written.
TEST(TokenBitmaskTest, ApplyMasksExactlyTheDisallowedIds) {
  std::mt19937 random(7);
  for (int32_t vocab : {129280, 1007}) {
    std::vector<int32_t> bitmask(bitmask_words(vocab));
    for (size_t w = 0; w < bitmask.size(); ++w) {
      bitmask[w] = w % 5 == 0 ? -1 : w % 7 == 0 ? 0 : static_cast<int32_t>(random());
    }
    std::vector<float> logits(vocab + 8);
    for (float& logit : logits) logit = std::uniform_real_distribution<float>(-5, 5)(random);
    std::vector<float> before = logits;
    apply_bitmask(logits.data(), bitmask.data(), vocab);
    int masked = 0;
    for (int32_t id = 0; id < vocab; ++id) {
      bool allowed = (static_cast<uint32_t>(bitmask[id / 32]) >> (id % 32)) & 1u;
      EXPECT_EQ(token_allowed(bitmask.data(), id), allowed);
      if (allowed) {
        ASSERT_EQ(logits[id], before[id]) << "id " << id;
      } else {
        ASSERT_TRUE(std::isinf(logits[id]) && logits[id] < 0) << "id " << id;
        ++masked;
      }
    }
    for (int32_t id = vocab; id < vocab + 8; ++id) EXPECT_EQ(logits[id], before[id]);
    EXPECT_GT(masked, vocab / 4);
    EXPECT_LT(masked, vocab);
  }
}

}  // namespace
}  // namespace dsinfer::structured
