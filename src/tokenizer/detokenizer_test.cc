#include "tokenizer/detokenizer.h"

#include <gtest/gtest.h>

#include "core/utf8.h"
#include "tokenizer/test_util.h"

namespace dsinfer::tokenizer {
namespace {

using test_util::deepseek_v3;
using test_util::fixture_path;
using test_util::ids_of;
using test_util::load_fixture;

// Streams ids one at a time; checks every piece is valid UTF-8 and the whole equals decode().
void expect_streams_like_decode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  for (bool skip_special : {false, true}) {
    IncrementalDetokenizer detokenizer(tokenizer, skip_special);
    std::string streamed;
    for (int32_t id : ids) {
      std::string piece = detokenizer.push(id);
      EXPECT_TRUE(utf8_valid(piece));
      streamed += piece;
    }
    streamed += detokenizer.finish();
    EXPECT_EQ(streamed, tokenizer.decode(ids, skip_special)) << "skip_special " << skip_special;
  }
}

TEST(IncrementalDetokenizer, AgreesWithDecodeOnEveryFixture) {
  for (const char* fixture :
       {"tokenizer/deepseek_v3_encode.json", "tokenizer/deepseek_v3_decode.json"}) {
    Json cases = load_fixture(fixture);
    for (const Json& item : cases.as_array()) {
      SCOPED_TRACE(item.find("ids")->dump());
      expect_streams_like_decode(deepseek_v3(), ids_of(*item.find("ids")));
    }
  }
  Tokenizer byte_level = Tokenizer::from_dir(fixture_path("tokenizer/tiny_bytelevel"));
  Json byte_level_cases = load_fixture("tokenizer/tiny_bytelevel_encode.json");
  for (const Json& item : byte_level_cases.as_array()) {
    expect_streams_like_decode(byte_level, ids_of(*item.find("ids")));
  }
  Tokenizer char_level =
      Tokenizer::from_file(fixture_path("tokenizer/tiny_charlevel/tokenizer.json"));
  Json char_level_cases = load_fixture("tokenizer/tiny_charlevel_encode.json");
  for (const Json& item : char_level_cases.as_array()) {
    expect_streams_like_decode(char_level, ids_of(*item.find("ids")));
  }
}

TEST(IncrementalDetokenizer, HoldsBackAnUnfinishedCharacter) {
  const Tokenizer& tokenizer = deepseek_v3();
  // U+1F600 is four bytes; byte tokens spell it one byte at a time.
  std::vector<int32_t> bytes;
  for (const char* spelling : {"ðŁ", "ĺ", "Ģ"}) bytes.push_back(*tokenizer.token_to_id(spelling));
  IncrementalDetokenizer detokenizer(tokenizer);
  EXPECT_EQ(detokenizer.push(*tokenizer.token_to_id("Hi")), "Hi");
  EXPECT_EQ(detokenizer.push(bytes[0]), "");  // F0 9F
  EXPECT_EQ(detokenizer.push(bytes[1]), "");  // 98
  EXPECT_EQ(detokenizer.push(bytes[2]), "\xf0\x9f\x98\x80");
  // A lead byte that never gets its continuation: U+FFFD, once it is clear or at the end.
  EXPECT_EQ(detokenizer.push(bytes[0]), "");
  EXPECT_EQ(detokenizer.push(*tokenizer.token_to_id("A")),
            "\xef\xbf\xbd"
            "A");
  EXPECT_EQ(detokenizer.push(bytes[0]), "");
  EXPECT_EQ(detokenizer.finish(), "\xef\xbf\xbd");
  EXPECT_EQ(detokenizer.finish(), "");
}

TEST(IncrementalDetokenizer, SkipsSpecialTokensWhenAsked) {
  const Tokenizer& tokenizer = deepseek_v3();
  IncrementalDetokenizer keep(tokenizer), skip(tokenizer, /*skip_special_tokens=*/true);
  EXPECT_EQ(keep.push(1), "<｜end▁of▁sentence｜>");
  EXPECT_EQ(skip.push(1), "");
  EXPECT_EQ(skip.push(-5), "");  // unknown ids give nothing, as in decode()
}

}  // namespace
}  // namespace dsinfer::tokenizer
