#include "structured/grammar_matcher.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "structured/test_util.h"

namespace dsinfer::structured {
namespace {

using test_util::deepseek_v3;
using test_util::deepseek_v3_compiler;
using test_util::generate;
using test_util::Generation;
using test_util::kDeepseekV3Vocab;

constexpr const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "kind": {"enum": ["cat", "dog", "human"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "ok": {"type": "boolean"}
  },
  "required": ["name", "age", "kind"],
  "additionalProperties": false
})";

// Checks `text` against kPersonSchema: what an OpenAI client's validator would check.
void expect_valid_person(const std::string& text) {
  Json value;
  ASSERT_NO_THROW(value = Json::parse(text)) << text;
  ASSERT_TRUE(value.is_object()) << text;
  for (const char* key : {"name", "age", "kind"}) EXPECT_TRUE(value.contains(key)) << key << " in " << text;
  for (const auto& [key, member] : value.as_object()) {
    if (key == "name") {
      ASSERT_TRUE(member.is_string()) << text;
      // maxLength counts characters: decode UTF-8 lead bytes
      size_t chars = 0;
      for (char c : member.as_string()) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
      EXPECT_LE(chars, 12u) << text;
    } else if (key == "age") {
      ASSERT_TRUE(member.is_int()) << text;
      EXPECT_GE(member.as_int(), 0) << text;
      EXPECT_LE(member.as_int(), 150) << text;
    } else if (key == "kind") {
      ASSERT_TRUE(member.is_string()) << text;
      EXPECT_TRUE(std::set<std::string>({"cat", "dog", "human"}).count(member.as_string())) << text;
    } else if (key == "tags") {
      ASSERT_TRUE(member.is_array()) << text;
      EXPECT_LE(member.size(), 3u) << text;
      for (const Json& tag : member.as_array()) EXPECT_TRUE(tag.is_string()) << text;
    } else if (key == "ok") {
      EXPECT_TRUE(member.is_bool()) << text;
    } else {
      ADD_FAILURE() << "member \"" << key << "\" is not in the schema: " << text;
    }
  }
}

TEST(GrammarMatcherTest, JsonSchemaOutputParsesAndValidates) {
  CompiledGrammarPtr grammar = deepseek_v3_compiler().compile(GrammarSpec::json_schema(kPersonSchema));
  double fill_microseconds = 0;
  size_t tokens = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    GrammarMatcher matcher(grammar);
    Generation out = generate(matcher, seed);
    ASSERT_TRUE(out.terminated) << "seed " << seed << " did not finish: " << out.text;
    EXPECT_GT(out.rejected_checks, 0);
    expect_valid_person(out.text);
    fill_microseconds += out.fill_microseconds * out.tokens.size();
    tokens += out.tokens.size();
  }
  std::printf("json_schema: %zu tokens, fill_bitmask %.1f us a token on average (vocab %d)\n", tokens,
              fill_microseconds / tokens, kDeepseekV3Vocab);
}

TEST(GrammarMatcherTest, JsonObjectOutputIsAnObject) {
  CompiledGrammarPtr grammar = deepseek_v3_compiler().compile(GrammarSpec::json_object());
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    GrammarMatcher matcher(grammar);
    Generation out = generate(matcher, seed);
    ASSERT_TRUE(out.terminated) << out.text;
    Json value;
    ASSERT_NO_THROW(value = Json::parse(out.text)) << out.text;
    EXPECT_TRUE(value.is_object()) << out.text;
  }
}

TEST(GrammarMatcherTest, RegexOutputMatches) {
  const std::string pattern = "[a-z]{2,5}-[0-9]{2,4}(\\.[A-Z])?";
  GrammarMatcher matcher(deepseek_v3_compiler().compile(GrammarSpec::regex(pattern)));
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    matcher.reset();
    Generation out = generate(matcher, seed);
    ASSERT_TRUE(out.terminated) << out.text;
    EXPECT_TRUE(std::regex_match(out.text, std::regex(pattern))) << out.text;
  }
}

