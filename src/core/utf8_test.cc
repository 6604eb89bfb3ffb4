#include "core/utf8.h"

#include <gtest/gtest.h>

namespace dsinfer {
namespace {

TEST(Utf8, DecodesAndRejects) {
  uint32_t code;
  EXPECT_EQ(utf8_decode("\xe4\xb8\xad", &code), 3u);
  EXPECT_EQ(code, 0x4e2du);
  EXPECT_EQ(utf8_decode("\xf0\x9f\x98\x80", &code), 4u);
  EXPECT_EQ(code, 0x1f600u);
  EXPECT_EQ(utf8_decode("\xc0\x80", &code), 0u);      // overlong
  EXPECT_EQ(utf8_decode("\xed\xa0\x80", &code), 0u);  // surrogate
  EXPECT_EQ(utf8_decode("\xe4\xb8", &code), 0u);      // truncated
  EXPECT_TRUE(utf8_valid("plain \xe4\xb8\xad"));
  EXPECT_FALSE(utf8_valid("\xff"));
}

TEST(Utf8, CompletePrefixHoldsBackUnfinishedSequences) {
  EXPECT_EQ(utf8_complete_prefix("ab"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xe4"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xe4\xb8"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xe4\xb8\xad"), 5u);
  EXPECT_EQ(utf8_complete_prefix("\xf0\x9f\x98"), 0u);
  EXPECT_EQ(utf8_complete_prefix("a\xff"), 2u);  // never valid: nothing to wait for
  std::string round;
  utf8_append(round, 0x1f600);
  EXPECT_EQ(round, "\xf0\x9f\x98\x80");
}

}  // namespace
}  // namespace dsinfer
