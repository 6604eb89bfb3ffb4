#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/test_util.h"

namespace dsinfer::tokenizer {
namespace {

std::vector<std::string> split(const PreTokenizer& pre_tokenizer, std::string_view text) {
  Pieces pieces;
  pre_tokenizer.split(text, pieces);
  std::vector<std::string> result;
  for (std::string_view piece : pieces.views()) {
    // Hugging Face shows byte-level pieces in the byte-level alphabet.
    result.push_back(pre_tokenizer.byte_level() ? to_byte_level(piece) : std::string(piece));
  }
  return result;
}

// Every pre-tokenizer form, against Hugging Face's pre_tokenize_str.
TEST(PreTokenizer, SplitsLikeHuggingFace) {
  Json groups = test_util::load_fixture("tokenizer/pre_tokenizers.json");
  ASSERT_GT(groups.size(), 0u);
  for (const Json& group : groups.as_array()) {
    const Json& config = *group.find("pre_tokenizer");
    SCOPED_TRACE(config.dump());
    PreTokenizer pre_tokenizer = PreTokenizer::from_json(config);
    for (const Json& item : group.find("cases")->as_array()) {
      const std::string& text = item.find("text")->as_string();
      std::vector<std::string> expected;
      for (const Json& piece : item.find("pieces")->as_array())
        expected.push_back(piece.as_string());
      EXPECT_EQ(split(pre_tokenizer, text), expected) << Json(text).dump(-1, true);
    }
  }
}

TEST(PreTokenizer, NullKeepsTheTextWhole) {
  PreTokenizer none = PreTokenizer::from_json(Json());
  EXPECT_FALSE(none.byte_level());
  EXPECT_EQ(split(none, "a b"), std::vector<std::string>{"a b"});
  EXPECT_EQ(split(none, ""), std::vector<std::string>{});
}

TEST(PreTokenizer, RejectsWhatItCannotDo) {
  auto error_of = [](std::string_view json) {
    try {
      PreTokenizer::from_json(Json::parse(json));
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(R"({"type": "Metaspace", "replacement": "_"})"),
            "pre-tokenizer type \"Metaspace\" is not supported");
  EXPECT_EQ(error_of(R"({"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"},
                       {"type": "Digits"}]})"),
            "ByteLevel must be the last pre-tokenizer (Digits after it is not supported)");
  EXPECT_EQ(error_of(R"({"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways"})"),
            "unknown split behavior \"Sideways\"");
  EXPECT_EQ(error_of(R"({"type": "Split", "pattern": {"Regex": "[a"}, "behavior": "Isolated"})"),
            "bad regex \"[a\": missing terminating ] for character class at offset 2");
  EXPECT_EQ(error_of(R"({"type": "Split", "behavior": "Isolated"})"), "\"pattern\" is missing");
}

}  // namespace
}  // namespace dsinfer::tokenizer
