// StreamRecorder on OpenAI streams as our server and OpenAI's send them: which chunks are tokens,
// when each arrived, usage, the end, and errors.
#include "loadgen/stream_recorder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dsinfer::loadgen {
namespace {

using Times = std::vector<double>;

std::string completion_chunk(std::string_view text, std::string_view finish = "null") {
  return std::string("data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"") +
         std::string(text) + "\",\"logprobs\":null,\"finish_reason\":" + std::string(finish) + "}],\"usage\":null}\n\n";
}

std::string chat_chunk(std::string_view delta) {
  return std::string("data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":") +
         std::string(delta) + ",\"finish_reason\":null}],\"usage\":null}\n\n";
}

constexpr std::string_view kUsage =
    "data: {\"object\":\"text_completion\",\"choices\":[],"
    "\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,\"total_tokens\":15}}\n\n";
constexpr std::string_view kDone = "data: [DONE]\n\n";

TEST(StreamRecorderTest, CompletionsTokensUsageAndDone) {
  StreamRecorder stream;
  stream.on_piece(completion_chunk("Hel"), 1.0);
  stream.on_piece(completion_chunk("lo"), 1.5);
  stream.on_piece(completion_chunk("!") + completion_chunk("", "\"length\"") + std::string(kUsage) +
                      std::string(kDone),
                  2.25);
  stream.on_end(2.5);
  EXPECT_EQ(stream.token_chunk_times(), (Times{1.0, 1.5, 2.25}));  // the empty finish chunk is no token
  EXPECT_EQ(stream.prompt_tokens(), 12);
  EXPECT_EQ(stream.completion_tokens(), 3);
  EXPECT_TRUE(stream.done());
  EXPECT_EQ(stream.error(), "");
}

TEST(StreamRecorderTest, ChatRoleChunkIsNoToken) {
  StreamRecorder stream;
  stream.on_piece(chat_chunk(R"({"role":"assistant","content":""})"), 0.1);  // sent on acceptance
  stream.on_piece(chat_chunk(R"({"reasoning_content":"Hmm"})"), 0.4);
  stream.on_piece(chat_chunk(R"({"content":"Hi"})"), 0.5);
  stream.on_piece(chat_chunk(R"({})") + std::string(kDone), 0.6);
  stream.on_end(0.6);
  EXPECT_EQ(stream.token_chunk_times(), (Times{0.4, 0.5}));
  EXPECT_FALSE(stream.completion_tokens().has_value());  // no usage chunk was asked for
  EXPECT_TRUE(stream.done());
}

TEST(StreamRecorderTest, AnEventTakesTheTimeOfThePieceThatCompletesIt) {
  const std::string chunk = completion_chunk("x");
  StreamRecorder stream;
  stream.on_piece(std::string_view(chunk).substr(0, 20), 1.0);
  stream.on_piece(std::string_view(chunk).substr(20), 3.0);
  EXPECT_EQ(stream.token_chunk_times(), Times{3.0});
}

TEST(StreamRecorderTest, NoDoneWhenTheStreamStops) {
  StreamRecorder stream;
  stream.on_piece(completion_chunk("a"), 1.0);
  stream.on_end(2.0);
  EXPECT_FALSE(stream.done());
  EXPECT_EQ(stream.error(), "");
}

TEST(StreamRecorderTest, DoneWithoutItsBlankLine) {
  StreamRecorder stream;
  stream.on_piece(completion_chunk("a") + "data: [DONE]\n", 1.0);
  EXPECT_FALSE(stream.done());
  stream.on_end(1.5);
  EXPECT_TRUE(stream.done());
}

TEST(StreamRecorderTest, ErrorEvent) {
  StreamRecorder stream;
  stream.on_piece(completion_chunk("a"), 1.0);
  stream.on_piece("data: {\"error\":{\"message\":\"engine failed\",\"type\":\"InternalServerError\"}}\n\n", 2.0);
  stream.on_piece(kDone, 2.0);
  EXPECT_EQ(stream.error(), "engine failed");
  EXPECT_FALSE(stream.done());  // nothing after an error counts
}

TEST(StreamRecorderTest, EventThatIsNotJson) {
  StreamRecorder stream;
  stream.on_piece("data: {\"choices\": [\n\n", 1.0);
  EXPECT_NE(stream.error().find("not JSON"), std::string::npos) << stream.error();
}

}  // namespace
}  // namespace dsinfer::loadgen
