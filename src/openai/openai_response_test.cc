#include "openai/openai_response.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"
#include "openai/openai_logprobs.h"

namespace dsinfer::server {
namespace {

using runtime::FinishReason;
using runtime::StreamOutput;
using runtime::TokenLogprob;

// Token i reads "t<i>"; token 9 is the first half of "é" (a character split over two tokens).
std::string token_text(int32_t id) { return id == 9 ? std::string("\xc3") : str_cat("t", id); }

const ResponseMeta kMeta{"chatcmpl-1", 1700000000, "dsv3"};

Generation two_token_generation(std::string first, std::string second) {
  Generation generation;
  StreamOutput output;
  output.token_ids = {1};
  output.text = std::move(first);
  output.logprobs = {{1, -0.5f, {{1, -0.5f}, {2, -1.25f}}}};
  generation.add(output);
  output.token_ids = {2};
  output.text = std::move(second);
  output.logprobs = {{2, -2.0f, {{3, -1.0f}, {4, -1.5f}}}};
  output.finished = true;
  output.finish_reason = FinishReason::kLength;
  output.prompt_tokens = 7;
  output.completion_tokens = 2;
  output.cached_tokens = 4;
  generation.add(output);
  return generation;
}

TEST(OpenAIResponse, ChatCompletionObject) {
  Generation generation = two_token_generation("Hello", " world");
  Json response = chat_completion_response(kMeta, generation, OutputFormat{});
  EXPECT_EQ(response, Json::parse(R"({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "dsv3",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello world"},
                 "logprobs": null, "finish_reason": "length"}],
    "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9,
              "prompt_tokens_details": {"cached_tokens": 4}}})"));
}

TEST(OpenAIResponse, ChatCompletionWithReasoning) {
  OutputFormat format;
  format.reasoning = true;
  Json response = chat_completion_response(kMeta, two_token_generation("<think>hmm</think>", "\n\nFour."), format);
  EXPECT_EQ(response.find("choices")->at(0).find("message")->dump(),
            R"({"role":"assistant","content":"\n\nFour.","reasoning_content":"hmm"})");
  response = chat_completion_response(kMeta, two_token_generation("still ", "thinking"), format);
  EXPECT_EQ(response.find("choices")->at(0).find("message")->dump(),
            R"({"role":"assistant","content":null,"reasoning_content":"still thinking"})");
}

TEST(OpenAIResponse, IncludeReasoningFalseDropsTheThinking) {
  OutputFormat format;
  format.reasoning = true;
  format.reasoning_output = ReasoningOutput::kOmit;
  Json response = chat_completion_response(kMeta, two_token_generation("<think>hmm</think>", "\n\nFour."), format);
  EXPECT_EQ(response.find("choices")->at(0).find("message")->dump(),
            R"({"role":"assistant","content":"\n\nFour.","reasoning_content":null})");
  response = chat_completion_response(kMeta, two_token_generation("still ", "thinking"), format);
  EXPECT_EQ(response.find("choices")->at(0).find("message")->dump(),
            R"({"role":"assistant","content":null,"reasoning_content":null})");
}

TEST(OpenAIResponse, SeparateReasoningFalseLeavesTheThinkingInContent) {
  OutputFormat format;
  format.reasoning = true;
  format.reasoning_output = ReasoningOutput::kInline;
  Json response = chat_completion_response(kMeta, two_token_generation("hmm</think>", "\n\nFour."), format);
  EXPECT_EQ(response.find("choices")->at(0).find("message")->dump(),
            R"({"role":"assistant","content":"hmm</think>\n\nFour.","reasoning_content":null})");
}

