#include "openai/reasoning_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dsinfer::server {
namespace {

struct Streamed {
  std::string reasoning;
  std::string content;
};

Streamed stream(const std::vector<std::string>& pieces) {
  ReasoningParser parser;
  Streamed out;
  for (const std::string& piece : pieces) {
    ReasoningDelta delta = parser.push(piece);
    out.reasoning += delta.reasoning;
    out.content += delta.content;
  }
  ReasoningDelta rest = parser.finish();
  out.reasoning += rest.reasoning;
  out.content += rest.content;
  return out;
}

TEST(ReasoningParser, SplitsAtTheClosingTag) {
  ReasoningSplit split = ReasoningParser::split("<think>\nLet me see.\n</think>\n\nThe answer is 4.");
  EXPECT_EQ(split.reasoning, "\nLet me see.\n");
  EXPECT_EQ(split.content, "\n\nThe answer is 4.");  // nothing stripped, as in vLLM
}

TEST(ReasoningParser, AcceptsOutputWithoutTheOpeningTag) {
  ReasoningSplit split = ReasoningParser::split("thinking</think>answer");
  EXPECT_EQ(split.reasoning, "thinking");
  EXPECT_EQ(split.content, "answer");
}

TEST(ReasoningParser, OutputThatNeverClosesIsAllReasoning) {
  ReasoningSplit split = ReasoningParser::split("<think>still thinking when cut off");
  EXPECT_EQ(split.reasoning, "still thinking when cut off");
  EXPECT_FALSE(split.content.has_value());
}

TEST(ReasoningParser, NothingAfterTheTagIsNoContent) {
  ReasoningSplit split = ReasoningParser::split("<think>hmm</think>");
  EXPECT_EQ(split.reasoning, "hmm");
  EXPECT_FALSE(split.content.has_value());
  EXPECT_EQ(ReasoningParser::split("").reasoning, "");
}

TEST(ReasoningParser, OnlyTheFirstTagsCount) {
  ReasoningSplit split = ReasoningParser::split("a<think>b</think>c</think>d");
  EXPECT_EQ(split.reasoning, "a<think>b");  // a later <think> is text
  EXPECT_EQ(split.content, "c</think>d");
}

TEST(ReasoningParser, StreamsPiecesAsTheyCome) {
  ReasoningParser parser;
  ReasoningDelta delta = parser.push("<think>");
  EXPECT_EQ(delta.reasoning, "");
  delta = parser.push("Let me");
  EXPECT_EQ(delta.reasoning, "Let me");
  delta = parser.push(" see</th");  // the partial tag waits for the next piece
  EXPECT_EQ(delta.reasoning, " see");
  delta = parser.push("ink>\n\nFour");
  EXPECT_EQ(delta.reasoning, "");
  EXPECT_EQ(delta.content, "\n\nFour");
  delta = parser.push(".");
  EXPECT_EQ(delta.content, ".");
  delta = parser.finish();
  EXPECT_EQ(delta.reasoning, "");
  EXPECT_EQ(delta.content, "");
}

TEST(ReasoningParser, FinishReleasesAnUnfinishedTagAsReasoning) {
  ReasoningParser parser;
  EXPECT_EQ(parser.push("x</thi").reasoning, "x");
  EXPECT_EQ(parser.finish().reasoning, "</thi");
  ReasoningParser at_start;
  EXPECT_EQ(at_start.push("<thi").reasoning, "");
  EXPECT_EQ(at_start.finish().reasoning, "<thi");
}

TEST(ReasoningParser, TextThatMerelyLooksLikeATagIsReasoning) {
  Streamed out = stream({"<", "t", "hin", "k", "s>", "</", "x"});
  EXPECT_EQ(out.reasoning, "<thinks></x");
  EXPECT_EQ(out.content, "");
}

// Every way of cutting a text into three pieces (two cut points, empty pieces included) must
// stream to what split() finds in the whole text.
TEST(ReasoningParser, StreamingAgreesWithSplitForEveryCut) {
  const std::vector<std::string> texts = {
      "<think>\nabc</think>\n\nxyz",
      "abc</think>xyz",
      "<think></think>",
      "<think>a</thin</think>b</think>",
      "<<think></</think></think>",
      "no tags at all",
      "<think>never closed </thin",
      "</think>",
      "<thin",
  };
  for (const std::string& text : texts) {
    ReasoningSplit whole = ReasoningParser::split(text);
    for (size_t first = 0; first <= text.size(); ++first) {
      for (size_t second = first; second <= text.size(); ++second) {
        Streamed out = stream({text.substr(0, first), text.substr(first, second - first), text.substr(second)});
        EXPECT_EQ(out.reasoning, whole.reasoning) << text << " cut at " << first << ", " << second;
        EXPECT_EQ(out.content, whole.content.value_or("")) << text << " cut at " << first << ", " << second;
      }
    }
  }
}

TEST(ReasoningParser, StreamingAgreesWithSplitOneByteAtATime) {
  const std::string text = "<think>I think </think> therefore </think> I am";
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  Streamed out = stream(bytes);
  EXPECT_EQ(out.reasoning, "I think ");
  EXPECT_EQ(out.content, " therefore </think> I am");
}

}  // namespace
}  // namespace dsinfer::server
