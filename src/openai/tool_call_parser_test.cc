#include "openai/tool_call_parser.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file.h"
#include "core/json.h"
#include "core/source_path.h"

namespace dsinfer::server {
namespace {

// The tokens spelled out here, not taken from the parser, so that a wrong byte in either shows.
// DeepSeek's bars are U+FF5C (EF BD 9C) and its word separators U+2581 (E2 96 81).
const std::string kDsCallsBegin = "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>";
const std::string kDsCallsEnd = "<｜tool▁calls▁end｜>";
const std::string kDsCallBegin = "<｜tool▁call▁begin｜>";
const std::string kDsCallEnd = "<｜tool▁call▁end｜>";
const std::string kDsSep = "<｜tool▁sep｜>";
const std::string kKimiSectionBegin = "<|tool_calls_section_begin|>";
const std::string kKimiSectionEnd = "<|tool_calls_section_end|>";
const std::string kKimiCallBegin = "<|tool_call_begin|>";
const std::string kKimiArgumentBegin = "<|tool_call_argument_begin|>";
const std::string kKimiCallEnd = "<|tool_call_end|>";

std::string v3_call(const std::string& name, const std::string& arguments) {
  return kDsCallBegin + "function" + kDsSep + name + "\n```json\n" + arguments + "\n```" + kDsCallEnd;
}
std::string v31_call(const std::string& name, const std::string& arguments) {
  return kDsCallBegin + name + kDsSep + arguments + kDsCallEnd;
}
std::string kimi_call(const std::string& id, const std::string& arguments) {
  return kKimiCallBegin + id + kKimiArgumentBegin + arguments + kKimiCallEnd;
}

struct Sample {
  std::string format;
  std::string text;
};

// Well-formed outputs: for these, streaming must agree with parse() however the text is cut.
std::vector<Sample> well_formed_samples() {
  return {
      {"deepseek_v3", "Let me check.\n\n" + kDsCallsBegin + v3_call("get_weather", R"({"city": "Paris"})") + "\n" +
                          v3_call("run", R"({"code": "a ``` b\n```", "n": [1, 2]})") + kDsCallsEnd},
      {"deepseek_v3", kDsCallsBegin + kDsCallBegin + "function" + kDsSep + "pretty\n```json\n{\n  \"city\": \"東京\"\n}\n\n```\n" +
                          kDsCallEnd + kDsCallsEnd + " after"},
      {"deepseek_v3", "no calls, only <｜tool▁call and ``` and <｜tool▁calls▁begi"},
      {"deepseek_v31", "normal text" + kDsCallsBegin + v31_call("foo", R"({"x":1})") + v31_call("bar", R"({"y": "<｜"})") +
                           kDsCallsEnd},
      {"deepseek_v31", kDsCallsBegin + v31_call("f", " {} ") + " junk between calls " + v31_call("g", "{\"s\":\"```\"}")},
      {"kimi_k2", "Checking." + kKimiSectionBegin + "\n" + kimi_call("functions.get_weather:0", R"({"city": "Tokyo"})") +
                      "\n" + kimi_call(" functions.get_time:1 ", "\n{\"tz\": \"JST\"}\n") + "\n" + kKimiSectionEnd},
      {"kimi_k2", "<|tool_call_begin|> is text outside a section <|tool_calls_sec"},
      // Raw control characters inside a string (a grammar let them through): escaped, streamed or not.
      {"deepseek_v3", kDsCallsBegin + v3_call("note", "{\"text\": \"a\tb\\\"\nc\x01\",\n \"n\": 1}") + kDsCallsEnd},
  };
}

struct Collected {
  std::string content;
  std::vector<ToolCall> calls;
};

// Streams pieces through a fresh parser and adds up the deltas, checking their shape on the way:
// a call's first delta carries its id and name, later ones only arguments; indexes only grow.
Collected stream(const std::string& format, const std::vector<std::string>& pieces, ToolCallParse* streamed = nullptr,
                 const std::vector<std::string>& offered = {}) {
  ToolCallParser parser(format, offered);
  Collected out;
  auto take = [&](const ToolStreamDelta& delta) {
    out.content += delta.content;
    size_t previous = SIZE_MAX;
    for (const ToolCallDelta& call : delta.tool_calls) {
      EXPECT_TRUE(previous == SIZE_MAX || call.index > previous);
      previous = call.index;
      if (call.index == out.calls.size()) {
        EXPECT_FALSE(call.id.empty());
        EXPECT_FALSE(call.name.empty());
        out.calls.push_back({call.id, call.name, call.arguments});
      } else {
        ASSERT_LT(call.index, out.calls.size());
        EXPECT_TRUE(call.id.empty() && call.name.empty());
        EXPECT_FALSE(call.arguments.empty());
        out.calls[call.index].arguments += call.arguments;
      }
    }
  };
  for (const std::string& piece : pieces) take(parser.push(piece));
  take(parser.finish());
  if (streamed != nullptr) *streamed = parser.streamed();
  return out;
}

// Ids are random, except a model's own (Kimi's): compare them by kind.
void expect_same_id(const std::string& streamed, const std::string& whole) {
  if (whole.starts_with("call_")) {
    EXPECT_TRUE(streamed.starts_with("call_")) << streamed;
    EXPECT_EQ(streamed.size(), whole.size());
  } else {
    EXPECT_EQ(streamed, whole);
  }
}

void expect_agrees(const Collected& streamed, const ToolCallParse& whole, const std::string& where) {
  ASSERT_TRUE(whole.error.empty()) << whole.error;
  EXPECT_EQ(streamed.content, whole.content) << where;
  ASSERT_EQ(streamed.calls.size(), whole.calls.size()) << where;
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    EXPECT_EQ(streamed.calls[i].name, whole.calls[i].name) << where;
    EXPECT_EQ(streamed.calls[i].arguments, whole.calls[i].arguments) << where;
    expect_same_id(streamed.calls[i].id, whole.calls[i].id);
  }
}

TEST(ToolCallParser, UnknownNameListsTheKnownParsers) {
  try {
    ToolCallParser parser("hermes");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "unknown tool-call parser 'hermes' (known: deepseek_v3, deepseek_v31, kimi_k2)");
  }
}

