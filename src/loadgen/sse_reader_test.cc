// SseReader: the same events however the bytes are split, and the corners of the event-stream format.
#include "loadgen/sse_reader.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace dsinfer::loadgen {
namespace {

using Events = std::vector<std::string>;

// A stream with every kind of line end, a comment, other fields, a two-line event and "data:"
// without its space.
constexpr std::string_view kStream =
    "data: {\"text\":\"a\"}\n\n"
    ": keep-alive\r\n"
    "data: {\"text\":\"b\"}\r\n\r\n"
    "event: message\nid: 7\nretry: 10\n"
    "data: first line\ndata: second line\n\n"
    "data:{\"text\":\"\xC3\xA9\"}\r\r"
    "data: [DONE]\n\n";

const Events kExpected = {"{\"text\":\"a\"}", "{\"text\":\"b\"}", "first line\nsecond line",
                          "{\"text\":\"\xC3\xA9\"}", "[DONE]"};

Events read_in_pieces(std::string_view bytes, const std::vector<size_t>& cuts) {
  SseReader reader;
  Events events;
  size_t at = 0;
  for (size_t cut : cuts) {
    for (std::string& event : reader.feed(bytes.substr(at, cut - at))) events.push_back(std::move(event));
    at = cut;
  }
  for (std::string& event : reader.feed(bytes.substr(at))) events.push_back(std::move(event));
  for (std::string& event : reader.finish()) events.push_back(std::move(event));
  return events;
}

TEST(SseReaderTest, WholeStream) { EXPECT_EQ(read_in_pieces(kStream, {}), kExpected); }

TEST(SseReaderTest, EverySplitIntoTwo) {
  for (size_t cut = 0; cut <= kStream.size(); ++cut) {
    EXPECT_EQ(read_in_pieces(kStream, {cut}), kExpected) << "split at byte " << cut;
  }
}

TEST(SseReaderTest, ByteByByte) {
  std::vector<size_t> cuts;
  for (size_t cut = 1; cut < kStream.size(); ++cut) cuts.push_back(cut);
  EXPECT_EQ(read_in_pieces(kStream, cuts), kExpected);
}

TEST(SseReaderTest, RandomSplits) {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<size_t> cuts;
    for (size_t at = std::uniform_int_distribution<size_t>(0, 5)(rng); at < kStream.size();
         at += std::uniform_int_distribution<size_t>(1, 9)(rng)) {
      cuts.push_back(at);
    }
    EXPECT_EQ(read_in_pieces(kStream, cuts), kExpected) << "trial " << trial;
  }
}

TEST(SseReaderTest, CarriageReturnThenLineFeedInTheNextPieceIsOneLineEnd) {
  SseReader reader;
  EXPECT_EQ(reader.feed("data: x\r"), Events{});
  EXPECT_EQ(reader.feed("\n"), Events{});  // the same line end, not a blank line
  EXPECT_EQ(reader.feed("\r"), Events{"x"});
  EXPECT_EQ(reader.feed("\n"), Events{});  // ends nothing new: the blank line was "\r\n"
  EXPECT_EQ(reader.finish(), Events{});
}

TEST(SseReaderTest, EventsComeOutWhenTheirBlankLineArrives) {
  SseReader reader;
  EXPECT_EQ(reader.feed("data: one\n"), Events{});
  EXPECT_EQ(reader.feed("\ndata: two\n\ndata: thr"), (Events{"one", "two"}));
  EXPECT_EQ(reader.feed("ee\n\n"), Events{"three"});
}

TEST(SseReaderTest, FinishKeepsAnUnterminatedLastEvent) {
  SseReader reader;
  EXPECT_EQ(reader.feed("data: a\n\ndata: [DONE]"), Events{"a"});
  EXPECT_EQ(reader.finish(), Events{"[DONE]"});
}

TEST(SseReaderTest, EmptyDataAndNoData) {
  SseReader reader;
  // "data" alone is a data field with an empty value; a block of comments and other fields is no event.
  EXPECT_EQ(reader.feed("data\n\n: ping\nevent: x\n\n\n\n"), Events{""});
  EXPECT_EQ(reader.feed("database: 1\n\n"), Events{});  // another field, though it starts with "data"
}

}  // namespace
}  // namespace dsinfer::loadgen
