#include "tokenizer/decoder.h"

#include <gtest/gtest.h>

namespace dsinfer::tokenizer {
namespace {

std::string lossy(std::string_view bytes) {
  std::string out;
  append_utf8_lossy(out, bytes);
  return out;
}

// One U+FFFD per maximal invalid subsequence, as Rust's String::from_utf8_lossy gives.
TEST(Utf8Lossy, ReplacesMaximalInvalidSubsequences) {
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(lossy("plain \xe4\xb8\xad"), "plain \xe4\xb8\xad");
  EXPECT_EQ(lossy(std::string("\xe2\x82") + "A"), fffd + "A");         // a cut three-byte character
  EXPECT_EQ(lossy("\xf0\x9f\x98"), fffd);                              // cut at the end
  EXPECT_EQ(lossy("\xf0\x80\x80"), fffd + fffd + fffd);                // overlong: no valid prefix
  EXPECT_EQ(lossy("\xed\xa0\x80"), fffd + fffd + fffd);                // a surrogate
  EXPECT_EQ(lossy("\x80\xbf"), fffd + fffd);                           // stray continuation bytes
  EXPECT_EQ(lossy(std::string("\xc0\xaf") + "b"), fffd + fffd + "b");  // never valid bytes
  EXPECT_EQ(lossy("\xf4\x90\x80\x80"), fffd + fffd + fffd + fffd);     // past U+10FFFF
  EXPECT_EQ(lossy(""), "");
}

}  // namespace
}  // namespace dsinfer::tokenizer
