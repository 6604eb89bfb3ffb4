#include "openai/openai_stream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace dsinfer::server {
namespace {

using runtime::FinishReason;
using runtime::StreamOutput;

const ResponseMeta kMeta{"chatcmpl-7", 1700000000, "dsv3"};

StreamOutput piece(std::string text, int32_t token) {
  StreamOutput output;
  output.text = std::move(text);
  output.token_ids = {token};
  return output;
}

StreamOutput last(std::string text, FinishReason reason) {
  StreamOutput output = piece(std::move(text), 99);
  output.finished = true;
  output.finish_reason = reason;
  output.prompt_tokens = 5;
  output.completion_tokens = 3;
  output.cached_tokens = 0;
  return output;
}

// Splits an SSE body into its events, checking the framing on the way: every event is one
// "data: " line followed by a blank line.
std::vector<std::string> events_of(const std::string& body) {
  std::vector<std::string> events;
  size_t start = 0;
  while (start < body.size()) {
    EXPECT_EQ(body.compare(start, 6, "data: "), 0) << body.substr(start);
    size_t end = body.find("\n\n", start);
    EXPECT_NE(end, std::string::npos);
    if (end == std::string::npos) break;
    std::string data = body.substr(start + 6, end - start - 6);
    EXPECT_EQ(data.find('\n'), std::string::npos);
    events.push_back(data);
    start = end + 2;
  }
  return events;
}

TEST(OpenAIStream, ChatChunksAsOpenAISendsThem) {
  ChatCompletionStream stream(kMeta, OutputFormat{}, /*include_usage=*/false);
  std::string body = stream.begin();
  body += stream.next(piece("Hel", 1));
  body += stream.next(piece("", 2));  // text withheld (a partial stop string): no chunk
  body += stream.next(last("lo", FinishReason::kStop));
  EXPECT_EQ(stream.next(last("late", FinishReason::kStop)), "");

  EXPECT_EQ(body.substr(0, 6), "data: ");
  EXPECT_EQ(body.substr(body.size() - 14), "data: [DONE]\n\n");
  std::vector<std::string> events = events_of(body);
  ASSERT_EQ(events.size(), 5u);
  const char* envelope = R"("id":"chatcmpl-7","object":"chat.completion.chunk","created":1700000000,"model":"dsv3")";
  EXPECT_EQ(Json::parse(events[0]), Json::parse(std::string("{") + envelope +
      R"(,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]})"));
  EXPECT_EQ(Json::parse(events[1]), Json::parse(std::string("{") + envelope +
      R"(,"choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}]})"));
  EXPECT_EQ(Json::parse(events[2]), Json::parse(std::string("{") + envelope +
      R"(,"choices":[{"index":0,"delta":{"content":"lo"},"logprobs":null,"finish_reason":null}]})"));
  EXPECT_EQ(Json::parse(events[3]), Json::parse(std::string("{") + envelope +
      R"(,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]})"));
  EXPECT_EQ(events[4], "[DONE]");
}

TEST(OpenAIStream, IncludeUsageAddsNullUsageEverywhereAndAUsageChunk) {
  ChatCompletionStream stream(kMeta, OutputFormat{}, /*include_usage=*/true);
  std::vector<std::string> events = events_of(stream.next(last("Hi", FinishReason::kLength)));
  ASSERT_EQ(events.size(), 5u);  // role (sent by next() itself), content, finish, usage, [DONE]
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Json::parse(events[i]).find("usage")->is_null()) << events[i];
  EXPECT_EQ(Json::parse(events[2]).find("choices")->at(0).find("finish_reason")->as_string(), "length");
  EXPECT_EQ(Json::parse(events[3]), Json::parse(R"({"id":"chatcmpl-7","object":"chat.completion.chunk",
      "created":1700000000,"model":"dsv3","choices":[],
      "usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":0}}})"));
  EXPECT_EQ(events[4], "[DONE]");
}

TEST(OpenAIStream, ReasoningDeltasWithATagSplitAcrossDeliveries) {
  OutputFormat format;
  format.reasoning = true;
  ChatCompletionStream stream(kMeta, format, false);
  std::string body = stream.begin();
  body += stream.next(piece("<think>Let", 1));
  body += stream.next(piece(" me</thi", 2));
  body += stream.next(piece("nk>\n\n4", 3));
  body += stream.next(last("", FinishReason::kStop));
  std::vector<std::string> deltas;
  for (const std::string& event : events_of(body))
    if (event != "[DONE]") deltas.push_back(Json::parse(event).find("choices")->at(0).find("delta")->dump());
  EXPECT_EQ(deltas, (std::vector<std::string>{
                        R"({"role":"assistant","content":""})",
                        R"({"reasoning_content":"Let"})",
                        R"({"reasoning_content":" me"})",
                        R"({"content":"\n\n4"})",
                        R"({})",
                    }));
}