TEST(OpenAIResponse, ChatLogprobs) {
  OutputFormat format{true, token_text, false, {}};
  Json response = chat_completion_response(kMeta, two_token_generation("t1", "t2"), format);
  EXPECT_EQ(*response.find("choices")->at(0).find("logprobs"), Json::parse(R"({"content": [
    {"token": "t1", "logprob": -0.5, "bytes": [116, 49],
     "top_logprobs": [{"token": "t1", "logprob": -0.5, "bytes": [116, 49]},
                      {"token": "t2", "logprob": -1.25, "bytes": [116, 50]}]},
    {"token": "t2", "logprob": -2.0, "bytes": [116, 50],
     "top_logprobs": [{"token": "t3", "logprob": -1.0, "bytes": [116, 51]},
                      {"token": "t4", "logprob": -1.5, "bytes": [116, 52]}]}]})"));
}

TEST(OpenAIResponse, LogprobValuesAreJsonSafe) {
  float minus_infinity = -std::numeric_limits<float>::infinity();
  TokenLogprob split_character{9, -0.1f, {{9, -0.1f}, {5, minus_infinity}}};
  Json json = chat_logprobs(std::span(&split_character, 1), token_text);
  // -0.1f prints as -0.1, not as the double nearest the float; -inf becomes -9999.0.
  EXPECT_EQ(json.dump(), "{\"content\":[{\"token\":\"\xef\xbf\xbd\",\"logprob\":-0.1,\"bytes\":[195],"
                         "\"top_logprobs\":[{\"token\":\"\xef\xbf\xbd\",\"logprob\":-0.1,\"bytes\":[195]},"
                         "{\"token\":\"t5\",\"logprob\":-9999.0,\"bytes\":[116,53]}]}]}");
}

TEST(OpenAIResponse, CompletionObjectWithLegacyLogprobs) {
  OutputFormat format{true, token_text, false, {}};
  Json response = completion_response({"cmpl-1", 5, "dsv3"}, two_token_generation("t1", "t2"), format);
  // Each top_logprobs dict holds the top N and the chosen token; offsets count characters.
  EXPECT_EQ(response, Json::parse(R"({
    "id": "cmpl-1", "object": "text_completion", "created": 5, "model": "dsv3",
    "choices": [{"index": 0, "text": "t1t2",
                 "logprobs": {"tokens": ["t1", "t2"], "token_logprobs": [-0.5, -2.0],
                              "top_logprobs": [{"t1": -0.5, "t2": -1.25}, {"t3": -1.0, "t4": -1.5, "t2": -2.0}],
                              "text_offset": [0, 2]},
                 "finish_reason": "length"}],
    "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9,
              "prompt_tokens_details": {"cached_tokens": 4}}})"));
}

TEST(OpenAIResponse, TextOffsetsCountCodePoints) {
  auto text = [](int32_t id) { return id == 1 ? std::string("\xc3\xa9t") : std::string("x"); };
  TokenLogprob tokens[] = {{1, -1.0f, {}}, {2, -1.0f, {}}, {1, -1.0f, {}}};
  int64_t offset = 10;
  Json json = completion_logprobs(tokens, text, offset);
  EXPECT_EQ(json.find("text_offset")->dump(), "[10,12,13]");
  EXPECT_EQ(offset, 15);
}

// A two-token answer to the prompt [5, 6, 7], with vLLM's prompt_logprobs (top 2): 6 was the most
// likely token after 5; 7 ranked third after [5, 6], behind 9 (half a character: U+FFFD) and 8.
Generation scored_prompt_generation() {
  Generation generation;
  StreamOutput first;
  first.token_ids = {1};
  first.text = "t1";
  first.prompt_logprobs = {{6, -0.25f, 1, {{6, -0.25f}, {8, -2.0f}}},
                           {7, -3.0f, 3, {{9, -0.5f}, {8, -std::numeric_limits<float>::infinity()}}}};
  generation.add(first);
  StreamOutput last;
  last.token_ids = {2};
  last.text = "t2";
  last.finished = true;
  last.finish_reason = FinishReason::kLength;
  generation.add(last);
  return generation;
}

