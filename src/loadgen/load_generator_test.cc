// The load generator end to end on loopback, against a fake OpenAI server made of HttpServer that
// streams a fixed number of chunks with delays: concurrency limits, arrival times, token counts,
// and the ways a request fails.
#include "loadgen/load_generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "http/http.h"
#include "loadgen/spec_decode_stats.h"

namespace dsinfer::loadgen {
namespace {

using namespace std::chrono_literals;

// kSpecDecodeMetrics streams as kStream and answers GET /metrics with spec_decode counters that
// grow with the tokens streamed (without it, /metrics is a 404).
enum class Behaviour { kStream, kNoDone, kRejectPrompt, kSpecDecodeMetrics };

// Streams max_tokens chunks of one word each, `gap` apart, then a finish chunk, the usage chunk
// and [DONE], as OpenAI does. Chat answers start with the role chunk at once.
class FakeOpenAI {
 public:
  explicit FakeOpenAI(std::chrono::milliseconds gap, Behaviour behaviour = Behaviour::kStream)
      : gap_(gap),
        behaviour_(behaviour),
        server_(options(), [this](const server::HttpRequest& request, auto responder) {
          handle(request, std::move(responder));
        }) {
    server_.start();
  }
  ~FakeOpenAI() {
    std::lock_guard lock(mutex_);
    for (std::thread& stream : streams_) stream.join();
  }

  Target target(std::string endpoint = "/v1/completions") const {
    Target target;
    target.port = server_.port();
    target.endpoint = std::move(endpoint);
    target.model = "fake-model";
    return target;
  }
  int most_in_flight() const { return most_in_flight_; }

 private:
  static server::HttpServerOptions options() {
    server::HttpServerOptions options;
    options.port = 0;
    return options;
  }

  void handle(const server::HttpRequest& request, std::shared_ptr<server::HttpResponder> responder) {
    if (request.method == "GET" && request.path() == "/v1/models") {
      return responder->respond(200, "application/json", R"({"object":"list","data":[{"id":"fake-model"}]})");
    }
    if (request.method == "GET" && request.path() == "/metrics") {
      if (behaviour_ != Behaviour::kSpecDecodeMetrics) return responder->respond(404, "text/plain", "not found");
      return responder->respond(200, "text/plain; version=0.0.4", spec_decode_metrics());
    }
    if (behaviour_ == Behaviour::kRejectPrompt) {
      return responder->respond(400, "application/json", R"({"error":{"message":"bad prompt","code":400}})");
    }
    const Json body = Json::parse(request.body);
    const bool chat = request.path() == "/v1/chat/completions";
    const int64_t prompt_tokens = chat ? 5 : static_cast<int64_t>(body.find("prompt")->size());
    const int64_t max_tokens = body.find("max_tokens")->as_int();
    most_in_flight_ = std::max(most_in_flight_.load(), ++in_flight_);
    std::lock_guard lock(mutex_);
    streams_.emplace_back([=, this] { stream(responder, chat, prompt_tokens, max_tokens); });
  }

  void stream(std::shared_ptr<server::HttpResponder> responder, bool chat, int64_t prompt_tokens, int64_t tokens) {
    responder->start_stream(200, "text/event-stream");
    if (chat) responder->send_chunk(chunk(chat, R"("role":"assistant","content":"")"));
    for (int64_t i = 0; i < tokens; ++i) {
      std::this_thread::sleep_for(gap_);
      responder->send_chunk(chunk(chat, chat ? R"("content":"word ")" : R"("text":"word ")"));
    }
    std::string end = chunk(chat, chat ? "" : R"("text":"")");
    end += str_cat("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":", prompt_tokens,
                   ",\"completion_tokens\":", tokens, ",\"total_tokens\":", prompt_tokens + tokens, "}}\n\n");
    if (behaviour_ != Behaviour::kNoDone) end += "data: [DONE]\n\n";
    tokens_streamed_ += tokens;
    --in_flight_;  // before the end goes out, so that a client's next request never overlaps it here
    responder->send_chunk(end);
    responder->finish_stream();
  }

  // A server drafting 2 tokens a step for every token it streams, accepting 3 of 4 at the first
  // position and 1 of 4 at the second, after 40 drafts of its own before any test request.
  std::string spec_decode_metrics() const {
    const int64_t drafts = 40 + tokens_streamed_;
    const std::string labels = "{model_name=\"fake-model\"";
    const std::string per_position = "vllm:spec_decode_num_accepted_tokens_per_pos_total" + labels;
    return str_cat("# TYPE vllm:spec_decode_num_drafts_total counter\n",
                   "vllm:spec_decode_num_drafts_total", labels, "} ", drafts, "\n",
                   "vllm:spec_decode_num_draft_tokens_total", labels, "} ", 2 * drafts, "\n",
                   "vllm:spec_decode_num_accepted_tokens_total", labels, "} ", drafts, "\n",
                   per_position, ",position=\"0\"} ", drafts * 3 / 4, "\n",
                   per_position, ",position=\"1\"} ", drafts / 4, "\n");
  }

