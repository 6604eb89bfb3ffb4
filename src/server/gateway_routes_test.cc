// What routers read from a worker, end to end on loopback: /server_info, /model_info (and their
// /get_ aliases), /v1/loads, /flush_cache, /health_generate, the refusal of prefill/decode
// disaggregation fields, and the per-request log line. The model is the engine tests' stand-in
// (testing_executor.h) behind a gate, so a test can hold a request in the middle of its run.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/json.h"
#include "core/log.h"
#include "core/strings.h"
#include "runtime/testing_executor.h"
#include "server/openai_server.h"
#include "server/request_log.h"
#include "server/server_test_util.h"

namespace dsinfer::server {
namespace {

constexpr int64_t kPages = 64;

// The stand-in model, whose steps can be held at a gate (or made to throw).
class GatedExecutor final : public runtime::StepExecutor {
 public:
  explicit GatedExecutor(int64_t vocab) : inner_(vocab, kPages, 2048, {}) {}

  backend::SampledTokens run(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) override {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!open_ && allowed_ > 0) {
        --allowed_;
      } else if (!open_) {
        ++held_;
        changed_.notify_all();
        changed_.wait(lock, [&] { return open_; });
        --held_;
      }
      if (fail_) throw std::runtime_error("the test's device is broken");
    }
    return inner_.run(batch, sampling);
  }
  int64_t vocab_size() const override { return inner_.vocab_size(); }
  int64_t max_model_len() const override { return inner_.max_model_len(); }
  int64_t num_pages() const override { return inner_.num_pages(); }
  std::vector<int32_t> eos_token_ids() const override { return {}; }

  // Lets `steps` more steps run, then holds the next one at the gate until open().
  void hold_after(int64_t steps) {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = false;
    allowed_ = steps;
  }
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }
  void set_failing(bool fail) {
    std::lock_guard<std::mutex> lock(mutex_);
    fail_ = fail;
  }
  // Waits until a step is held at the gate. Stats are published at the end of each step, so what
  // the server reports now is the state after the steps that ran.
  void wait_until_held() {
    std::unique_lock<std::mutex> lock(mutex_);
    ASSERT_TRUE(changed_.wait_for(lock, std::chrono::seconds(10), [&] { return held_ > 0; }));
  }

 private:
  runtime::HashingExecutor inner_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = true;
  int64_t allowed_ = 0;
  int64_t held_ = 0;
  bool fail_ = false;
};

// The first element of a JSON array, as a value (Json's operator[] is for values one may change).
Json first(const Json& array) { return array.at(0); }

ServerOptions gateway_options() {
  ServerOptions options;
  options.served_model_name = "tiny";
  options.version = "1.2.3";
  options.commit = "abc1234";
  options.gateway.model_path = "/models/dsv3-tiny";
  options.gateway.model_type = "deepseek_v3";
  options.gateway.architectures = {"DeepseekV3ForCausalLM"};
  return options;
}

class Worker {
 public:
  explicit Worker(ServerOptions options = gateway_options())
      : tokenizer_(tokenizer::Tokenizer::from_dir(bundled_model_dir())),
        executor_(new GatedExecutor(tokenizer_.vocab_size())),
        engine_(std::unique_ptr<runtime::StepExecutor>(executor_), tokenizer_, engine_config()) {
    options.http.port = 0;
    server_ = std::make_unique<OpenAIServer>(options);
    server_->start();
    server_->attach({&engine_, &tokenizer_, nullptr});
  }
  ~Worker() {
    executor_->open();  // nothing may stay held at the gate
    server_->stop();
  }