constexpr const char* kScoredPrompt =
    R"([null,{"6":{"logprob":-0.25,"rank":1,"decoded_token":"t6"},"8":{"logprob":-2.0,"rank":2,"decoded_token":"t8"}},)"
    R"({"7":{"logprob":-3.0,"rank":3,"decoded_token":"t7"},"9":{"logprob":-0.5,"rank":1,"decoded_token":")"
    "\xef\xbf\xbd"
    R"("},)"
    R"("8":{"logprob":-9999.0,"rank":2,"decoded_token":"t8"}}])";

TEST(OpenAIResponse, PromptLogprobsInEachCompletionChoiceAsVllmShapesThem) {
  OutputFormat format;
  format.token_text = token_text;
  format.prompt_logprobs = true;
  // The prompt token first, its own rank; then the top tokens other than it, ranks 1..N.
  Json choice = completion_answer_choice(3, scored_prompt_generation(), format);
  EXPECT_EQ(choice.find("prompt_logprobs")->dump(), kScoredPrompt);
  EXPECT_EQ(choice.find("text")->as_string(), "t1t2");
  EXPECT_TRUE(choice.find("logprobs")->is_null());
  // A one-token prompt has nothing scored: only its null.
  EXPECT_EQ(completion_answer_choice(0, Generation{}, format).find("prompt_logprobs")->dump(), "[null]");
  format.prompt_logprobs = false;
  EXPECT_FALSE(completion_answer_choice(3, scored_prompt_generation(), format).contains("prompt_logprobs"));
}

TEST(OpenAIResponse, APromptTokenAmongTheTopShowsItsPlaceThere) {
  // Tied with token 3 (so counted third), and listed second among the top 2 (ties to the lower id).
  runtime::PromptLogprob tied{4, -1.0f, 3, {{2, -0.5f}, {3, -1.0f}}};
  runtime::PromptLogprob listed{4, -1.0f, 3, {{3, -1.0f}, {4, -1.0f}}};
  EXPECT_EQ(prompt_logprobs_json(std::span(&tied, 1), token_text).at(1).find("4")->find("rank")->as_int(), 3);
  Json shown = prompt_logprobs_json(std::span(&listed, 1), token_text).at(1);
  EXPECT_EQ(shown.find("4")->find("rank")->as_int(), 2);
  EXPECT_EQ(shown.find("3")->find("rank")->as_int(), 1);
  EXPECT_EQ(shown.size(), 2u);
}

TEST(OpenAIResponse, ChatPutsPromptLogprobsBesideTheChoices) {
  OutputFormat format;
  format.token_text = token_text;
  format.prompt_logprobs = true;
  Json response = chat_completion_response(kMeta, scored_prompt_generation(), format);
  EXPECT_EQ(response.find("prompt_logprobs")->dump(), kScoredPrompt);
  EXPECT_FALSE(response.find("choices")->at(0).contains("prompt_logprobs"));
  format.prompt_logprobs = false;
  EXPECT_FALSE(chat_completion_response(kMeta, scored_prompt_generation(), format).contains("prompt_logprobs"));
}

TEST(OpenAIResponse, FinishReasonsAndIds) {
  EXPECT_TRUE(finish_reason_json(FinishReason::kNone).is_null());
  EXPECT_EQ(finish_reason_json(FinishReason::kStop), Json("stop"));
  EXPECT_EQ(finish_reason_json(FinishReason::kLength), Json("length"));
  EXPECT_EQ(finish_reason_json(FinishReason::kAbort), Json("abort"));
  std::string id = new_response_id("chatcmpl-");
  EXPECT_EQ(id.size(), 9u + 32u);
  EXPECT_EQ(id.rfind("chatcmpl-", 0), 0u);
  EXPECT_NE(id, new_response_id("chatcmpl-"));
  EXPECT_GT(unix_time_now(), 1700000000);
}

}  // namespace
}  // namespace dsinfer::server