TEST(ToolCallParser, FormatsUseThePublishedTokens) {
  const ToolCallFormat& v3 = tool_call_format("deepseek_v3");
  EXPECT_EQ(v3.section_begin, kDsCallsBegin);
  EXPECT_EQ(v3.section_end, kDsCallsEnd);
  EXPECT_EQ(v3.call_begin, kDsCallBegin);
  EXPECT_EQ(v3.call_end, kDsCallEnd);
  EXPECT_EQ(tool_call_format("deepseek_v31").header_end, kDsSep);
  const ToolCallFormat& kimi = tool_call_format("kimi_k2");
  EXPECT_EQ(kimi.section_begin, kKimiSectionBegin);
  EXPECT_EQ(kimi.section_end, kKimiSectionEnd);
  EXPECT_EQ(kimi.call_begin, kKimiCallBegin);
  EXPECT_EQ(kimi.header_end, kKimiArgumentBegin);
  EXPECT_EQ(kimi.call_end, kKimiCallEnd);
}

// The DeepSeek markers must be single tokens of the real vocabulary, or the model never emits them.
TEST(ToolCallParser, DeepseekMarkersAreAddedTokensOfTheV3Tokenizer) {
  Json tokenizer = Json::parse(read_file(source_path("tests/fixtures/models/v3-tiny/tokenizer.json")));
  std::set<std::string> added;
  for (const Json& token : tokenizer.find("added_tokens")->as_array()) added.insert(token.find("content")->as_string());
  for (const std::string& marker : {kDsCallsBegin, kDsCallsEnd, kDsCallBegin, kDsCallEnd, kDsSep})
    EXPECT_TRUE(added.contains(marker)) << marker;
}