  HttpClientResponse fetch(std::string method, std::string target, std::string body = "", Headers headers = {}) {
    HttpCall call = json_call(server_->port(), std::move(method), std::move(target), std::move(body), 30);
    for (auto& header : headers) call.headers.push_back(std::move(header));
    return client_.fetch(std::move(call));
  }
  Json get_json(const std::string& target) {
    HttpClientResponse response = fetch("GET", target);
    EXPECT_EQ(response.status, 200) << target << ": " << response.body;
    return Json::parse(response.body);
  }
  // Starts a call without waiting for it; its answer lands in the returned slot (status 0 until then).
  std::shared_ptr<HttpClientResponse> start(std::string method, std::string target, std::string body = "") {
    auto answer = std::make_shared<HttpClientResponse>();
    auto done = std::make_shared<std::atomic<bool>>(false);
    HttpCall call = json_call(server_->port(), std::move(method), std::move(target), std::move(body), 30);
    call.on_done = [answer, done](const HttpClientResponse& response) {
      *answer = response;
      done->store(true);
    };
    client_.start(std::move(call));
    pending_.push_back(done);
    return answer;
  }
  // Waits for every call start() began.
  void wait_for_started_calls() {
    for (const auto& done : pending_)
      for (int i = 0; i < 10000 && !done->load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void wait_until_idle() {
    for (int i = 0; i < 5000 && (engine_.stats().running || engine_.stats().waiting); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  runtime::Engine& engine() { return engine_; }
  GatedExecutor& executor() { return *executor_; }
  const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  static runtime::EngineConfig engine_config() {
    runtime::EngineConfig config;
    config.max_num_seqs = 8;
    config.max_num_batched_tokens = 512;
    return config;
  }

  tokenizer::Tokenizer tokenizer_;
  GatedExecutor* executor_;  // owned by the engine
  runtime::Engine engine_;
  HttpClient client_;
  std::vector<std::shared_ptr<std::atomic<bool>>> pending_;
  std::unique_ptr<OpenAIServer> server_;
};

// A completion of `max_tokens` tokens on a prompt of `prompt_tokens` token ids.
std::string completion_body(int prompt_tokens, int max_tokens, std::string_view extra = "") {
  std::string ids;
  for (int i = 0; i < prompt_tokens; ++i) ids += str_cat(i ? "," : "", 100 + i);
  return str_cat(R"({"model": "tiny", "prompt": [)", ids, R"(], "max_tokens": )", max_tokens,
                 R"(, "ignore_eos": true, "temperature": 0)", extra, "}");
}

TEST(GatewayRoutes, ServerInfoReportsTheConfigurationUnderSglangsNamesAtBothPaths) {
  Worker worker;
  for (const char* path : {"/server_info", "/get_server_info"}) {
    Json info = worker.get_json(path);
    EXPECT_EQ(info["model_path"].as_string(), "/models/dsv3-tiny") << path;
    EXPECT_EQ(info["served_model_name"].as_string(), "tiny");
    EXPECT_EQ(info["context_length"].as_int(), worker.engine().max_model_len());
    EXPECT_EQ(info["max_running_requests"].as_int(), 8);
    EXPECT_EQ(info["chunked_prefill_size"].as_int(), 512);
    EXPECT_EQ(info["max_total_num_tokens"].as_int(), kPages * 64);
    EXPECT_EQ(info["page_size"].as_int(), 64);
    EXPECT_FALSE(info["disable_radix_cache"].as_bool());
    EXPECT_FALSE(info["enable_hierarchical_cache"].as_bool());
    EXPECT_EQ(info["disaggregation_mode"].as_string(), "null");
    EXPECT_EQ(info["version"].as_string(), "1.2.3");
    ASSERT_EQ(info["internal_states"].size(), 1u);
    EXPECT_EQ(first(info["internal_states"])["num_running_reqs"].as_int(), 0);
  }
}

// The host KV tier (issue 14) is SGLang's hierarchical cache.
TEST(GatewayRoutes, ServerInfoReportsTheHostKvTierAsSglangsHierarchicalCache) {
  WorkerIdentity identity;
  runtime::EngineConfig config;
  config.host_kv_cache.bytes = int64_t{1} << 30;
  EXPECT_TRUE(server_info_json(identity, config, runtime::EngineStats{}, 1024, 0.0)["enable_hierarchical_cache"].as_bool());
}

// Speculative decoding in SGLang's fields and vLLM's speculative_config; null when it is off (the
// end-to-end worker above serves without it).
TEST(GatewayRoutes, ServerInfoReportsSpeculativeDecodingUnderSglangsAndVllmsNames) {
  WorkerIdentity identity;
  identity.served_model_name = "tiny";
  runtime::EngineConfig config;
  Json off = server_info_json(identity, config, runtime::EngineStats{}, 1024, 0.0);
  for (const char* field : {"speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                            "speculative_num_draft_tokens", "speculative_config"}) {
    ASSERT_NE(off.find(field), nullptr) << field;
    EXPECT_TRUE(off[field].is_null()) << field;
  }
  config.speculative.num_tokens = 2;
  config.speculative.relaxed = true;
  config.speculative.relaxed_topk = 4;
  Json on = server_info_json(identity, config, runtime::EngineStats{}, 1024, 0.0);
  EXPECT_EQ(on["speculative_algorithm"].as_string(), "EAGLE");
  EXPECT_EQ(on["speculative_num_steps"].as_int(), 2);
  EXPECT_EQ(on["speculative_eagle_topk"].as_int(), 1);
  EXPECT_EQ(on["speculative_num_draft_tokens"].as_int(), 3);
  Json& speculative = on["speculative_config"];
  EXPECT_EQ(speculative["method"].as_string(), "mtp");
  EXPECT_EQ(speculative["num_speculative_tokens"].as_int(), 2);
  EXPECT_EQ(speculative["mode"].as_string(), "eagle");
  EXPECT_TRUE(speculative["use_relaxed_acceptance_for_thinking"].as_bool());
  EXPECT_EQ(speculative["relaxed_topk"].as_int(), 4);
}

TEST(GatewayRoutes, ModelInfoNamesTheModelAtBothPaths) {
  Worker worker;
  for (const char* path : {"/model_info", "/get_model_info"}) {
    Json info = worker.get_json(path);
    EXPECT_EQ(info["model_path"].as_string(), "/models/dsv3-tiny") << path;
    EXPECT_EQ(info["tokenizer_path"].as_string(), "/models/dsv3-tiny");
    EXPECT_TRUE(info["is_generation"].as_bool());
    EXPECT_EQ(info["model_type"].as_string(), "deepseek_v3");
    EXPECT_EQ(info["architectures"].at(0).as_string(), "DeepseekV3ForCausalLM");
  }
  EXPECT_EQ(worker.fetch("POST", "/model_info").status, 405);
}

TEST(GatewayRoutes, LoadsCountTheRunningRequestAndItsPages) {
  Worker worker;
  Json idle = worker.get_json("/v1/loads");
  EXPECT_EQ(idle["dp_rank_count"].as_int(), 1);
  EXPECT_EQ(idle["version"].as_string(), "1.2.3");
  EXPECT_EQ(idle["timestamp"].as_string().size(), 32u) << idle["timestamp"].as_string();  // ISO 8601, UTC
  EXPECT_EQ(first(idle["loads"])["num_running_reqs"].as_int(), 0);
  EXPECT_EQ(first(idle["loads"])["num_used_tokens"].as_int(), 0);

  worker.executor().hold_after(1);  // the prefill runs; the first decode step waits
  auto completion = worker.start("POST", "/v1/completions", completion_body(100, 50));
  worker.executor().wait_until_held();
  Json busy = worker.get_json("/v1/loads");
  Json load = first(busy["loads"]);
  EXPECT_EQ(load["num_running_reqs"].as_int(), 1);
  EXPECT_EQ(load["num_waiting_reqs"].as_int(), 0);
  EXPECT_EQ(load["num_total_reqs"].as_int(), 1);
  EXPECT_EQ(load["num_used_tokens"].as_int(), 2 * 64);  // the 100 prompt tokens' 2 pages
  EXPECT_EQ(load["max_total_num_tokens"].as_int(), kPages * 64);
  EXPECT_DOUBLE_EQ(load["token_usage"].as_double(), 2.0 / kPages);
  EXPECT_DOUBLE_EQ(load["utilization"].as_double(), 1.0 / 8);
  EXPECT_EQ(busy["aggregate"]["total_running_reqs"].as_int(), 1);
  EXPECT_EQ(first(worker.get_json("/server_info")["internal_states"])["num_running_reqs"].as_int(), 1);
  worker.executor().open();
  worker.wait_for_started_calls();
  EXPECT_EQ(completion->status, 200) << completion->body;
}

TEST(GatewayRoutes, LoadsRefuseAQueryThisServerCannotAnswer) {
  Worker worker;
  EXPECT_EQ(worker.fetch("GET", "/v1/loads?dp_rank=0&include=core,memory&format=json").status, 200);
  for (const char* target : {"/v1/loads?dp_rank=1", "/v1/loads?format=prometheus", "/v1/loads?include=bogus"}) {
    HttpClientResponse response = worker.fetch("GET", target);
    EXPECT_EQ(response.status, 400) << target << ": " << response.body;
  }
  EXPECT_NE(worker.fetch("GET", "/v1/loads?dp_rank=1").body.find("issue 11"), std::string::npos);
}

TEST(GatewayRoutes, FlushCacheEmptiesThePrefixCacheOnlyWhenNothingRuns) {
  Worker worker;
  ASSERT_EQ(worker.fetch("POST", "/v1/completions", completion_body(200, 2)).status, 200);
  worker.wait_until_idle();
  ASSERT_GT(worker.engine().stats().cached_pages, 0);  // the prompt's 3 full pages

  // A flush asked for while a request runs (held in its first decode step) is refused.
  worker.executor().hold_after(1);
  auto running = worker.start("POST", "/v1/completions", completion_body(10, 1000));
  worker.executor().wait_until_held();
  auto refused = worker.start("POST", "/flush_cache");
  worker.executor().open();
  worker.wait_for_started_calls();
  EXPECT_EQ(running->status, 200) << running->body;
  EXPECT_EQ(refused->status, 400) << refused->body;
  EXPECT_NE(refused->body.find("The cache was not flushed"), std::string::npos) << refused->body;
  worker.wait_until_idle();
  EXPECT_GT(worker.engine().stats().cached_pages, 0);

  HttpClientResponse flushed = worker.fetch("POST", "/flush_cache");
  EXPECT_EQ(flushed.status, 200) << flushed.body;
  EXPECT_EQ(flushed.body, "Cache flushed.\n");
  EXPECT_EQ(worker.engine().stats().cached_pages, 0);
  EXPECT_EQ(worker.engine().stats().free_pages, kPages);
  EXPECT_EQ(worker.fetch("GET", "/flush_cache").status, 405);
}

TEST(GatewayRoutes, HealthGenerateAnswers200OnceATokenIsGenerated) {
  Worker worker;
  HttpClientResponse response = worker.fetch("GET", "/health_generate");
  EXPECT_EQ(response.status, 200) << response.body;
  worker.wait_until_idle();
  EXPECT_EQ(worker.engine().metrics().generation_tokens.load(), 1u);
}

TEST(GatewayRoutes, HealthGenerateAnswers503WhenTheStepFails) {
  Worker worker;
  worker.executor().set_failing(true);
  HttpClientResponse response = worker.fetch("GET", "/health_generate");
  EXPECT_EQ(response.status, 503) << response.body;
  EXPECT_NE(response.body.find("the test's device is broken"), std::string::npos) << response.body;
}

TEST(GatewayRoutes, HealthGenerateAnswers503AndAbortsTheProbeAfterItsTimeout) {
  ServerOptions options = gateway_options();
  options.gateway.health_generate_timeout = std::chrono::milliseconds(100);
  Worker worker(options);
  worker.executor().hold_after(0);
  const auto start = std::chrono::steady_clock::now();
  HttpClientResponse response = worker.fetch("GET", "/health_generate");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(response.status, 503) << response.body;
  EXPECT_NE(response.body.find("did not finish within 100 ms"), std::string::npos) << response.body;
  EXPECT_LT(seconds, 5.0);
  worker.executor().open();
  worker.wait_until_idle();
  EXPECT_EQ(worker.engine().stats().running + worker.engine().stats().waiting, 0);
}

TEST(GatewayRoutes, DisaggregationFieldsAreRefusedByAServerOfBothPhases) {
  Worker worker;
  const std::string chat = R"({"model": "tiny", "messages": [{"role": "user", "content": "hi"}])";  // no closing brace
  for (const char* field : {R"("bootstrap_host": "10.0.0.1")", R"("bootstrap_port": 8998)",
                            R"("bootstrap_room": 12345)", R"("kv_transfer_params": {"do_remote_decode": true})"}) {
    for (const auto& [target, body] : {std::pair{"/v1/completions", completion_body(4, 1, str_cat(", ", field))},
                                       std::pair{"/v1/chat/completions", str_cat(chat, ", ", field, "}")}}) {
      HttpClientResponse response = worker.fetch("POST", target, body);
      EXPECT_EQ(response.status, 400) << target << " " << field << ": " << response.body;
      Json error = Json::parse(response.body)["error"];
      const bool vllm = std::string(field).find("kv_transfer_params") != std::string::npos;
      EXPECT_NE(error["message"].as_string().find(vllm ? "vLLM's disaggregation protocol" : "runs both phases"),
                std::string::npos)
          << error.dump();
      EXPECT_NE(std::string(field).find(error["param"].as_string()), std::string::npos) << error.dump();
    }
  }
  // Null reads as absent, as for every other field.
  EXPECT_EQ(worker.fetch("POST", "/v1/completions", completion_body(4, 1, R"(, "bootstrap_room": null)")).status, 200);
}

TEST(GatewayRoutes, AllButHealthGenerateNeedTheApiKey) {
  ServerOptions options = gateway_options();
  options.api_key = "secret";
  Worker worker(options);
  for (const auto& [method, path] : {std::pair{"GET", "/server_info"}, std::pair{"GET", "/get_model_info"},
                                     std::pair{"GET", "/v1/loads"}, std::pair{"POST", "/flush_cache"}}) {
    EXPECT_EQ(worker.fetch(method, path).status, 401) << path;
    EXPECT_EQ(worker.fetch(method, path, "", {{"Authorization", "Bearer secret"}}).status, 200) << path;
  }
  EXPECT_EQ(worker.fetch("GET", "/health_generate").status, 200);
}

// /metrics, after one request of 70 prompt and 5 output tokens: the engine records vLLM's
// per-request histograms, and the server adds the cache config and the process.
TEST(GatewayRoutes, MetricsCarryTheRequestHistogramsTheCacheConfigAndTheProcess) {
  Worker worker;
  ASSERT_EQ(worker.fetch("POST", "/v1/completions", completion_body(70, 5)).status, 200);
  worker.wait_until_idle();
  HttpClientResponse response = worker.fetch("GET", "/metrics");
  ASSERT_EQ(response.status, 200);
  const std::string& text = response.body;
  const std::string m = "{model_name=\"tiny\"}";
  for (const std::string& line :
       {"vllm:request_prompt_tokens_sum" + m + " 70.0\n", "vllm:request_generation_tokens_sum" + m + " 5.0\n",
        "vllm:request_prefill_time_seconds_count" + m + " 1.0\n",
        "vllm:request_decode_time_seconds_count" + m + " 1.0\n",
        // Its observations need the engine's step hook (runtime::Metrics::iteration_tokens), not here yet.
        std::string("# TYPE vllm:iteration_tokens_total histogram\n"),
        std::string("vllm:cache_config_info{model_name=\"tiny\",block_size=\"64\",cache_dtype=\"auto\","
                    "enable_prefix_caching=\"True\",num_gpu_blocks=\"64\"} 1.0\n"),
        std::string("# TYPE process_resident_memory_bytes gauge\n"), std::string("\nprocess_open_fds "),
        std::string("\nprocess_cpu_seconds_total "), std::string("\nprocess_start_time_seconds ")})
    EXPECT_NE(text.find(line), std::string::npos) << line;
}

// The log line of each finished request, and --disable-log-requests.
std::string stderr_of_one_completion(ServerOptions options, int prompt_tokens, int max_tokens) {
  const LogLevel level = log_level();
  set_log_level(LogLevel::kInfo);
  Worker worker(options);
  testing::internal::CaptureStderr();
  HttpClientResponse response = worker.fetch("POST", "/v1/completions", completion_body(prompt_tokens, max_tokens));
  std::string captured = testing::internal::GetCapturedStderr();
  set_log_level(level);
  EXPECT_EQ(response.status, 200) << response.body;
  return captured;
}

TEST(RequestLog, EachFinishedRequestLogsOneLine) {
  std::string captured = stderr_of_one_completion(gateway_options(), 5, 3);
  const size_t at = captured.find("request cmpl-");
  ASSERT_NE(at, std::string::npos) << captured;
  const std::string line = captured.substr(at, captured.find('\n', at) - at);
  EXPECT_NE(line.find("finish_reason=length prompt_tokens=5 output_tokens=3 ttft_ms="), std::string::npos) << line;
  EXPECT_NE(line.find(" total_ms="), std::string::npos) << line;
  EXPECT_EQ(captured.find("request cmpl-", at + 1), std::string::npos) << "one line per request";
}

TEST(RequestLog, DisableLogRequestsLogsNoLine) {
  ServerOptions options = gateway_options();
  options.log_requests = false;
  std::string captured = stderr_of_one_completion(options, 5, 3);
  EXPECT_EQ(captured.find("request cmpl-"), std::string::npos) << captured;
}

TEST(RequestLog, TheLineCarriesTheRecordsFigures) {
  EXPECT_EQ(request_log_line({"chatcmpl-1", 12, 34, 5.04, 81.0, runtime::FinishReason::kStop}),
            "request chatcmpl-1: finish_reason=stop prompt_tokens=12 output_tokens=34 ttft_ms=5.0 total_ms=81.0");
  EXPECT_EQ(request_log_line({"cmpl-2", 7, 0, -1.0, 2.25, runtime::FinishReason::kAbort}),
            "request cmpl-2: finish_reason=abort prompt_tokens=7 output_tokens=0 ttft_ms=none total_ms=2.2");
}

TEST(RequestLog, TheWrappedSinkLogsOnceAtTheEndAndForwardsEveryOutput) {
  std::vector<std::string> lines;
  int forwarded = 0;
  runtime::StreamSink sink =
      with_request_log([&](const runtime::StreamOutput&) { ++forwarded; }, "cmpl-9",
                       [&](const std::string& line) { lines.push_back(line); });
  runtime::StreamOutput first;
  first.token_ids = {5};
  sink(first);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(lines.empty());
  runtime::StreamOutput last;
  last.token_ids = {6};
  last.finished = true;
  last.finish_reason = runtime::FinishReason::kLength;
  last.prompt_tokens = 3;
  last.completion_tokens = 2;
  sink(last);
  EXPECT_EQ(forwarded, 2);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("request cmpl-9: finish_reason=length prompt_tokens=3 output_tokens=2 ttft_ms=", 0), 0u)
      << lines[0];
  // The first token came at once, the end 20 ms later.
  double ttft = 0, total = 0;
  ASSERT_EQ(std::sscanf(lines[0].c_str() + lines[0].find("ttft_ms="), "ttft_ms=%lf total_ms=%lf", &ttft, &total), 2);
  EXPECT_LT(ttft, 15.0);
  EXPECT_GE(total, 20.0);
}

}  // namespace
}  // namespace dsinfer::server
