#include "structured/grammar_spec.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace dsinfer::structured {
namespace {

TEST(GrammarSpecTest, DescribeNamesTheKindAndQuotesTheText) {
  EXPECT_EQ(GrammarSpec::json_object().describe(), "json_object");
  EXPECT_EQ(GrammarSpec::regex("[a-z]+\n").describe(), "regex \"[a-z]+\\n\"");
  EXPECT_EQ(GrammarSpec::json_schema(R"({"type":"string"})", true).describe(),
            R"(json_schema (strict) "{\"type\":\"string\"}")");
  EXPECT_EQ(GrammarSpec::json_schema("{}", false).describe(), "json_schema \"{}\"");
  EXPECT_EQ(GrammarSpec::choice({"a", "b"}).describe(), "choice of 2 [\"a\", \"b\"]");
  EXPECT_EQ(GrammarSpec::choice({"a", "b", "c", "d"}).describe(), "choice of 4 [\"a\", \"b\", \"c\", ...]");
  EXPECT_EQ(GrammarSpec::ebnf("root ::= \"x\"").describe(), "grammar \"root ::= \\\"x\\\"\"");
}

TEST(GrammarSpecTest, DescribeCutsALongTextWithoutSplittingACharacter) {
  std::string text(59, 'a');
  text += "é and more";  // é's two bytes straddle the cut at 60
  std::string described = GrammarSpec::regex(text).describe();
  EXPECT_EQ(described, "regex \"" + std::string(59, 'a') + "\"...");
}

TEST(GrammarSpecTest, CacheKeysDifferExactlyWhenSpecsDiffer) {
  std::vector<GrammarSpec> specs = {
      GrammarSpec::json_object(),
      GrammarSpec::json_schema("{}", true),
      GrammarSpec::json_schema("{}", false),
      GrammarSpec::regex("{}"),
      GrammarSpec::ebnf("{}"),
      GrammarSpec::structural_tag("{}"),
      GrammarSpec::choice({"ab"}),
      GrammarSpec::choice({"a", "b"}),
      GrammarSpec::choice({"1:a"}),
      GrammarSpec::choice({"1:a", ""}),
  };
  std::set<std::string> keys;
  for (const GrammarSpec& spec : specs) keys.insert(spec.cache_key());
  EXPECT_EQ(keys.size(), specs.size());
  EXPECT_EQ(GrammarSpec::regex("x+").cache_key(), GrammarSpec::regex("x+").cache_key());
  // strict only matters for json_schema.
  GrammarSpec loose_regex = GrammarSpec::regex("x+");
  loose_regex.strict = false;
  EXPECT_EQ(loose_regex.cache_key(), GrammarSpec::regex("x+").cache_key());
}

}  // namespace
}  // namespace dsinfer::structured