TEST(ToolCallParser, ReadsDeepseekV3Calls) {
  ToolCallParse parse = ToolCallParser("deepseek_v3").parse(well_formed_samples()[0].text);
  EXPECT_EQ(parse.error, "");
  EXPECT_EQ(parse.content, "Let me check.\n\n");
  ASSERT_EQ(parse.calls.size(), 2u);
  EXPECT_EQ(parse.calls[0].name, "get_weather");
  EXPECT_EQ(parse.calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(parse.calls[1].name, "run");
  EXPECT_EQ(parse.calls[1].arguments, R"({"code": "a ``` b\n```", "n": [1, 2]})");
  for (const ToolCall& call : parse.calls) {
    EXPECT_TRUE(call.id.starts_with("call_")) << call.id;
    EXPECT_EQ(call.id.size(), 5u + 32u);
  }
  EXPECT_NE(parse.calls[0].id, parse.calls[1].id);
}

TEST(ToolCallParser, RawControlCharactersInsideStringsAreEscapedAndWhitespaceOutsideKept) {
  ToolCallParse parse = ToolCallParser("deepseek_v3").parse(well_formed_samples().back().text);
  EXPECT_EQ(parse.error, "");
  ASSERT_EQ(parse.calls.size(), 1u);
  EXPECT_EQ(parse.calls[0].arguments, "{\"text\": \"a\\tb\\\"\\nc\\u0001\",\n \"n\": 1}");
  Json arguments = Json::parse(parse.calls[0].arguments);
  EXPECT_EQ(arguments["text"].as_string(), "a\tb\"\nc\x01");
}

TEST(ToolCallParser, DeepseekV3ToleratesWhitespaceAroundTheFence) {
  ToolCallParse parse = ToolCallParser("deepseek_v3").parse(well_formed_samples()[1].text);
  EXPECT_EQ(parse.error, "");
  ASSERT_EQ(parse.calls.size(), 1u);
  EXPECT_EQ(parse.calls[0].name, "pretty");
  EXPECT_EQ(parse.calls[0].arguments, "{\n  \"city\": \"東京\"\n}");
  EXPECT_EQ(parse.content, " after");  // text after the section is content too
}

TEST(ToolCallParser, ReadsDeepseekV31Calls) {
  ToolCallParse parse = ToolCallParser("deepseek_v31").parse(well_formed_samples()[3].text);
  EXPECT_EQ(parse.error, "");
  EXPECT_EQ(parse.content, "normal text");
  ASSERT_EQ(parse.calls.size(), 2u);
  EXPECT_EQ(parse.calls[0].name, "foo");
  EXPECT_EQ(parse.calls[0].arguments, R"({"x":1})");
  EXPECT_EQ(parse.calls[1].name, "bar");
  EXPECT_EQ(parse.calls[1].arguments, R"({"y": "<｜"})");
}

TEST(ToolCallParser, ReadsKimiCallsWithTheirOwnIds) {
  ToolCallParse parse = ToolCallParser("kimi_k2").parse(well_formed_samples()[5].text);
  EXPECT_EQ(parse.error, "");
  EXPECT_EQ(parse.content, "Checking.");
  ASSERT_EQ(parse.calls.size(), 2u);
  EXPECT_EQ(parse.calls[0].id, "functions.get_weather:0");
  EXPECT_EQ(parse.calls[0].name, "get_weather");
  EXPECT_EQ(parse.calls[0].arguments, R"({"city": "Tokyo"})");
  EXPECT_EQ(parse.calls[1].id, "functions.get_time:1");
  EXPECT_EQ(parse.calls[1].name, "get_time");
  EXPECT_EQ(parse.calls[1].arguments, R"({"tz": "JST"})");
}

TEST(ToolCallParser, TextWithoutASectionIsAllContent) {
  for (const Sample& sample : {well_formed_samples()[2], well_formed_samples()[6]}) {
    ToolCallParse parse = ToolCallParser(sample.format).parse(sample.text);
    EXPECT_EQ(parse.error, "");
    EXPECT_EQ(parse.content, sample.text);
    EXPECT_TRUE(parse.calls.empty());
  }
}

TEST(ToolCallParser, CompleteCallsWithoutTheSectionEndAreKept) {
  ToolCallParse parse = ToolCallParser("deepseek_v31").parse(well_formed_samples()[4].text);
  EXPECT_EQ(parse.error, "");
  EXPECT_EQ(parse.content, "");  // text between calls inside a section is dropped
  ASSERT_EQ(parse.calls.size(), 2u);
  EXPECT_EQ(parse.calls[0].arguments, "{}");
  EXPECT_EQ(parse.calls[1].arguments, "{\"s\":\"```\"}");
}

// What the model wrote comes back as content, with the reason, and no call is made up from it.
TEST(ToolCallParser, MalformedCallsReturnTheRawTextAndWhy) {
  struct Case {
    std::string format, text, error;
  };
  const std::vector<Case> cases = {
      {"deepseek_v3", "a" + kDsCallsBegin + v3_call("f", "{\"x\": 1,}") + kDsCallsEnd,
       "deepseek_v3: tool call 1: the arguments are not valid JSON"},
      {"deepseek_v31", kDsCallsBegin + v31_call("f", "{}") + v31_call("g", "[1, 2]") + kDsCallsEnd,
       "deepseek_v31: tool call 2: the arguments are a JSON array, not an object"},
      {"deepseek_v31", kDsCallsBegin + v31_call("f", "") + kDsCallsEnd, "deepseek_v31: tool call 1: the arguments are not valid JSON"},
      {"deepseek_v31", kDsCallsBegin + kDsCallBegin + "f" + kDsSep + "{\"a\": ", "deepseek_v31: tool call 1: the output ends inside the call's arguments"},
      {"deepseek_v31", kDsCallsBegin + kDsCallBegin + "f", "deepseek_v31: tool call 1: the output ends inside the call"},
      {"deepseek_v31", kDsCallsBegin + kDsCallBegin + "f" + kDsCallEnd, "deepseek_v31: tool call 1: the call has no arguments"},
      {"deepseek_v31", kDsCallsBegin + v31_call(" ", "{}"), "deepseek_v31: tool call 1: the call names no function"},
      {"deepseek_v3", kDsCallsBegin + kDsCallBegin + "f\n```json\n{}\n```" + kDsCallEnd, "deepseek_v3: tool call 1: the call names no function"},
      {"kimi_k2", kKimiSectionBegin + kimi_call("functions.f", "{}"), "kimi_k2: tool call 1: the call names no function"},
      {"kimi_k2", kKimiSectionBegin + kimi_call("functions.:0", "{}"), "kimi_k2: tool call 1: the call names no function"},
  };
  for (const Case& c : cases) {
    ToolCallParse parse = ToolCallParser(c.format).parse(c.text);
    EXPECT_TRUE(parse.error.starts_with(c.error)) << c.text << "\n" << parse.error;
    EXPECT_EQ(parse.content, c.text);
    EXPECT_TRUE(parse.calls.empty());
    // The stream cannot take back what it sent, but it reports the same fault.
    ToolCallParse streamed;
    stream(c.format, {c.text}, &streamed);
    EXPECT_TRUE(streamed.error.starts_with(c.error)) << c.text << "\n" << streamed.error;
  }
}

TEST(ToolCallParser, StreamsTheNameFirstThenArgumentPiecesAndHoldsBackMarkers) {
  ToolCallParser parser("deepseek_v3");
  ToolStreamDelta delta = parser.push("Hi <｜tool▁ca");  // may be the section's start
  EXPECT_EQ(delta.content, "Hi ");
  EXPECT_TRUE(parser.push("lls▁begin｜>" + kDsCallBegin + "function" + kDsSep + "f\n```js").tool_calls.empty());
  delta = parser.push("on\n{\"a\":");
  ASSERT_EQ(delta.tool_calls.size(), 1u);
  EXPECT_EQ(delta.tool_calls[0].index, 0u);
  EXPECT_EQ(delta.tool_calls[0].name, "f");
  EXPECT_TRUE(delta.tool_calls[0].id.starts_with("call_"));
  EXPECT_EQ(delta.tool_calls[0].arguments, "{\"a\":");
  delta = parser.push(" 1}\n``");  // the fence may be closing the call: held
  ASSERT_EQ(delta.tool_calls.size(), 1u);
  EXPECT_EQ(delta.tool_calls[0].arguments, " 1}");
  EXPECT_TRUE(delta.tool_calls[0].name.empty());
  EXPECT_TRUE(parser.push("`" + kDsCallEnd + "\n" + kDsCallBegin).tool_calls.empty());
  delta = parser.push("function" + kDsSep + "g\n```json\n{}\n```" + kDsCallEnd + kDsCallsEnd + "bye");
  ASSERT_EQ(delta.tool_calls.size(), 1u);
  EXPECT_EQ(delta.tool_calls[0].index, 1u);
  EXPECT_EQ(delta.tool_calls[0].name, "g");
  EXPECT_EQ(delta.tool_calls[0].arguments, "{}");
  EXPECT_EQ(delta.content, "bye");
  delta = parser.finish();
  EXPECT_EQ(delta.content, "");
  EXPECT_TRUE(delta.tool_calls.empty());
  EXPECT_EQ(parser.streamed().error, "");
  ASSERT_EQ(parser.streamed().calls.size(), 2u);
  EXPECT_EQ(parser.streamed().calls[0].arguments, "{\"a\": 1}");
  EXPECT_EQ(parser.streamed().content, "Hi bye");
}

TEST(ToolCallParser, FinishReleasesAnUnfinishedMarkerAsContent) {
  ToolCallParser parser("kimi_k2");
  EXPECT_EQ(parser.push("x<|tool_calls_sec").content, "x");
  EXPECT_EQ(parser.finish().content, "<|tool_calls_sec");
}

TEST(ToolCallParser, StreamedInvalidArgumentsAreReportedAfterTheFact) {
  ToolCallParse streamed;
  Collected out = stream("kimi_k2", {kKimiSectionBegin + kimi_call("functions.f:0", "{\"a\": tru") + kKimiSectionEnd},
                         &streamed);
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].arguments, "{\"a\": tru");
  EXPECT_TRUE(streamed.error.starts_with("kimi_k2: tool call 1: the arguments are not valid JSON")) << streamed.error;
  EXPECT_EQ(streamed.calls.size(), 1u);
}