// The deltas of a chat stream fed `pieces` (the last one finishes it), each as compact JSON.
std::vector<std::string> chat_deltas(ChatCompletionStream& stream, const std::vector<std::string>& pieces) {
  std::string body = stream.begin();
  for (size_t i = 0; i + 1 < pieces.size(); ++i) body += stream.next(piece(pieces[i], static_cast<int32_t>(i)));
  body += stream.next(last(pieces.back(), FinishReason::kStop));
  std::vector<std::string> deltas;
  for (const std::string& event : events_of(body))
    if (event != "[DONE]") deltas.push_back(Json::parse(event).find("choices")->at(0).find("delta")->dump());
  return deltas;
}

TEST(OpenAIStream, IncludeReasoningFalseStreamsNoReasoning) {
  OutputFormat format;
  format.reasoning = true;
  format.reasoning_output = ReasoningOutput::kOmit;
  ChatCompletionStream stream(kMeta, format, false);
  const std::vector<std::string> expected = {R"({"role":"assistant","content":""})", R"({"content":"\n\n4"})", "{}"};
  EXPECT_EQ(chat_deltas(stream, {"<think>Let", " me</thi", "nk>\n\n4", ""}), expected);
}

TEST(OpenAIStream, SeparateReasoningFalseStreamsTheThinkingAsContent) {
  OutputFormat format;
  format.reasoning = true;
  format.reasoning_output = ReasoningOutput::kInline;
  ChatCompletionStream stream(kMeta, format, false);
  const std::vector<std::string> expected = {R"({"role":"assistant","content":""})", R"({"content":"Let"})",
                                             R"({"content":" me</thi"})", R"({"content":"nk>\n\n4"})", "{}"};
  EXPECT_EQ(chat_deltas(stream, {"Let", " me</thi", "nk>\n\n4", ""}), expected);
}

TEST(OpenAIStream, ContinuousUsageCountsEveryChunkOfTheChoice) {
  ChatCompletionStream stream(kMeta, OutputFormat{}, /*include_usage=*/true, StreamChoice{},
                              ContinuousUsage{true, 5});
  std::string body = stream.begin();
  body += stream.next(piece("Hel", 1));
  StreamOutput two = piece("l", 2);
  two.token_ids = {2, 3};
  body += stream.next(two);
  body += stream.next(last("o", FinishReason::kStop));
  std::vector<std::string> events = events_of(body);
  ASSERT_EQ(events.size(), 7u);  // role, 3 contents, finish, usage, [DONE]
  const int64_t completion[] = {0, 1, 3, 4, 4};
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(Json::parse(events[i]).find("usage")->dump(),
              str_cat(R"({"prompt_tokens":5,"completion_tokens":)", completion[i],
                      R"(,"total_tokens":)", 5 + completion[i], "}"))
        << events[i];
  EXPECT_EQ(Json::parse(events[5]).find("choices")->size(), 0u);  // the final usage chunk, as before
  EXPECT_EQ(Json::parse(events[5]).find("usage")->find("completion_tokens")->as_int(), 3);  // last()'s count
  EXPECT_EQ(events[6], "[DONE]");
}

TEST(OpenAIStream, ContinuousUsageInCompletionChunks) {
  CompletionStream stream(kMeta, OutputFormat{}, /*include_usage=*/true, StreamChoice{}, ContinuousUsage{true, 2});
  std::string body = stream.next(piece("a", 7));
  body += stream.next(last("b", FinishReason::kLength));
  std::vector<std::string> events = events_of(body);
  ASSERT_EQ(events.size(), 5u);  // two texts, finish, usage, [DONE]
  EXPECT_EQ(Json::parse(events[0]).find("usage")->dump(),
            R"({"prompt_tokens":2,"completion_tokens":1,"total_tokens":3})");
  EXPECT_EQ(Json::parse(events[2]).find("usage")->dump(),  // the finish chunk
            R"({"prompt_tokens":2,"completion_tokens":2,"total_tokens":4})");
  // Without it, the same chunks carry null usage.
  CompletionStream plain(kMeta, OutputFormat{}, /*include_usage=*/true);
  EXPECT_TRUE(Json::parse(events_of(plain.next(piece("a", 7)))[0]).find("usage")->is_null());
}

TEST(OpenAIStream, ReasoningHeldAtTheEndIsFlushed) {
  OutputFormat format;
  format.reasoning = true;
  ChatCompletionStream stream(kMeta, format, false);
  std::vector<std::string> events = events_of(stream.next(last("cut off </thi", FinishReason::kLength)));
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(Json::parse(events[1]).find("choices")->at(0).find("delta")->dump(),
            R"({"reasoning_content":"cut off </thi"})");
}