TEST(GrammarMatcherTest, ChoiceOutputIsOneOfTheChoicesAndEachCanComeOut) {
  std::vector<std::string> choices = {"yes", "no", "maybe \"so\"\n", "日本"};
  GrammarMatcher matcher(deepseek_v3_compiler().compile(GrammarSpec::choice(choices)));
  std::set<std::string> seen;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    matcher.reset();
    Generation out = generate(matcher, seed);
    ASSERT_TRUE(out.terminated) << out.text;
    ASSERT_TRUE(std::count(choices.begin(), choices.end(), out.text)) << out.text;
    seen.insert(out.text);
  }
  EXPECT_EQ(seen.size(), choices.size());
}

TEST(GrammarMatcherTest, EbnfOutputFollowsTheGrammar) {
  GrammarMatcher matcher(deepseek_v3_compiler().compile(
      GrammarSpec::ebnf("root ::= item (\", \" item)*\nitem ::= \"x\" | \"(\" root \")\"\n")));
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    matcher.reset();
    Generation out = generate(matcher, seed);
    ASSERT_TRUE(out.terminated) << out.text;
    int depth = 0;
    for (char c : out.text) {
      depth += c == '(' ? 1 : c == ')' ? -1 : 0;
      ASSERT_GE(depth, 0) << out.text;
      ASSERT_TRUE(std::string("x(), ").find(c) != std::string::npos) << out.text;
    }
    EXPECT_EQ(depth, 0) << out.text;
  }
}

// Feeds text token by token (as the tokenizer encodes it); the number of tokens accepted.
size_t accept_text(GrammarMatcher& matcher, const std::string& text) {
  std::vector<int32_t> ids = deepseek_v3().encode(text);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!matcher.accept(ids[i])) return i;
  }
  return ids.size();
}

TEST(GrammarMatcherTest, StructuralTagConstrainsOnlyTheTaggedRegion) {
  CompiledGrammarPtr grammar = deepseek_v3_compiler().compile(GrammarSpec::structural_tag(
      R"({"type": "structural_tag", "triggers": ["<tool="],
          "structures": [{"begin": "<tool=add>", "end": "</tool>",
                          "schema": {"type": "object", "properties": {"a": {"type": "integer"}},
                                     "required": ["a"]}}]})"));
  std::string good = "Let me add. <tool=add>{\"a\": 12}</tool> done";
  GrammarMatcher matcher(grammar);
  EXPECT_EQ(accept_text(matcher, good), deepseek_v3().encode(good).size());
  EXPECT_TRUE(matcher.accept(*deepseek_v3().eos_id()));
  EXPECT_TRUE(matcher.is_terminated());

  std::string bad = "Let me add. <tool=add>{\"b\": 12}</tool>";
  GrammarMatcher strict(grammar);
  EXPECT_LT(accept_text(strict, bad), deepseek_v3().encode(bad).size());
}

TEST(GrammarMatcherTest, ReasoningGateAllowsAnythingBeforeThinkEnd) {
  std::vector<int32_t> think_end = reasoning_end_tokens(deepseek_v3());
  ASSERT_GT(think_end.size(), 1u);  // V3's tokenizer has no </think> token: several ids
  GrammarMatcher matcher(deepseek_v3_compiler().compile(GrammarSpec::choice({"yes", "no"})),
                         MatcherOptions{.reasoning_end = think_end});
  std::vector<int32_t> bitmask(bitmask_words(kDeepseekV3Vocab));
  std::vector<int32_t> thinking = deepseek_v3().encode("Hmm, {not json} <think> yes? </think");
  for (int32_t id : thinking) {
    EXPECT_FALSE(matcher.fill_bitmask(bitmask.data()));
    for (int32_t word : bitmask) ASSERT_EQ(word, -1);
    EXPECT_FALSE(matcher.constraining());
    ASSERT_TRUE(matcher.accept(id));
  }
  for (int32_t id : think_end) {
    EXPECT_FALSE(matcher.constraining());
    ASSERT_TRUE(matcher.accept(id));
  }
  EXPECT_TRUE(matcher.constraining());
  EXPECT_TRUE(matcher.fill_bitmask(bitmask.data()));
  std::vector<int32_t> allowed = test_util::allowed_tokens(bitmask, kDeepseekV3Vocab);
  EXPECT_LT(allowed.size(), 20u);
  int32_t hmm = deepseek_v3().encode("Hmm")[0];
  EXPECT_FALSE(token_allowed(bitmask.data(), hmm));
  EXPECT_FALSE(matcher.accept(hmm));
  EXPECT_EQ(accept_text(matcher, "yes"), deepseek_v3().encode("yes").size());

  // Rolling back past </think> lifts the constraint again.
  matcher.rollback(static_cast<int>(deepseek_v3().encode("yes").size()) + 1);
  EXPECT_FALSE(matcher.constraining());
  EXPECT_TRUE(matcher.accept(hmm));
}