TEST(ToolCallParser, StreamingAgreesWithParseForEveryCut) {
  for (const Sample& sample : well_formed_samples()) {
    ToolCallParse whole = ToolCallParser(sample.format).parse(sample.text);
    const std::string& text = sample.text;
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      ToolCallParse streamed;
      Collected out = stream(sample.format, {text.substr(0, cut), text.substr(cut)}, &streamed);
      expect_agrees(out, whole, sample.format + " cut at " + std::to_string(cut));
      EXPECT_EQ(streamed.error, "");
      EXPECT_EQ(streamed.content, whole.content);
    }
  }
}

TEST(ToolCallParser, StreamingAgreesWithParseForEveryPairOfCutsOfAShortText) {
  const std::string text = "a" + kDsCallsBegin + v31_call("f", "{\"x\": 1}") + kDsCallsEnd + "b";
  ToolCallParse whole = ToolCallParser("deepseek_v31").parse(text);
  ASSERT_EQ(whole.calls.size(), 1u);
  for (size_t first = 0; first <= text.size(); ++first)
    for (size_t second = first; second <= text.size(); ++second)
      expect_agrees(stream("deepseek_v31",
                           {text.substr(0, first), text.substr(first, second - first), text.substr(second)}),
                    whole, "cut at " + std::to_string(first) + ", " + std::to_string(second));
}