TEST(OpenAIStream, ChatLogprobsRideOnTheirChunk) {
  OutputFormat format{true, [](int32_t id) { return str_cat("t", id); }, false, {}};
  ChatCompletionStream stream(kMeta, format, false);
  StreamOutput output = piece("", 4);  // no text yet, but the token's logprob is due
  output.logprobs = {{4, -0.25f, {{4, -0.25f}}}};
  std::vector<std::string> events = events_of(stream.next(output));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(Json::parse(events[1]).find("choices")->at(0).dump(),
            R"({"index":0,"delta":{"content":""},"logprobs":{"content":[{"token":"t4","logprob":-0.25,)"
            R"("bytes":[116,52],"top_logprobs":[{"token":"t4","logprob":-0.25,"bytes":[116,52]}]}]},)"
            R"("finish_reason":null})");
}

TEST(OpenAIStream, CompletionChunks) {
  OutputFormat format{true, [](int32_t id) { return std::string(id == 1 ? "ab" : "c"); }, false, {}};
  CompletionStream stream({"cmpl-3", 9, "dsv3"}, format, true);
  StreamOutput first = piece("ab", 1);
  first.logprobs = {{1, -1.0f, {}}};
  StreamOutput second = last("c", FinishReason::kAbort);
  second.logprobs = {{2, -2.0f, {}}};
  std::string body = stream.next(first);
  body += stream.next(second);
  std::vector<std::string> events = events_of(body);
  ASSERT_EQ(events.size(), 5u);
  const char* envelope = R"({"id":"cmpl-3","object":"text_completion","created":9,"model":"dsv3","choices":[)";
  EXPECT_EQ(events[0], std::string(envelope) +
            R"({"index":0,"text":"ab","logprobs":{"tokens":["ab"],"token_logprobs":[-1.0],)"
            R"("top_logprobs":[{"ab":-1.0}],"text_offset":[0]},"finish_reason":null}],"usage":null})");
  EXPECT_EQ(events[1], std::string(envelope) +
            R"({"index":0,"text":"c","logprobs":{"tokens":["c"],"token_logprobs":[-2.0],)"
            R"("top_logprobs":[{"c":-2.0}],"text_offset":[2]},"finish_reason":null}],"usage":null})");
  EXPECT_EQ(events[2], std::string(envelope) +
            R"({"index":0,"text":"","logprobs":null,"finish_reason":"abort"}],"usage":null})");
  EXPECT_EQ(Json::parse(events[3]).find("usage")->find("total_tokens")->as_int(), 8);
  EXPECT_EQ(events[4], "[DONE]");
}

TEST(OpenAIStream, OneOfSeveralChoicesCarriesItsIndexAndEndsOnlyItself) {
  ChatCompletionStream chat(kMeta, OutputFormat{}, /*include_usage=*/true, StreamChoice{2, /*ends_stream=*/false});
  std::vector<std::string> events = events_of(chat.next(last("Hi", FinishReason::kStop)));
  ASSERT_EQ(events.size(), 3u);  // role, content, finish: no usage chunk, no [DONE]
  for (const std::string& event : events)
    EXPECT_EQ(Json::parse(event).find("choices")->at(0).find("index")->as_int(), 2);
  EXPECT_EQ(Json::parse(events[2]).find("choices")->at(0).find("finish_reason")->as_string(), "stop");

  CompletionStream completion({"cmpl-5", 9, "dsv3"}, OutputFormat{}, false, StreamChoice{1, false});
  events = events_of(completion.next(last("ab", FinishReason::kLength)));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(Json::parse(events[1]).find("choices")->at(0).dump(),
            R"({"index":1,"text":"","logprobs":null,"finish_reason":"length"})");
  // A failed choice ends with the error event, and whoever runs the choices closes the stream.
  StreamOutput failed = last("", FinishReason::kError);
  failed.error = "boom";
  CompletionStream failing({"cmpl-6", 9, "dsv3"}, OutputFormat{}, false, StreamChoice{3, false});
  EXPECT_EQ(failing.next(failed),
            "data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n");

  // The stream's end: the usage of every choice when asked for, then [DONE]; only [DONE] after an error.
  ChunkEnvelope envelope(kMeta, "chat.completion.chunk", /*include_usage=*/true);
  events = events_of(envelope.close(Usage{5, 7, 2}));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(Json::parse(events[0]).find("usage")->dump(),
            R"({"prompt_tokens":5,"completion_tokens":7,"total_tokens":12,)"
            R"("prompt_tokens_details":{"cached_tokens":2}})");
  EXPECT_EQ(events[1], "[DONE]");
  EXPECT_EQ(envelope.close(std::nullopt), "data: [DONE]\n\n");
}

TEST(OpenAIStream, EngineErrorEndsTheStreamWithAnErrorEvent) {
  CompletionStream stream({"cmpl-4", 9, "dsv3"}, OutputFormat{}, true);
  StreamOutput failed = last("", FinishReason::kError);
  failed.error = "the model step failed";
  EXPECT_EQ(stream.next(failed),
            "data: {\"error\":{\"message\":\"the model step failed\",\"type\":\"server_error\",\"param\":null,"
            "\"code\":null}}\n\ndata: [DONE]\n\n");
}

}  // namespace
}  // namespace dsinfer::server