TEST(GrammarMatcherTest, WithoutAReasoningGateTheGrammarAppliesFromTheFirstToken) {
  GrammarMatcher matcher(deepseek_v3_compiler().compile(GrammarSpec::choice({"yes", "no"})));
  EXPECT_TRUE(matcher.constraining());
  EXPECT_FALSE(matcher.accept(reasoning_end_tokens(deepseek_v3())[0]));
}

TEST(GrammarMatcherTest, RollbackAndResetRestoreEarlierMasks) {
  GrammarMatcher matcher(deepseek_v3_compiler().compile(GrammarSpec::json_schema(kPersonSchema)));
  const int32_t words = bitmask_words(kDeepseekV3Vocab);
  std::vector<int32_t> at_start(words), after_prefix(words), now(words);
  matcher.fill_bitmask(at_start.data());
  std::string prefix = "{\"name\": \"Ada\", ";
  ASSERT_EQ(accept_text(matcher, prefix), deepseek_v3().encode(prefix).size());
  matcher.fill_bitmask(after_prefix.data());
  ASSERT_NE(after_prefix, at_start);
  std::vector<int32_t> more = deepseek_v3().encode("\"age\": 3");
  ASSERT_EQ(accept_text(matcher, "\"age\": 3"), more.size());
  EXPECT_EQ(matcher.accepted_tokens(), static_cast<int>(deepseek_v3().encode(prefix).size() + more.size()));
  matcher.rollback(static_cast<int>(more.size()));
  matcher.fill_bitmask(now.data());
  EXPECT_EQ(now, after_prefix);
  EXPECT_THROW(matcher.rollback(1000), Error);
  matcher.reset();
  EXPECT_EQ(matcher.accepted_tokens(), 0);
  matcher.fill_bitmask(now.data());
  EXPECT_EQ(now, at_start);
}

TEST(GrammarMatcherTest, ATerminatedMatcherTakesNothingMoreUntilRolledBack) {
  GrammarMatcher matcher(deepseek_v3_compiler().compile(GrammarSpec::choice({"yes"})));
  ASSERT_EQ(accept_text(matcher, "yes"), deepseek_v3().encode("yes").size());
  EXPECT_FALSE(matcher.is_terminated());
  int32_t eos = *deepseek_v3().eos_id();
  ASSERT_TRUE(matcher.accept(eos));
  EXPECT_TRUE(matcher.is_terminated());
  EXPECT_FALSE(matcher.accept(deepseek_v3().encode("yes")[0]));
  std::vector<int32_t> bitmask(bitmask_words(kDeepseekV3Vocab));
  matcher.fill_bitmask(bitmask.data());
  EXPECT_EQ(test_util::allowed_tokens(bitmask, kDeepseekV3Vocab), std::vector<int32_t>{eos});
  matcher.rollback(1);
  EXPECT_FALSE(matcher.is_terminated());
}

}  // namespace
}  // namespace dsinfer::structured