TEST(ToolCallParser, StreamingAgreesWithParseOneByteAtATimeAndInRandomPieces) {
  std::mt19937 random(20240611);
  for (const Sample& sample : well_formed_samples()) {
    ToolCallParse whole = ToolCallParser(sample.format).parse(sample.text);
    std::vector<std::string> bytes;
    for (char c : sample.text) bytes.emplace_back(1, c);
    expect_agrees(stream(sample.format, bytes), whole, sample.format + " byte by byte");
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<std::string> pieces;
      for (size_t pos = 0; pos < sample.text.size();) {
        size_t length = std::uniform_int_distribution<size_t>(0, 12)(random);
        pieces.push_back(sample.text.substr(pos, length));
        pos += length;
      }
      expect_agrees(stream(sample.format, pieces), whole, sample.format + " trial " + std::to_string(trial));
    }
  }
}

// A call to a function the request did not offer is text the model wrote, never a call: from it
// on (from its section's start when it opens the section) everything is content, whole and streamed.
TEST(ToolCallParser, ACallToAnUnofferedFunctionIsContentFromThereOn) {
  struct Case {
    std::string format, text, content;
    std::vector<std::string> names;  // of the calls that stay calls
  };
  const std::string unknown_second = kDsCallsBegin + v3_call("get_weather", "{}") + "\n" + v3_call("rm", "{}") +
                                     "\n" + v3_call("get_weather", "{}") + kDsCallsEnd + " bye";
  const std::string unknown_first = "Hi " + kDsCallsBegin + " " + v31_call("rm", "{}") + v31_call("get_weather", "{}");
  const std::string kimi = "a" + kKimiSectionBegin + kimi_call("functions.rm:0", "{}") + kKimiSectionEnd;
  const std::string later_section = kDsCallsBegin + v3_call("get_weather", "{}") + kDsCallsEnd + "x" + kDsCallsBegin +
                                    v3_call("rm", "{}") + kDsCallsEnd;
  const std::vector<Case> cases = {
      {"deepseek_v3", unknown_second, unknown_second.substr(unknown_second.find(v3_call("rm", "{}"))), {"get_weather"}},
      {"deepseek_v31", unknown_first, unknown_first, {}},
      {"kimi_k2", kimi, kimi, {}},
      {"deepseek_v3", later_section, "x" + kDsCallsBegin + v3_call("rm", "{}") + kDsCallsEnd, {"get_weather"}},
  };
  const std::vector<std::string> offered = {"get_weather", "get_time"};
  for (const Case& c : cases) {
    ToolCallParse whole = ToolCallParser(c.format, offered).parse(c.text);
    EXPECT_EQ(whole.error, "");
    EXPECT_EQ(whole.content, c.content) << c.text;
    std::vector<std::string> names;
    for (const ToolCall& call : whole.calls) names.push_back(call.name);
    EXPECT_EQ(names, c.names) << c.text;
    for (size_t cut = 0; cut <= c.text.size(); ++cut) {
      ToolCallParse streamed;
      Collected out = stream(c.format, {c.text.substr(0, cut), c.text.substr(cut)}, &streamed, offered);
      expect_agrees(out, whole, c.format + " cut at " + std::to_string(cut));
      EXPECT_EQ(streamed.error, "");
    }
  }
  // Without a list every name is a call.
  EXPECT_EQ(ToolCallParser("deepseek_v3").parse(unknown_second).calls.size(), 3u);
}

TEST(ToolCallParser, CallIdsDifferBetweenRequests) {
  const Sample sample = well_formed_samples()[3];
  std::set<std::string> ids;
  for (int request = 0; request < 50; ++request)
    for (const ToolCall& call : ToolCallParser(sample.format).parse(sample.text).calls) ids.insert(call.id);
  EXPECT_EQ(ids.size(), 100u);
}

}  // namespace
}  // namespace dsinfer::server
