#include "tokenizer/regex.h"

#include <gtest/gtest.h>

#include <thread>

#include "core/error.h"

namespace dsinfer::tokenizer {
namespace {

std::vector<std::string> all_matches(const Regex& regex, std::string_view text) {
  std::vector<Match> matches;
  regex.find_all(text, matches);
  std::vector<std::string> found;
  for (const Match& match : matches)
    found.emplace_back(text.substr(match.begin, match.end - match.begin));
  return found;
}

TEST(Regex, FindsUnicodePropertiesAndLookahead) {
  Regex numbers(R"(\p{N}{1,3})");
  EXPECT_EQ(all_matches(numbers, "a1234b٣٤"), (std::vector<std::string>{"123", "4", "٣٤"}));
  Regex cjk("[一-龥぀-ゟ゠-ヿ]+");
  EXPECT_EQ(all_matches(cjk, "abc中文かなカナxyz"), (std::vector<std::string>{"中文かなカナ"}));
  Regex trailing(R"(\s+(?!\S)|\s+)");
  EXPECT_EQ(all_matches(trailing, "a   b  "), (std::vector<std::string>{"  ", " ", "  "}));
}

TEST(Regex, FindSeesTextBeforeTheStart) {
  Regex after_a("(?<=a)b");
  Match match;
  ASSERT_TRUE(after_a.find("abab", 2, &match));
  EXPECT_EQ(match.begin, 3u);
  EXPECT_FALSE(after_a.find("abcb", 2, &match));
}

// Empty matches as Oniguruma's find_iter reports them: the one right after a match is dropped.
TEST(Regex, EmptyMatchesFollowOniguruma) {
  Regex stars("x*");
  std::vector<Match> matches;
  stars.find_all("axb", matches);
  ASSERT_EQ(matches.size(), 3u);
  EXPECT_EQ(matches[0].begin, 0u);
  EXPECT_EQ(matches[0].end, 0u);
  EXPECT_EQ(matches[1].begin, 1u);
  EXPECT_EQ(matches[1].end, 2u);
  EXPECT_EQ(matches[2].begin, 3u);  // the empty match at 2 (right after "x") is not reported
  EXPECT_EQ(matches[2].end, 3u);
}

TEST(Regex, OnigurumaEscapesKeepTheirMeaning) {
  // \s includes U+0085 (NEXT LINE) in Oniguruma, not in PCRE2.
  EXPECT_EQ(all_matches(Regex::from_oniguruma(R"(\s)"), "a\u0085b"),
            (std::vector<std::string>{"\u0085"}));
  EXPECT_EQ(all_matches(Regex::from_oniguruma(R"([^\s]+)"), "a\u0085b"),
            (std::vector<std::string>{"a", "b"}));
  // \h is a hex digit in Oniguruma, horizontal space in PCRE2.
  EXPECT_EQ(all_matches(Regex::from_oniguruma(R"(\h+)"), "ab12 fg"),
            (std::vector<std::string>{"ab12", "f"}));
  // \w takes marks, alphabetic symbols, and a few Latin-1 numbers, not all numbers.
  EXPECT_EQ(all_matches(Regex::from_oniguruma(R"(\w+)"), "e\u0301\u00b2\u24b6 x\u2460"),
            (std::vector<std::string>{"e\u0301\u00b2\u24b6", "x"}));
  EXPECT_EQ(all_matches(Regex::from_oniguruma(R"(\u00e9+)"), "ééa"),
            (std::vector<std::string>{"éé"}));
  // '^' and '$' match at line breaks (Ruby syntax).
  EXPECT_EQ(all_matches(Regex::from_oniguruma("^a|a$"), "a\na b"),
            (std::vector<std::string>{"a", "a"}));
  // Escaped brackets and POSIX classes do not confuse the class tracking.
  EXPECT_EQ(all_matches(Regex::from_oniguruma(R"([\[\]]\s|[[:digit:]]\w)"), "[ 1a"),
            (std::vector<std::string>{"[ ", "1a"}));
}

// PCRE2 10.42 knows Unicode 14; Hugging Face's Oniguruma knows 16 (unicode_sets.h).
TEST(Regex, OnigurumaPatternsKnowUnicode16) {
  const std::string pink_heart = "\U0001FA77", cjk_extension_h = "\U00031350";
  EXPECT_EQ(all_matches(Regex::from_oniguruma(R"(\p{S}+)"), "a" + pink_heart + "b"),
            std::vector<std::string>{pink_heart});
  EXPECT_EQ(all_matches(Regex::from_oniguruma(R"([^\p{L}\s]+)"), cjk_extension_h + "1"),
            std::vector<std::string>{"1"});
  EXPECT_EQ(all_matches(Regex::from_oniguruma(R"(\P{L}+)"), cjk_extension_h + "1"),
            std::vector<std::string>{"1"});
  EXPECT_EQ(all_matches(Regex(R"(\p{L}+)"), cjk_extension_h), std::vector<std::string>{});
}

TEST(Regex, BadPatternsNameTheProblem) {
  try {
    Regex bad("(ab");
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "bad regex \"(ab\": missing closing parenthesis at offset 3");
  }
  EXPECT_THROW(Regex::from_oniguruma("[a[b]]"), Error);       // nested class
  EXPECT_THROW(Regex::from_oniguruma("[a-z&&[^c]]"), Error);  // intersection
  EXPECT_THROW(Regex::from_oniguruma(R"(\u12)"), Error);
}

TEST(Regex, RejectsInvalidUtf8Subjects) {
  Regex any(".");
  Match match;
  EXPECT_THROW(any.find("\xff", 0, &match), Error);
}

TEST(Regex, SharedAcrossThreads) {
  Regex words(R"(\p{L}+)");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "alpha beta gamma ";
  std::vector<size_t> counts(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < counts.size(); ++t) {
    threads.emplace_back([&, t] { counts[t] = all_matches(words, text).size(); });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(counts, std::vector<size_t>(8, 600));
}

}  // namespace
}  // namespace dsinfer::tokenizer
