// Admission (admission.h): the bounded queue, its expiry and the scale-out advice; and what the
// router reads from requests and answers (pd_request.h, output_length.h).
#include "router/admission.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "openai/openai_errors.h"
#include "router/output_length.h"
#include "router/pd_request.h"

namespace dsinfer::router {
namespace {

using namespace std::chrono_literals;

TEST(AdmissionQueue, IsFirstComeFirstServedBoundedAndExpires) {
  AdmissionQueue queue(2);
  const Clock::time_point start = Clock::now();
  EXPECT_EQ(queue.busy_for(start), Clock::duration::zero());
  EXPECT_TRUE(queue.push(1, start));
  EXPECT_TRUE(queue.push(2, start + 1s));
  EXPECT_FALSE(queue.push(3, start + 1s));  // full
  EXPECT_EQ(queue.front(), 1u);
  EXPECT_EQ(queue.busy_for(start + 5s), 5s);
  EXPECT_TRUE(queue.remove(1));  // its client left
  EXPECT_FALSE(queue.remove(1));
  EXPECT_EQ(queue.busy_for(start + 5s), 5s);  // never empty since the first push
  EXPECT_EQ(queue.expire(start + 3s, 3s), std::vector<uint64_t>{});
  EXPECT_EQ(queue.expire(start + 5s, 3s), std::vector<uint64_t>{2});
  EXPECT_EQ(queue.size(), 0u);
  EXPECT_EQ(queue.busy_for(start + 5s), Clock::duration::zero());
  EXPECT_TRUE(queue.push(4, start + 6s));
  EXPECT_EQ(queue.busy_for(start + 7s), 1s);  // busy again from its new first request
}

TEST(ScaleOut, IsRecommendedWhenTheQueueOutlastsTheWindowOrWouldDrainSlowerThanIt) {
  ScaleOutInputs inputs;
  EXPECT_FALSE(scale_out_advice(inputs, 30s).recommended);
  EXPECT_FALSE(scale_out_advice(inputs, 30s).drain_seconds.has_value());
  inputs.queued = 4;
  inputs.queue_busy_for = 10s;
  EXPECT_FALSE(scale_out_advice(inputs, 30s).recommended);
  inputs.queue_busy_for = 30s;
  EXPECT_TRUE(scale_out_advice(inputs, 30s).recommended);
  // 4 queued x 500 tokens at 100 tokens/s: 20 s to admit them all.
  inputs.queue_busy_for = 1s;
  inputs.average_output_tokens = 500;
  inputs.output_tokens_per_second = 100;
  EXPECT_DOUBLE_EQ(*scale_out_advice(inputs, 30s).drain_seconds, 20.0);
  EXPECT_FALSE(scale_out_advice(inputs, 30s).recommended);
  EXPECT_TRUE(scale_out_advice(inputs, 10s).recommended);
  inputs.queued = 0;
  EXPECT_FALSE(scale_out_advice(inputs, 10s).recommended);
}

TEST(OutputLength, TheUsageWinsElseTheStreamsEventsAreCounted) {
  OutputLengthCounter whole;
  whole.feed(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens": 42,"total_tokens":45}})");
  EXPECT_EQ(whole.tokens(), 42);

  OutputLengthCounter stream;  // markers split between pieces count once
  for (std::string_view piece : {"da", "ta: {\"a\":1}\n\nda", "ta: {\"a\":2}\n\ndata: [DO", "NE]\n\n"})
    stream.feed(piece);
  EXPECT_EQ(stream.tokens(), 2);

  OutputLengthCounter with_usage;
  with_usage.feed("data: {}\n\ndata: {\"usage\":{\"completion_tokens\":9}}\n\ndata: [DONE]\n\n");
  EXPECT_EQ(with_usage.tokens(), 9);
  EXPECT_FALSE(OutputLengthCounter().tokens().has_value());
}

std::string refusal(std::string_view path, const std::string& body) {
  try {
    prompt_text(path, Json::parse(body));
  } catch (const server::ProtocolError& error) {
    EXPECT_EQ(error.status(), 400);
    return error.what();
  }
  return "";
}

TEST(PdRequest, ThePromptTextExtendsWithTheConversation) {
  const std::string first = prompt_text("/v1/chat/completions", Json::parse(
      R"({"messages":[{"role":"system","content":"S"},{"role":"user","content":"Q1"}]})"));
  const std::string next = prompt_text("/v1/chat/completions", Json::parse(
      R"({"messages":[{"role":"system","content":"S"},{"role":"user","content":"Q1"},
          {"role":"assistant","content":"A1"},{"role":"user","content":"Q2"}]})"));
  EXPECT_TRUE(next.starts_with(first));
  EXPECT_EQ(prompt_text("/v1/completions", Json::parse(R"({"prompt":"abc"})")), "abc");
  EXPECT_EQ(prompt_text("/v1/completions", Json::parse(R"({"prompt":["abc"]})")), "abc");
  EXPECT_EQ(prompt_text("/v1/completions", Json::parse(R"({"prompt":[1,2,3]})")), "[1,2,3]");
}

TEST(PdRequest, RequestsTheRouterCannotSplitAreRefused) {
  EXPECT_NE(refusal("/v1/completions", R"({"prompt":["a","b"]})").find("separate requests"), std::string::npos);
  EXPECT_NE(refusal("/v1/completions", R"({"max_tokens":3})").find("prompt"), std::string::npos);
  EXPECT_NE(refusal("/v1/chat/completions", R"({"messages":[]})").find("messages"), std::string::npos);
  EXPECT_NE(refusal("/v1/chat/completions", R"([1])").find("object"), std::string::npos);
  EXPECT_NE(refusal("/v1/completions", R"({"prompt":"a","bootstrap_room":1})").find("router's to set"),
            std::string::npos);
}

TEST(PdRequest, TheBootstrapFieldsAreAddedToTheClientsBody) {
  std::mt19937_64 random(1);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(draw_bootstrap_room(random), uint64_t{1} << 63);
  const Json body = Json::parse(with_bootstrap_fields(Json::parse(R"({"prompt":"x","max_tokens":2})"), "10.0.0.1",
                                                      8998, (uint64_t{1} << 63) - 1));
  EXPECT_EQ(body.find("prompt")->as_string(), "x");
  EXPECT_EQ(body.find("max_tokens")->as_int(), 2);
  EXPECT_EQ(body.find("bootstrap_host")->as_string(), "10.0.0.1");
  EXPECT_EQ(body.find("bootstrap_port")->as_int(), 8998);
  EXPECT_TRUE(body.find("bootstrap_room")->is_int());
  EXPECT_EQ(body.find("bootstrap_room")->as_int(), INT64_MAX);
}

}  // namespace
}  // namespace dsinfer::router
