// Encoding and decoding against Hugging Face tokenizers 0.23.2 (tools/make_tokenizer_fixtures.py).
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <thread>

#include "tokenizer/test_util.h"

namespace dsinfer::tokenizer {
namespace {

using test_util::deepseek_v3;
using test_util::deepseek_v3_dir;
using test_util::fixture_path;
using test_util::ids_of;
using test_util::load_fixture;

// Every case of an *_encode.json fixture: ids, decoded text, and the skip_special variant.
void expect_matches_encode_fixture(const Tokenizer& tokenizer, const Json& cases) {
  ASSERT_GT(cases.size(), 0u);
  for (const Json& item : cases.as_array()) {
    const std::string& text = item.find("text")->as_string();
    SCOPED_TRACE(Json(text).dump(-1, true));
    std::vector<int32_t> expected = ids_of(*item.find("ids"));
    EXPECT_EQ(tokenizer.encode(text), expected);
    if (const Json* with_special = item.find("ids_with_special")) {
      EXPECT_EQ(tokenizer.encode(text, /*add_special_tokens=*/true), ids_of(*with_special));
    }
    const std::string& decoded = item.find("decoded")->as_string();
    EXPECT_EQ(tokenizer.decode(expected), decoded);
    const Json* skipped = item.find("decoded_skip_special");
    EXPECT_EQ(tokenizer.decode(expected, /*skip_special_tokens=*/true),
              skipped ? skipped->as_string() : decoded);
  }
}

TEST(DeepSeekV3, EncodesAndDecodesLikeHuggingFace) {
  Json cases = load_fixture("tokenizer/deepseek_v3_encode.json");
  EXPECT_GE(cases.size(), 200u);
  expect_matches_encode_fixture(deepseek_v3(), cases);
}

TEST(DeepSeekV3, DecodesArbitraryIdsLikeHuggingFace) {
  Json cases = load_fixture("tokenizer/deepseek_v3_decode.json");
  ASSERT_GT(cases.size(), 0u);
  for (const Json& item : cases.as_array()) {
    std::vector<int32_t> ids = ids_of(*item.find("ids"));
    SCOPED_TRACE(item.find("ids")->dump());
    EXPECT_EQ(deepseek_v3().decode(ids), item.find("decoded")->as_string());
    EXPECT_EQ(deepseek_v3().decode(ids, true), item.find("decoded_skip_special")->as_string());
  }
}

TEST(DeepSeekV3, VocabularyAndSpecialTokens) {
  const Tokenizer& tokenizer = deepseek_v3();
  EXPECT_EQ(tokenizer.vocab_size(), 128815);
  EXPECT_EQ(tokenizer.bos_token(), "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(tokenizer.eos_token(), "<｜end▁of▁sentence｜>");
  EXPECT_EQ(tokenizer.bos_id(), 0);
  EXPECT_EQ(tokenizer.eos_id(), 1);
  EXPECT_TRUE(tokenizer.add_bos_token());
  EXPECT_FALSE(tokenizer.add_eos_token());
  EXPECT_EQ(tokenizer.token_to_id("<｜User｜>"), 128803);
  EXPECT_EQ(tokenizer.token_to_id("Ġthe"), tokenizer.encode(" the").at(0));
  EXPECT_EQ(tokenizer.token_to_id("no such token"), std::nullopt);
  EXPECT_EQ(tokenizer.id_to_token(128804), "<｜Assistant｜>");
  EXPECT_EQ(tokenizer.id_to_token(tokenizer.encode(" the").at(0)), "Ġthe");
  EXPECT_EQ(tokenizer.id_to_token(-1), "");
  EXPECT_EQ(tokenizer.id_to_token(10'000'000), "");
  EXPECT_TRUE(tokenizer.is_special(0));
  EXPECT_TRUE(tokenizer.is_special(128805));  // <|EOT|>
  // The chat markers are added tokens but not special: skip_special_tokens keeps them.
  EXPECT_FALSE(tokenizer.is_special(128803));  // <｜User｜>
  EXPECT_FALSE(tokenizer.is_special(128814));  // <｜tool▁sep｜>
  EXPECT_FALSE(tokenizer.is_special(100));
}

TEST(DeepSeekV3, SpecialTokensInTextAreSingleIds) {
  const Tokenizer& tokenizer = deepseek_v3();
  std::vector<int32_t> ids = tokenizer.encode("<｜User｜>hi<｜Assistant｜>");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 128803);
  EXPECT_EQ(ids.back(), 128804);
  // An unfinished special token is ordinary text.
  EXPECT_GT(tokenizer.encode("<｜User").size(), 1u);
  EXPECT_EQ(tokenizer.encode("", true), std::vector<int32_t>{0});
  EXPECT_EQ(tokenizer.encode(""), std::vector<int32_t>{});
}

TEST(DeepSeekV3, RejectsInvalidUtf8) {
  try {
    deepseek_v3().encode("abc\xff");
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("UTF-8"), std::string::npos) << error.what();
  }
}

TEST(DeepSeekV3, ConcurrentEncodesAgree) {
  Json cases = load_fixture("tokenizer/deepseek_v3_encode.json");
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (const Json& item : cases.as_array()) {
        if (deepseek_v3().encode(item.find("text")->as_string()) != ids_of(*item.find("ids"))) {
          ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(DeepSeekV3, WithoutWordCacheGivesTheSameIds) {
  Tokenizer uncached = Tokenizer::from_dir(deepseek_v3_dir(),
                                           TokenizerOptions{.word_cache_capacity = 0});
  Json cases = load_fixture("tokenizer/deepseek_v3_encode.json");
  for (const Json& item : cases.as_array()) {
    EXPECT_EQ(uncached.encode(item.find("text")->as_string()), ids_of(*item.find("ids")));
  }
}

// A byte-level BPE trained with a different pre-tokenizer: merges written as pairs, a prefix
// space on every piece, MergedWithPrevious/Contiguous/Removed/MergedWithNext splits, and added
// tokens with lstrip, rstrip, single_word and normalized set.
TEST(TinyByteLevel, EncodesAndDecodesLikeHuggingFace) {
  Tokenizer tokenizer = Tokenizer::from_dir(fixture_path("tokenizer/tiny_bytelevel"));
  EXPECT_EQ(tokenizer.bos_id(), std::nullopt);
  // Added tokens whose content the vocabulary already has keep the vocabulary's id.
  Json file = load_fixture("tokenizer/tiny_bytelevel/tokenizer.json");
  for (const Json& added : file.find("added_tokens")->as_array()) {
    EXPECT_EQ(tokenizer.token_to_id(added.find("content")->as_string()),
              added.find("id")->as_int());
  }
  expect_matches_encode_fixture(tokenizer, load_fixture("tokenizer/tiny_bytelevel_encode.json"));
}

// A character-level BPE with no decoder (tokens joined by spaces), unk_token with fuse_unk,
// byte_fallback and ignore_merges.
TEST(TinyCharLevel, EncodesAndDecodesLikeHuggingFace) {
  Tokenizer tokenizer =
      Tokenizer::from_file(fixture_path("tokenizer/tiny_charlevel/tokenizer.json"));
  expect_matches_encode_fixture(tokenizer, load_fixture("tokenizer/tiny_charlevel_encode.json"));
}

}  // namespace
}  // namespace dsinfer::tokenizer