  static std::string chunk(bool chat, std::string_view content) {
    return chat ? str_cat("data: {\"choices\":[{\"index\":0,\"delta\":{", content, "},\"finish_reason\":null}]}\n\n")
                : str_cat("data: {\"choices\":[{\"index\":0,", content, ",\"finish_reason\":null}]}\n\n");
  }

  const std::chrono::milliseconds gap_;
  const Behaviour behaviour_;
  std::atomic<int> in_flight_{0};
  std::atomic<int> most_in_flight_{0};
  std::atomic<int64_t> tokens_streamed_{0};
  std::mutex mutex_;
  std::vector<std::thread> streams_;
  server::HttpServer server_;  // last: built after what its handler uses, destroyed first
};

std::vector<Prompt> prompts(int count, int64_t input_len, int64_t output_len, PromptFormat format) {
  WorkloadOptions workload;
  workload.num_prompts = count;
  workload.input_len = input_len;
  workload.output_len = output_len;
  return make_prompts(workload, format, PromptVocabulary{1000, nullptr});
}

LoadOptions quiet(int64_t max_concurrency = 0) {
  LoadOptions options;
  options.max_concurrency = max_concurrency;
  options.progress = false;
  options.request_timeout_s = 30;
  return options;
}

TEST(LoadGeneratorTest, TwentyRequestsAtConcurrencyFour) {
  FakeOpenAI server(5ms);
  const LoadResult result = run_load(server.target(), prompts(20, 16, 8, PromptFormat::kTokenIds), quiet(4));
  ASSERT_EQ(result.records.size(), 20u);
  for (const RequestRecord& record : result.records) {
    ASSERT_TRUE(record.success) << record.error;
    EXPECT_EQ(record.prompt_tokens, 16);
    EXPECT_EQ(record.output_tokens, 8);
    EXPECT_EQ(record.itl_s.size(), 7u);  // the empty finish chunk is no token
    EXPECT_GE(record.ttft_s, 0.005);
    EXPECT_GE(record.e2e_s, 0.040);
    EXPECT_GE(*tpot_s(record), 0.004);
  }
  EXPECT_LE(server.most_in_flight(), 4);
  EXPECT_GE(server.most_in_flight(), 2);
  EXPECT_GE(result.duration_s, 20 / 4 * 0.040);  // five waves of 8 gaps each at least

  const RunMetrics metrics = compute_metrics(result.records, result.duration_s, {});
  EXPECT_EQ(metrics.completed, 20);
  EXPECT_EQ(metrics.total_output_tokens, 160);
  EXPECT_EQ(metrics.total_input_tokens, 320);
}

TEST(LoadGeneratorTest, RequestsLeaveAtTheirArrivalTimes) {
  FakeOpenAI server(1ms);
  LoadOptions options = quiet();
  options.request_rate = 40;
  options.seed = 3;
  const LoadResult result = run_load(server.target(), prompts(8, 4, 2, PromptFormat::kTokenIds), options);
  const std::vector<double> arrivals = arrival_times(8, 40, 1, 3);
  for (size_t i = 0; i < arrivals.size(); ++i) {
    ASSERT_TRUE(result.records[i].success) << result.records[i].error;
    EXPECT_GE(result.records[i].start_s, arrivals[i]);
    EXPECT_LT(result.records[i].start_s, arrivals[i] + 0.05);
  }
  EXPECT_GE(result.duration_s, arrivals.back());
}

TEST(LoadGeneratorTest, ChatTimesTheFirstContentNotTheRoleChunk) {
  FakeOpenAI server(20ms);
  const LoadResult result =
      run_load(server.target("/v1/chat/completions"), prompts(3, 10, 4, PromptFormat::kText), quiet());
  for (const RequestRecord& record : result.records) {
    ASSERT_TRUE(record.success) << record.error;
    EXPECT_GE(record.ttft_s, 0.020);
    EXPECT_EQ(record.output_tokens, 4);
    EXPECT_EQ(record.prompt_tokens, 5);  // from usage, not the word count
  }
}

TEST(LoadGeneratorTest, StreamWithoutDoneFails) {
  FakeOpenAI server(1ms, Behaviour::kNoDone);
  const LoadResult result = run_load(server.target(), prompts(2, 4, 3, PromptFormat::kTokenIds), quiet());
  for (const RequestRecord& record : result.records) {
    EXPECT_FALSE(record.success);
    EXPECT_EQ(record.error, "the stream ended without data: [DONE]");
  }
}

TEST(LoadGeneratorTest, ErrorStatusFailsWithTheServersMessage) {
  FakeOpenAI server(1ms, Behaviour::kRejectPrompt);
  const LoadResult result = run_load(server.target(), prompts(2, 4, 3, PromptFormat::kTokenIds), quiet());
  for (const RequestRecord& record : result.records) {
    EXPECT_FALSE(record.success);
    EXPECT_EQ(record.error, "HTTP 400: bad prompt");
  }
}

// bench serve's reading of speculative decoding: the counters before and after a run, through the
// server's /metrics.
TEST(LoadGeneratorTest, SpecDecodeFiguresComeFromTheServersMetricsAroundTheRun) {
  FakeOpenAI server(1ms, Behaviour::kSpecDecodeMetrics);
  const std::optional<SpecDecodeCounters> before = parse_spec_decode_counters(*fetch_metrics_text(server.target()));
  const LoadResult result = run_load(server.target(), prompts(6, 4, 8, PromptFormat::kTokenIds), quiet(3));
  for (const RequestRecord& record : result.records) ASSERT_TRUE(record.success) << record.error;
  const std::optional<SpecDecodeStats> stats =
      spec_decode_stats(before, parse_spec_decode_counters(*fetch_metrics_text(server.target())));
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->drafts, 48);  // the run's 6 x 8 tokens, not the 40 before it
  EXPECT_EQ(stats->draft_tokens, 96);
  EXPECT_DOUBLE_EQ(stats->mean_acceptance_length, 2.0);
  EXPECT_DOUBLE_EQ(stats->acceptance_rate, 0.5);
  ASSERT_EQ(stats->acceptance_rate_per_position.size(), 2u);
  EXPECT_DOUBLE_EQ(stats->acceptance_rate_per_position[0], 0.75);
  EXPECT_DOUBLE_EQ(stats->acceptance_rate_per_position[1], 0.25);
}

TEST(LoadGeneratorTest, AServerWithoutMetricsGivesNoSpecDecodeFigures) {
  FakeOpenAI server(1ms);
  EXPECT_FALSE(fetch_metrics_text(server.target()).has_value());  // its /metrics is a 404
  Target gone;
  {
    FakeOpenAI closed(1ms);
    gone = closed.target();
  }
  EXPECT_FALSE(fetch_metrics_text(gone).has_value());
}

TEST(LoadGeneratorTest, NoServerFailsEveryRequest) {
  Target target;
  {
    FakeOpenAI gone(1ms);
    target = gone.target();
  }
  const LoadResult result = run_load(target, prompts(3, 4, 3, PromptFormat::kTokenIds), quiet());
  for (const RequestRecord& record : result.records) {
    EXPECT_FALSE(record.success);
    EXPECT_NE(record.error.find("cannot connect"), std::string::npos) << record.error;
  }
}

TEST(LoadGeneratorTest, FirstServedModel) {
  FakeOpenAI server(1ms);
  EXPECT_EQ(first_served_model(server.target()), "fake-model");
  Target wrong = server.target();
  wrong.base_path = "/nothing";
  EXPECT_THROW(first_served_model(wrong), Error);
}

TEST(LoadGeneratorTest, RequestBodies) {
  Prompt prompt;
  prompt.token_ids = {5, 6, 7};
  prompt.output_len = 4;
  Target target;
  target.model = "m";
  Json body = Json::parse(request_body(target, prompt, /*ignore_eos=*/true));
  EXPECT_EQ(body.find("model")->as_string(), "m");
  EXPECT_EQ(body.find("prompt")->dump(), "[5,6,7]");
  EXPECT_EQ(body.find("max_tokens")->as_int(), 4);
  EXPECT_EQ(body.find("min_tokens")->as_int(), 4);
  EXPECT_TRUE(body.find("ignore_eos")->as_bool());
  EXPECT_TRUE(body.find("stream")->as_bool());
  EXPECT_TRUE(body.find("stream_options")->find("include_usage")->as_bool());

  target.endpoint = "/v1/chat/completions";
  prompt.text = "the of and";
  body = Json::parse(request_body(target, prompt, /*ignore_eos=*/false));
  EXPECT_EQ(body.find("messages")->dump(), R"([{"role":"user","content":"the of and"}])");
  EXPECT_EQ(body.find("prompt"), nullptr);
  EXPECT_EQ(body.find("ignore_eos"), nullptr);
  EXPECT_EQ(body.find("min_tokens"), nullptr);
}

}  // namespace
}  // namespace dsinfer::loadgen
