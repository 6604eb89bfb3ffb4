#include "structured/grammar_compiler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "structured/structural_tag.h"
#include "structured/test_util.h"

namespace dsinfer::structured {
namespace {

using test_util::deepseek_v3;
using test_util::deepseek_v3_compiler;
using test_util::kDeepseekV3Vocab;

// The message a bad spec gives, checked to be fit for an HTTP 400 body: it names the spec, has no
// source location or time stamp of xgrammar's, and is one line.
std::string compile_error(const GrammarSpec& spec) {
  try {
    deepseek_v3_compiler().compile(spec);
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_EQ(message.rfind(spec.describe() + ": ", 0), 0u) << message;
    EXPECT_EQ(message.find(".cc:"), std::string::npos) << message;
    EXPECT_EQ(message.find(".h:"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_GT(message.size(), spec.describe().size() + 10) << message;
    return message;
  }
  ADD_FAILURE() << spec.describe() << " compiled";
  return "";
}

TEST(GrammarCompilerTest, TheSameSpecGivesTheSameCompiledGrammar) {
  GrammarCompiler& compiler = deepseek_v3_compiler();
  GrammarSpec spec = GrammarSpec::regex("(yes|no)-cache-test");
  GrammarCacheStats before = compiler.cache_stats();
  CompiledGrammarPtr first = compiler.compile(spec);
  CompiledGrammarPtr second = compiler.compile(GrammarSpec::regex("(yes|no)-cache-test"));
  ASSERT_TRUE(first);
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(compiler.cache_stats().misses, before.misses + 1);
  EXPECT_EQ(compiler.cache_stats().hits, before.hits + 1);
  EXPECT_GT(first->memory_bytes(), 0u);
  EXPECT_EQ(first->vocab_size(), kDeepseekV3Vocab);
  EXPECT_EQ(first->description(), spec.describe());

  CompiledGrammarPtr other = compiler.compile(GrammarSpec::regex("(yes|no)-cache-test2"));
  EXPECT_NE(other.get(), first.get());
}

TEST(GrammarCompilerTest, ASmallCacheEvictsTheLeastRecentlyUsedGrammar) {
  GrammarCompilerOptions options;
  options.cache_bytes = 1;
  GrammarCompiler compiler(deepseek_v3(), options);
  CompiledGrammarPtr a = compiler.compile(GrammarSpec::regex("a+"));
  CompiledGrammarPtr b = compiler.compile(GrammarSpec::regex("b+"));  // evicts a
  EXPECT_EQ(compiler.compile(GrammarSpec::regex("b+")).get(), b.get());
  EXPECT_NE(compiler.compile(GrammarSpec::regex("a+")).get(), a.get());
  EXPECT_EQ(compiler.cache_stats().evictions, 2);
}

TEST(GrammarCompilerTest, AsyncCompileCompletesOffTheCallingThread) {
  GrammarCompiler& compiler = deepseek_v3_compiler();
  GrammarSpec spec = GrammarSpec::json_schema(
      R"({"type": "object", "properties": {"async": {"type": "integer"}}, "required": ["async"]})");
  PendingGrammar pending = compiler.compile_async(spec);
  PendingGrammar again = compiler.compile_async(spec);  // in flight or done: the same grammar
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!pending.ready() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(pending.ready());
  CompiledGrammarPtr grammar = pending.get();
  ASSERT_TRUE(grammar);
  EXPECT_EQ(again.get().get(), grammar.get());
  EXPECT_EQ(compiler.compile(spec).get(), grammar.get());
}

TEST(GrammarCompilerTest, ThreadsAskingForOneSpecAtOnceShareOneCompile) {
  GrammarCompiler& compiler = deepseek_v3_compiler();
  GrammarSpec spec = GrammarSpec::json_schema(R"({"type": "array", "items": {"type": "number"}})");
  int64_t misses = compiler.cache_stats().misses;
  std::vector<CompiledGrammarPtr> results(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = i % 2 ? compiler.compile(spec) : compiler.compile_async(spec).get();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const CompiledGrammarPtr& result : results) EXPECT_EQ(result.get(), results[0].get());
  EXPECT_EQ(compiler.cache_stats().misses, misses + 1);
}

TEST(GrammarCompilerTest, AsyncCompileOfABadSpecThrowsFromGet) {
  PendingGrammar pending = deepseek_v3_compiler().compile_async(GrammarSpec::regex("(unclosed"));
  EXPECT_THROW(pending.get(), Error);
}

TEST(GrammarCompilerTest, ABadSchemaIsACleanError) {
  std::string not_json = compile_error(GrammarSpec::json_schema("{\"type\": \"object\""));
  std::string bad_type = compile_error(GrammarSpec::json_schema(R"({"type": "nonsense"})"));
  EXPECT_NE(bad_type.find("nonsense"), std::string::npos) << bad_type;
  compile_error(GrammarSpec::json_schema(R"({"type": "integer", "minimum": 5, "maximum": 1})"));
}

TEST(GrammarCompilerTest, BadRegexGrammarChoiceAndStructuralTagAreCleanErrors) {
  compile_error(GrammarSpec::regex("[a-z"));
  compile_error(GrammarSpec::ebnf("root ::= undefined_rule"));
  compile_error(GrammarSpec::ebnf("start ::= \"x\""));  // no root rule
  compile_error(GrammarSpec::choice({}));
  compile_error(GrammarSpec::choice({"a", ""}));
  compile_error(GrammarSpec::structural_tag(R"({"type": "structural_tag"})"));
  compile_error(GrammarSpec::structural_tag(
      R"({"structures": [{"begin": "<f>", "end": "</f>"}], "triggers": ["<f>"]})"));
}

TEST(GrammarCompilerTest, VocabularyPaddingIsNeverAllowed) {
  // DeepSeek-V3's logits are 129,280 wide; the tokenizer has 128,815 ids. json_object allows
  // thousands of tokens in a string, never one of the padding ids nor a special token.
  GrammarMatcher matcher(deepseek_v3_compiler().compile(GrammarSpec::json_object()));
  for (int32_t id : deepseek_v3().encode("{\"")) ASSERT_TRUE(matcher.accept(id));
  std::vector<int32_t> bitmask(bitmask_words(kDeepseekV3Vocab));
  matcher.fill_bitmask(bitmask.data());
  int allowed = 0;
  for (int32_t id = 0; id < kDeepseekV3Vocab; ++id) {
    bool expected_out = id >= deepseek_v3().vocab_size() || deepseek_v3().is_special(id);
    if (expected_out) {
      ASSERT_FALSE(token_allowed(bitmask.data(), id)) << id;
    }
    allowed += token_allowed(bitmask.data(), id);
  }
  EXPECT_GT(allowed, 100000);
}

TEST(GrammarCompilerTest, AModelVocabularySmallerThanTheTokenizersIsRefused) {
  EXPECT_THROW(GrammarCompiler(deepseek_v3(), test_util::options_with_vocab(1000)), Error);
  GrammarCompilerOptions stop_out_of_range = test_util::options_with_vocab(kDeepseekV3Vocab);
  stop_out_of_range.stop_token_ids = {kDeepseekV3Vocab};
  EXPECT_THROW(GrammarCompiler(deepseek_v3(), stop_out_of_range), Error);
}

TEST(StructuralTagTest, VllmsFormBecomesTriggeredTags) {
  Json converted = Json::parse(structural_tag_for_xgrammar(
      R"({"type": "structural_tag", "triggers": ["<f="],
          "structures": [{"begin": "<f=a>", "schema": {"type": "object"}, "end": "</f>"}]})"));
  EXPECT_EQ(converted, Json::parse(R"({"type": "structural_tag", "format": {
      "type": "triggered_tags", "triggers": ["<f="],
      "tags": [{"type": "tag", "begin": "<f=a>",
                "content": {"type": "json_schema", "json_schema": {"type": "object"}},
                "end": "</f>"}]}})"));  // Json compares members in order
  std::string native = R"({"type": "structural_tag", "format": {"type": "const_string", "value": "x"}})";
  EXPECT_EQ(structural_tag_for_xgrammar(native), native);
  EXPECT_THROW(structural_tag_for_xgrammar("[1]"), Error);
  EXPECT_THROW(structural_tag_for_xgrammar(R"({"type": "other", "format": {}})"), Error);
}

TEST(StructuralTagTest, JsonContentsGetTheWhitespaceBoundUnlessTheySetTheirOwn) {
  Json bounded = Json::parse(bound_json_whitespace(
      R"({"type": "structural_tag", "format": {"type": "sequence", "elements": [
          {"type": "json_schema", "json_schema": {"type": "object"}},
          {"type": "tag", "begin": "<a>", "content": {"type": "json_schema", "json_schema": {}, "max_whitespace_cnt": 2},
           "end": "</a>"}]}})",
      16));
  const Json& elements = *bounded.find("format")->find("elements");
  EXPECT_EQ(elements.at(0).find("max_whitespace_cnt")->as_int(), 16);
  EXPECT_FALSE(elements.at(0).find("json_schema")->contains("max_whitespace_cnt"));  // the schema is left alone
  EXPECT_EQ(elements.at(1).find("content")->find("max_whitespace_cnt")->as_int(), 2);
}

}  // namespace
}  // namespace dsinfer::structured
