// Loading tokenizer.json and tokenizer_config.json: the accepted forms, and one-line errors that
// name the file for the broken ones.
#include <gtest/gtest.h>

#include "tokenizer/test_util.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::tokenizer {
namespace {

using test_util::ScratchDir;

// A byte-level BPE over "a", "b", "c" and the special token "<s>"; tests replace parts of it.
struct TinyTokenizer {
  std::string normalizer = "null";
  std::string pre_tokenizer =
      R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})";
  std::string decoder = R"({"type": "ByteLevel"})";
  std::string vocab = R"({"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5})";
  std::string merges = R"(["a b"])";

  std::string json() const {
    return str_cat(R"({"version": "1.0", "added_tokens": [
        {"id": 6, "content": "<s>", "special": true, "normalized": false,
         "lstrip": false, "rstrip": false, "single_word": false}],
      "normalizer": )",
                   normalizer, R"(, "pre_tokenizer": )", pre_tokenizer, R"(, "decoder": )", decoder,
                   R"(, "post_processor": null,
      "model": {"type": "BPE", "vocab": )",
                   vocab, R"(, "merges": )", merges, "}}");
  }
};

TinyTokenizer with_merges(std::string merges) {
  TinyTokenizer tiny;
  tiny.merges = std::move(merges);
  return tiny;
}

// The error loading a tokenizer.json with these contents gives, or "no error".
std::string load_error(std::string_view contents) {
  ScratchDir dir;
  std::string path = dir.write("tokenizer.json", contents);
  try {
    Tokenizer::from_file(path);
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
    return message.substr(path.size() + 2);
  }
  return "no error";
}

TEST(TokenizerJson, MergesByRankInEitherSpelling) {
  ScratchDir dir;
  // "b c" comes first, so "abc" is a + bc, then abc; "a b" never gets a turn.
  for (const char* merges :
       {R"(["b c", "a b", "a bc"])", R"([["b", "c"], ["a", "b"], ["a", "bc"]])"}) {
    Tokenizer tokenizer =
        Tokenizer::from_file(dir.write("tokenizer.json", with_merges(merges).json()));
    EXPECT_EQ(tokenizer.encode("abc"), std::vector<int32_t>{5});
    EXPECT_EQ(tokenizer.encode("ab"), std::vector<int32_t>{3});
    EXPECT_EQ(tokenizer.encode("abab<s>cc"), (std::vector<int32_t>{3, 3, 6, 2, 2}));
    EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{5, 6, 2}), "abc<s>c");
    EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{5, 6, 2}, true), "abcc");
    EXPECT_EQ(tokenizer.vocab_size(), 7);
    EXPECT_TRUE(tokenizer.is_special(6));
  }
  Tokenizer ab_first =
      Tokenizer::from_file(dir.write("tokenizer.json", with_merges(R"(["a b", "b c"])").json()));
  EXPECT_EQ(ab_first.encode("abc"), (std::vector<int32_t>{3, 2}));
}

TEST(TokenizerJson, ReadsTokenizerConfig) {
  ScratchDir dir;
  dir.write("tokenizer.json", TinyTokenizer().json());
  dir.write("tokenizer_config.json",
            R"({"add_bos_token": true, "add_eos_token": true, "bos_token": "<s>",
                "eos_token": {"__type": "AddedToken", "content": "c"}})");
  Tokenizer tokenizer = Tokenizer::from_dir(dir.path());
  EXPECT_EQ(tokenizer.bos_token(), "<s>");
  EXPECT_EQ(tokenizer.bos_id(), 6);
  EXPECT_EQ(tokenizer.eos_id(), 2);
  EXPECT_EQ(tokenizer.encode("ab", true), (std::vector<int32_t>{6, 3, 2}));
  EXPECT_EQ(tokenizer.encode("ab", false), std::vector<int32_t>{3});

  dir.write("tokenizer_config.json", R"({"bos_token": "<missing>"})");
  try {
    Tokenizer::from_dir(dir.path());
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()), dir.path() +
                                             "/tokenizer_config.json: special token "
                                             "\"<missing>\" is not in the vocabulary");
  }
}

TEST(TokenizerJson, BrokenFilesGiveOneLineErrorsNamingTheFile) {
  EXPECT_EQ(load_error(R"({"model": {"type": "BPE", "vocab": {"a": 0)"),
            "JSON parse error at line 1, column 43: unexpected end of input in an object");
  EXPECT_EQ(load_error("[]"), "expected a JSON object, got array");
  EXPECT_EQ(load_error(R"({"version": "1.0", "added_tokens": []})"), "\"model\" is missing");
  EXPECT_EQ(load_error(R"({"model": {"type": "WordPiece", "vocab": {}}})"),
            "model: model type \"WordPiece\" is not supported (only BPE)");
  EXPECT_EQ(load_error(R"({"model": {"type": "Unigram", "vocab": []}})"),
            "model: model type \"Unigram\" is not supported (only BPE)");
  EXPECT_EQ(load_error(R"({"model": {"type": "BPE", "merges": []}})"),
            "model: \"vocab\" is missing");
  EXPECT_EQ(load_error(with_merges(R"(["a d"])").json()),
            "model: merge 0 (\"a\", \"d\") names \"d\", which is not in the vocab");
  EXPECT_EQ(load_error(with_merges(R"(["a b", "c a"])").json()),
            "model: merge 1 (\"c\", \"a\") names \"ca\", which is not in the vocab");
  EXPECT_EQ(load_error(with_merges(R"(["a b", "abc"])").json()),
            "model: merge 1 \"abc\" is not two tokens separated by one space");
  TinyTokenizer negative_id;
  negative_id.vocab = R"({"a": -1})";
  EXPECT_EQ(load_error(negative_id.json()),
            "model: vocab entry \"a\" has id -1, not an integer in [0, 16777215]");
  TinyTokenizer bad_regex;
  bad_regex.pre_tokenizer =
      R"({"type": "Split", "pattern": {"Regex": "\\p{Nope}"}, "behavior": "Isolated"})";
  EXPECT_EQ(
      load_error(bad_regex.json()),
      "pre_tokenizer: bad regex \"\\\\p{Nope}\": unknown property after \\P or \\p at offset 8");
  TinyTokenizer bad_decoder;
  bad_decoder.decoder = R"({"type": "WordPiece", "prefix": "##"})";
  EXPECT_EQ(load_error(bad_decoder.json()), "decoder: decoder type \"WordPiece\" is not supported");
  TinyTokenizer bad_normalizer;
  bad_normalizer.normalizer = R"({"type": "Sequence", "normalizers": [{"type": "NFC"}]})";
  EXPECT_EQ(load_error(bad_normalizer.json()),
            "normalizer: normalizer type \"NFC\" is not supported");
  EXPECT_EQ(load_error(R"({"added_tokens": [{"id": 0}], "model": {"vocab": {}, "merges": []}})"),
            "added_tokens: added token 0: \"content\" is missing");
}

TEST(TokenizerJson, MissingFilesAreNamed) {
  try {
    Tokenizer::from_dir("/nonexistent/model");
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()),
              "/nonexistent/model/tokenizer.json: cannot open (No such file or directory)");
  }
}

}  // namespace
}  // namespace dsinfer::tokenizer
