// The OpenAI server end to end on loopback, over a real (tiny, random) DeepSeek-V3 fixture model:
// chat and completions, streamed and not; concurrency against one-at-a-time output; the prefix
// cache; preemption; cancelled and disconnected clients; every bad-input case. After each
// scenario every KV page is back in the pool (or held only by the prefix cache). Tool calls:
// server_tool_calls_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include "backend/make_backend.h"
#include "backend/test_device.h"
#include "core/json.h"
#include "core/source_path.h"
#include "core/strings.h"
#include "runtime/step_error.h"
#include "http/http_test_util.h"
#include "server/openai_server.h"
#include "server/server_test_util.h"
#include "tokenizer/chat/chat_template.h"

namespace dsinfer::server {
namespace {

std::string fixture_dir() { return source_path("tests/fixtures/models/v3-tiny"); }

ServerOptions tiny_options() {
  ServerOptions options;
  options.served_model_name = "tiny";
  return options;
}

chat::ChatTemplate chat_template_of(const std::string& dir) {
  return chat::ChatTemplate::from_tokenizer_config(Json::parse(read_file(dir + "/tokenizer_config.json")), dir);
}

// A server over the fixture model; each test makes its own with the engine settings it needs.
class Served {
 public:
  explicit Served(runtime::EngineConfig config = {}, ServerOptions options = tiny_options(),
                  std::string dir = fixture_dir())
      : dir_(std::move(dir)),
        backend_(backend::make_backend(backend::test_device())),
        model_(model::DeepseekModel::load(dir_, *backend_)),
        tokenizer_(tokenizer::Tokenizer::from_dir(dir_)),
        chat_template_(chat_template_of(dir_)),
        engine_(*model_, tokenizer_, config) {
    options.http.port = 0;
    server_ = std::make_unique<OpenAIServer>(options);
    server_->start();
    server_->attach({&engine_, &tokenizer_, &chat_template_});
  }

  uint16_t port() const { return server_->port(); }

  HttpCall call(std::string method, std::string target, std::string body = "") const {
    return json_call(server_->port(), std::move(method), std::move(target), std::move(body), 120);
  }
  HttpClientResponse fetch(std::string method, std::string target, std::string body = "") {
    return client_.fetch(call(std::move(method), std::move(target), std::move(body)));
  }
  // Posts every body to `target` at once and waits for all the answers, in the bodies' order.
  std::vector<HttpClientResponse> post_all(const std::string& target, const std::vector<std::string>& bodies) {
    std::vector<HttpClientResponse> responses(bodies.size());
    std::mutex mutex;
    std::condition_variable all_done;
    size_t done = 0;
    for (size_t i = 0; i < bodies.size(); ++i) {
      HttpCall posted = call("POST", target, bodies[i]);
      posted.on_done = [&, i](const HttpClientResponse& response) {
        std::lock_guard<std::mutex> lock(mutex);
        responses[i] = response;
        ++done;
        all_done.notify_all();
      };
      client_.start(std::move(posted));
    }
    std::unique_lock<std::mutex> lock(mutex);
    if (!all_done.wait_for(lock, std::chrono::seconds(120), [&] { return done == bodies.size(); }))
      throw Error("concurrent requests did not all finish within 120 s");
    return responses;
  }

  // Every page free again once no request runs (cached-only pages count as free).
  void expect_pages_returned() {
    for (int i = 0; i < 5000 && (engine_.stats().running || engine_.stats().waiting); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    runtime::EngineStats stats = engine_.stats();
    EXPECT_EQ(stats.running + stats.waiting, 0);
    EXPECT_EQ(stats.free_pages, stats.total_pages);
  }

  runtime::Engine& engine() { return engine_; }
  HttpClient& client() { return client_; }
  const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  std::string dir_;
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<model::DeepseekModel> model_;
  tokenizer::Tokenizer tokenizer_;
  chat::ChatTemplate chat_template_;
  runtime::Engine engine_;
  HttpClient client_;
  std::unique_ptr<OpenAIServer> server_;
};

// The text a streamed chat or completion carried, checking the framing on the way.
std::string streamed_text(const std::string& body, bool chat) {
  std::vector<std::string> events = sse_events(body);
  EXPECT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  bool finished = false;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    Json chunk = Json::parse(events[i]);
    EXPECT_EQ(chunk.find("object")->as_string(), chat ? "chat.completion.chunk" : "text_completion");
    for (const Json& choice : chunk.find("choices")->as_array()) {
      if (!choice.find("finish_reason")->is_null()) finished = true;
      if (chat) {
        const Json* content = choice.find("delta")->find("content");
        if (content && content->is_string()) text += content->as_string();
      } else {
        text += choice.find("text")->as_string();
      }
    }
  }
  EXPECT_TRUE(finished);
  return text;
}

std::string chat_body(const std::string& content, int max_tokens, bool stream) {
  return str_cat(R"({"model": "tiny", "messages": [{"role": "user", "content": ")", content,
                 R"("}], "temperature": 0, "max_tokens": )", max_tokens, ", \"stream\": ", stream ? "true" : "false",
                 "}");
}

std::string completion_body(const std::vector<int32_t>& prompt, int max_tokens, bool stream,
                            const std::string& extra = "") {
  std::vector<std::string> ids;
  for (int32_t id : prompt) ids.push_back(std::to_string(id));
  return str_cat(R"({"model": "tiny", "prompt": [)", join(ids, ","), R"(], "temperature": 0, "max_tokens": )", max_tokens,
                 ", \"stream\": ", stream ? "true" : "false", extra, "}");
}

std::vector<int32_t> prompt_of(int length, int salt) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < length; ++i) prompt.push_back(16 + (i * 37 + salt * 101) % 1000);
  return prompt;
}

// The value of the first /metrics line for `name` that also contains `label` (e.g. a label pair).
double metric(Served& served, const std::string& name, const std::string& label = "") {
  HttpClientResponse response = served.fetch("GET", "/metrics");
  EXPECT_EQ(response.status, 200);
  for (const std::string& line : split(response.body, '\n')) {
    bool named = line.rfind(name + "{", 0) == 0 || line.rfind(name + " ", 0) == 0;
    if (named && line.find(label) != std::string::npos) {
      double value = 0;
      EXPECT_TRUE(parse_double(line.substr(line.rfind(' ') + 1), &value)) << line;
      return value;
    }
  }
  ADD_FAILURE() << "no metric " << name;
  return -1;
}

TEST(Server, HealthIs503UntilAModelIsAttached) {
  ServerOptions options;
  options.http.port = 0;
  OpenAIServer server(options);
  server.start();
  HttpClient client;
  HttpCall call;
  call.method = "GET";
  call.port = server.port();
  call.target = "/health";
  HttpClientResponse response = client.fetch(call);
  EXPECT_EQ(response.status, 503);
  EXPECT_TRUE(Json::parse(response.body).find("error")->is_object());
  call.target = "/v1/models";
  EXPECT_EQ(client.fetch(call).status, 503);
}

TEST(Server, ChatAndCompletionsStreamedAndNot) {
  Served served;
  EXPECT_EQ(served.fetch("GET", "/health").status, 200);
  Json models = Json::parse(served.fetch("GET", "/v1/models").body);
  EXPECT_EQ(models.find("data")->at(0).find("id")->as_string(), "tiny");

  HttpClientResponse whole = served.fetch("POST", "/v1/chat/completions", chat_body("What is 123+456?", 12, false));
  ASSERT_EQ(whole.status, 200) << whole.body;
  Json answer = Json::parse(whole.body);
  EXPECT_EQ(answer.find("object")->as_string(), "chat.completion");
  std::string content = answer.find("choices")->at(0).find("message")->find("content")->as_string();
  const Json* usage = answer.find("usage");
  EXPECT_EQ(usage->find("completion_tokens")->as_int(), 12);
  EXPECT_EQ(usage->find("total_tokens")->as_int(),
            usage->find("prompt_tokens")->as_int() + usage->find("completion_tokens")->as_int());

  HttpClientResponse streamed = served.fetch("POST", "/v1/chat/completions", chat_body("What is 123+456?", 12, true));
  ASSERT_EQ(streamed.status, 200);
  EXPECT_EQ(streamed_text(streamed.body, true), content);  // greedy: the same text either way

  std::vector<int32_t> prompt = prompt_of(20, 1);
  HttpClientResponse completion = served.fetch("POST", "/v1/completions", completion_body(prompt, 10, false));
  ASSERT_EQ(completion.status, 200) << completion.body;
  std::string text = Json::parse(completion.body).find("choices")->at(0).find("text")->as_string();
  HttpClientResponse completion_stream = served.fetch(
      "POST", "/v1/completions", completion_body(prompt, 10, true, R"(, "stream_options": {"include_usage": true})"));
  EXPECT_EQ(streamed_text(completion_stream.body, false), text);
  std::vector<std::string> events = sse_events(completion_stream.body);
  ASSERT_GE(events.size(), 2u);
  Json usage_chunk = Json::parse(events[events.size() - 2]);
  EXPECT_EQ(usage_chunk.find("usage")->find("completion_tokens")->as_int(), 10);

  // echo: the prompt leads the text, whole or streamed (its ids decoded; a text prompt as given).
  const std::string prompt_text = served.tokenizer().decode(prompt);
  HttpClientResponse echoed = served.fetch("POST", "/v1/completions", completion_body(prompt, 10, false,
                                                                                       R"(, "echo": true)"));
  ASSERT_EQ(echoed.status, 200) << echoed.body;
  EXPECT_EQ(Json::parse(echoed.body).find("choices")->at(0).find("text")->as_string(), prompt_text + text);
  EXPECT_EQ(Json::parse(echoed.body).find("usage")->find("completion_tokens")->as_int(), 10);
  HttpClientResponse echoed_stream = served.fetch("POST", "/v1/completions", completion_body(prompt, 10, true,
                                                                                             R"(, "echo": true)"));
  EXPECT_EQ(streamed_text(echoed_stream.body, false), prompt_text + text);
  served.expect_pages_returned();
}

TEST(Server, SixtyFourConcurrentStreamsEachMatchTheRequestRunAlone) {
  Served served;
  constexpr int kRequests = 64;
  std::vector<std::string> bodies, alone(kRequests);
  for (int i = 0; i < kRequests; ++i) bodies.push_back(completion_body(prompt_of(8 + i % 23, i), 16 + i % 5, true));
  for (int i = 0; i < kRequests; ++i) {
    HttpClientResponse response = served.fetch("POST", "/v1/completions", bodies[i]);
    ASSERT_EQ(response.status, 200);
    alone[i] = streamed_text(response.body, false);
  }
  std::vector<HttpClientResponse> together = served.post_all("/v1/completions", bodies);
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_EQ(together[i].status, 200) << together[i].error;
    EXPECT_EQ(streamed_text(together[i].body, false), alone[i]) << "request " << i;
  }
  served.expect_pages_returned();
}

TEST(Server, ARepeatedPromptHitsThePrefixCache) {
  Served served;
  std::string body = completion_body(prompt_of(150, 7), 8, false);
  HttpClientResponse first = served.fetch("POST", "/v1/completions", body);
  double hits_before = metric(served, "vllm:prefix_cache_hits_total");
  HttpClientResponse second = served.fetch("POST", "/v1/completions", body);
  ASSERT_EQ(second.status, 200);
  EXPECT_EQ(metric(served, "vllm:prefix_cache_hits_total") - hits_before, 128);  // two full pages
  Json a = Json::parse(first.body), b = Json::parse(second.body);
  EXPECT_EQ(a.find("choices")->at(0).find("text")->as_string(), b.find("choices")->at(0).find("text")->as_string());
  EXPECT_EQ(b.find("usage")->find("prompt_tokens_details")->find("cached_tokens")->as_int(), 128);
  served.expect_pages_returned();
}

TEST(Server, PreemptionInATinyPoolStillGivesTheSameOutputs) {
  runtime::EngineConfig config;
  config.num_pages = 8;  // 512 slots; the requests below want about 1300
  config.enable_prefix_caching = false;
  Served served(config);
  std::vector<std::string> bodies, alone;
  for (int i = 0; i < 8; ++i) bodies.push_back(completion_body(prompt_of(100 + i, i), 60, false, R"(, "ignore_eos": true)"));
  for (const std::string& body : bodies) alone.push_back(served.fetch("POST", "/v1/completions", body).body);
  std::vector<HttpClientResponse> together = served.post_all("/v1/completions", bodies);
  EXPECT_GT(served.engine().stats().preemptions, 0);
  for (size_t i = 0; i < bodies.size(); ++i) {
    Json a = Json::parse(alone[i]), b = Json::parse(together[i].body);
    EXPECT_EQ(a.find("choices")->at(0).find("text")->as_string(), b.find("choices")->at(0).find("text")->as_string())
        << "request " << i;
  }
  served.expect_pages_returned();
}

struct BadCase {
  const char* name;
  std::string method, target, body;
  int status;
  std::string param;  // expected "param", "" for null
};

TEST(Server, BadInputGetsOpenAIErrorsAndTheServerSurvives) {
  ServerOptions options = tiny_options();
  options.http.max_body_bytes = 1 << 20;
  Served served({}, options);
  std::string too_long = completion_body(prompt_of(300, 1), 4, false);  // the context is 256
  std::vector<BadCase> cases = {
      {"malformed JSON", "POST", "/v1/chat/completions", "{\"messages\": [", 400, ""},
      {"not an object", "POST", "/v1/completions", "[1, 2]", 400, ""},
      {"wrong type", "POST", "/v1/chat/completions",
       R"({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"})", 400,
       "temperature"},
      {"messages missing", "POST", "/v1/chat/completions", "{\"model\": \"tiny\"}", 400, "messages"},
      {"prompt too long", "POST", "/v1/completions", too_long, 400, "prompt"},
      {"n above the limit", "POST", "/v1/completions", completion_body({5, 6}, 4, false, R"(, "n": 129)"), 400, "n"},
      {"unknown model", "POST", "/v1/completions", "{\"model\": \"gpt-9\", \"prompt\": \"hi\"}", 404, ""},
      {"token outside the vocabulary", "POST", "/v1/completions", completion_body({5, 99999}, 4, false), 400, "prompt"},
      {"body too large", "POST", "/v1/completions", std::string(2 << 20, ' '), 413, ""},
      {"unknown route", "GET", "/v1/nothing", "", 404, ""},
      {"wrong method", "GET", "/v1/completions", "", 405, ""},
      {"bad detokenize", "POST", "/detokenize", "{\"tokens\": [\"x\"]}", 400, "tokens"},
  };
  for (const BadCase& c : cases) {
    HttpClientResponse response = served.fetch(c.method, c.target, c.body);
    EXPECT_EQ(response.status, c.status) << c.name << ": " << response.body;
    Json body = Json::parse(response.body);
    const Json* error = body.find("error");
    ASSERT_TRUE(error && error->is_object()) << c.name;
    EXPECT_TRUE(error->find("message")->is_string() && !error->find("message")->as_string().empty()) << c.name;
    EXPECT_TRUE(error->find("type")->is_string()) << c.name;
    EXPECT_TRUE(error->contains("code")) << c.name;
    if (c.param.empty()) {
      EXPECT_TRUE(error->find("param")->is_null()) << c.name;
    } else {
      EXPECT_EQ(error->find("param")->as_string(), c.param) << c.name;
    }
  }
  EXPECT_EQ(served.fetch("GET", "/health").status, 200);
  EXPECT_EQ(served.fetch("POST", "/v1/completions", completion_body({5, 6}, 2, false)).status, 200);
  served.expect_pages_returned();
}

TEST(Server, ApiKeyIsRequiredWhenSet) {
  ServerOptions options = tiny_options();
  options.api_key = "sekret";
  Served served({}, options);
  HttpClientResponse missing = served.fetch("GET", "/v1/models");
  EXPECT_EQ(missing.status, 401);
  HttpCall wrong = served.call("GET", "/v1/models");
  wrong.headers.push_back({"Authorization", "Bearer nope"});
  EXPECT_EQ(served.client().fetch(wrong).status, 401);
  HttpCall right = served.call("GET", "/v1/models");
  right.headers.push_back({"Authorization", "Bearer sekret"});
  EXPECT_EQ(served.client().fetch(right).status, 200);
  EXPECT_EQ(served.fetch("GET", "/health").status, 200);  // health needs no key
  // Unknown /v1 paths need the key too (401 before 404, as vLLM answers).
  EXPECT_EQ(served.fetch("POST", "/v1/no-such-route", "{}").status, 401);

  // The key is checked from the head: a client announcing a 30 MiB body without a key is answered
  // 401 at once and the connection closed, before a byte of the body is sent.
  http_test::RawConnection raw(served.port());
  raw.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Content-Length: 31457280\r\n\r\n");
  const std::string& answer = raw.read_until("\r\n\r\n", 5);
  EXPECT_EQ(answer.rfind("HTTP/1.1 401", 0), 0u) << answer;
  EXPECT_TRUE(raw.wait_closed_by_peer(5));
}

TEST(Server, TheBundledModelReasonsAndAnswersASum) {
  // What `make serve` serves and the README shows: the reasoning in reasoning_content, the sum in content.
  ServerOptions options;
  options.reasoning = true;
  options.served_model_name = "dsv3-tiny";
  Served served({}, options, bundled_model_dir());
  HttpClientResponse response = served.fetch(
      "POST", "/v1/chat/completions",
      R"({"model": "dsv3-tiny", "messages": [{"role": "user", "content": "123+456"}], "temperature": 0})");
  ASSERT_EQ(response.status, 200) << response.body;
  Json choice = Json::parse(response.body).find("choices")->at(0);
  const Json* message = choice.find("message");
  EXPECT_NE(message->find("reasoning_content")->as_string().find("123 + 456 = 579"), std::string::npos);
  EXPECT_EQ(std::string(trim(message->find("content")->as_string())), "579");
  EXPECT_EQ(choice.find("finish_reason")->as_string(), "stop");
}

// A device that fails for good on its first step, as one with a sticky CUDA error does.
class BrokenDevice final : public runtime::StepExecutor {
 public:
  explicit BrokenDevice(int64_t vocab) : vocab_(vocab) {}
  backend::SampledTokens run(const model::ForwardBatch&, const backend::SamplingBatch&) override {
    throw runtime::FatalDeviceError("CUDA error: an illegal memory access was encountered");
  }
  int64_t vocab_size() const override { return vocab_; }
  int64_t max_model_len() const override { return 256; }
  int64_t num_pages() const override { return 16; }
  std::vector<int32_t> eos_token_ids() const override { return {}; }

 private:
  int64_t vocab_;
};

TEST(Server, AFatalDeviceErrorFailsTheRequestAndTurnsHealthTo503) {
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(fixture_dir());
  runtime::Engine engine(std::make_unique<BrokenDevice>(tokenizer.vocab_size()), tokenizer, {});
  ServerOptions options = tiny_options();
  options.http.port = 0;
  OpenAIServer server(options);
  server.start();
  server.attach({&engine, &tokenizer, nullptr});
  HttpClient client;
  auto fetch = [&](std::string method, std::string target, std::string body = "") {
    HttpCall call;
    call.method = std::move(method);
    call.port = server.port();
    call.target = std::move(target);
    call.body = std::move(body);
    call.headers = {{"Content-Type", "application/json"}};
    call.timeout_seconds = 60;
    return client.fetch(call);
  };
  EXPECT_EQ(fetch("GET", "/health").status, 200);
  // The request in flight when the device fails gets a 500 with the device's message.
  HttpClientResponse failed = fetch("POST", "/v1/completions", completion_body(prompt_of(10, 1), 4, false));
  EXPECT_EQ(failed.status, 500) << failed.body;
  EXPECT_NE(failed.body.find("illegal memory access"), std::string::npos) << failed.body;
  EXPECT_FALSE(engine.healthy());
  // Then /health and new requests answer 503 with an OpenAI-style error body.
  std::vector<std::tuple<std::string, std::string, std::string>> after = {
      {"GET", "/health", ""},
      {"POST", "/v1/completions", completion_body(prompt_of(10, 2), 4, false)},
      {"POST", "/v1/completions", completion_body(prompt_of(10, 3), 4, true)}};
  for (const auto& [method, target, body] : after) {
    HttpClientResponse response = fetch(method, target, body);
    EXPECT_EQ(response.status, 503) << target << ": " << response.body;
    Json answer = Json::parse(response.body);
    const Json* error = answer.find("error");
    ASSERT_TRUE(error && error->is_object()) << response.body;
    EXPECT_NE(error->find("message")->as_string().find("illegal memory access"), std::string::npos);
    EXPECT_EQ(error->find("type")->as_string(), "server_error");
  }
  runtime::EngineStats stats = engine.stats();
  EXPECT_EQ(stats.running + stats.waiting, 0);
  EXPECT_EQ(stats.free_pages, stats.total_pages);
}

TEST(Server, TokenizeAndDetokenize) {
  Served served;
  Json tokens = Json::parse(served.fetch("POST", "/tokenize", R"({"prompt": "Hello world"})").body);
  std::vector<int32_t> expected = served.tokenizer().encode("Hello world", true);
  ASSERT_EQ(tokens.find("count")->as_int(), static_cast<int64_t>(expected.size()));
  std::vector<std::string> ids;
  for (const Json& id : tokens.find("tokens")->as_array()) ids.push_back(std::to_string(id.as_int()));
  Json text = Json::parse(served.fetch("POST", "/detokenize", "{\"tokens\": [" + join(ids, ",") + "]}").body);
  EXPECT_EQ(text.find("prompt")->as_string(), served.tokenizer().decode(expected));
}

TEST(Server, OneModelByIdAndTheVersion) {
  ServerOptions options = tiny_options();
  options.served_model_name = "org/tiny";  // a name with a slash, as the default (the --model path) has
  options.api_key = "sekret";
  options.version = "1.2.3";
  options.commit = "abc1234";
  Served served({}, options);
  auto get = [&](const std::string& target, bool with_key) {
    HttpCall call = served.call("GET", target);
    if (with_key) call.headers.push_back({"Authorization", "Bearer sekret"});
    return served.client().fetch(call);
  };
  HttpClientResponse listed = get("/v1/models", true);
  ASSERT_EQ(listed.status, 200);
  Json listed_card = Json::parse(listed.body).find("data")->at(0);
  for (const char* target : {"/v1/models/org/tiny", "/v1/models/org%2Ftiny"}) {
    HttpClientResponse one = get(target, true);
    ASSERT_EQ(one.status, 200) << target << ": " << one.body;
    Json card = Json::parse(one.body);
    EXPECT_EQ(card.find("id")->as_string(), "org/tiny");
    EXPECT_EQ(card.find("object")->as_string(), "model");
    EXPECT_EQ(card.find("max_model_len")->as_int(), listed_card.find("max_model_len")->as_int());
    EXPECT_EQ(card.find("owned_by")->as_string(), listed_card.find("owned_by")->as_string());
  }
  HttpClientResponse other = get("/v1/models/gpt-4", true);
  EXPECT_EQ(other.status, 404);
  EXPECT_EQ(Json::parse(other.body).find("error")->find("code")->as_string(), "model_not_found");
  EXPECT_EQ(get("/v1/models/org%2", true).status, 404);
  EXPECT_EQ(get("/v1/models/org/tiny", false).status, 401);
  EXPECT_EQ(served.fetch("POST", "/v1/models/org/tiny", "{}").status, 401);

  HttpClientResponse version = get("/version", false);  // no key needed, as /health
  ASSERT_EQ(version.status, 200);
  Json identity = Json::parse(version.body);
  EXPECT_EQ(identity.find("version")->as_string(), "1.2.3");
  EXPECT_EQ(identity.find("commit")->as_string(), "abc1234");
  EXPECT_EQ(served.fetch("POST", "/version", "{}").status, 405);
}

std::optional<std::string> header_of(const HttpClientResponse& response, const std::string& name) {
  auto same = [](const std::string& a, const std::string& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](char x, char y) { return std::tolower(x) == std::tolower(y); });
  };
  for (const auto& [key, value] : response.headers)
    if (same(key, name)) return value;
  return std::nullopt;
}

TEST(Server, CorsAllowsAnyOriginByDefaultAndAnswersPreflights) {
  ServerOptions options = tiny_options();
  options.api_key = "sekret";
  Served served({}, options);  // allowed_origins: {"*"}, the default
  HttpCall preflight = served.call("OPTIONS", "/v1/chat/completions");
  preflight.headers = {{"Origin", "https://app.example"},
                       {"Access-Control-Request-Method", "POST"},
                       {"Access-Control-Request-Headers", "authorization, content-type"}};
  HttpClientResponse answer = served.client().fetch(preflight);  // no key: a preflight carries none
  EXPECT_EQ(answer.status, 204);
  EXPECT_EQ(header_of(answer, "Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(header_of(answer, "Access-Control-Allow-Headers"), "authorization, content-type");
  EXPECT_NE(header_of(answer, "Access-Control-Allow-Methods").value_or("").find("POST"), std::string::npos);
  EXPECT_FALSE(header_of(answer, "Content-Length").has_value());  // a 204 announces no body

  // Answers carry the header, refusals from the head (401) included.
  HttpCall authorized = served.call("GET", "/v1/models");
  authorized.headers.push_back({"Authorization", "Bearer sekret"});
  HttpClientResponse models = served.client().fetch(authorized);
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(header_of(models, "Access-Control-Allow-Origin"), "*");
  HttpClientResponse refused = served.fetch("GET", "/v1/models");
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(header_of(refused, "Access-Control-Allow-Origin"), "*");
  HttpClientResponse streamed = served.client().fetch([&] {
    HttpCall call = served.call("POST", "/v1/completions",
                                R"({"model": "tiny", "prompt": "Hi", "max_tokens": 2, "stream": true})");
    call.headers.push_back({"Authorization", "Bearer sekret"});
    return call;
  }());
  EXPECT_EQ(streamed.status, 200);
  EXPECT_EQ(header_of(streamed, "Access-Control-Allow-Origin"), "*");
}

TEST(Server, CorsWithAListEchoesOnlyItsOriginsAndOffMeansNoHeaders) {
  ServerOptions options = tiny_options();
  options.allowed_origins = {"https://app.example"};
  Served listed({}, options);
  HttpCall allowed = listed.call("GET", "/v1/models");
  allowed.headers.push_back({"Origin", "https://app.example"});
  HttpClientResponse answer = listed.client().fetch(allowed);
  EXPECT_EQ(header_of(answer, "Access-Control-Allow-Origin"), "https://app.example");
  EXPECT_EQ(header_of(answer, "Vary"), "Origin");
  HttpCall other = listed.call("GET", "/v1/models");
  other.headers.push_back({"Origin", "https://evil.example"});
  EXPECT_FALSE(header_of(listed.client().fetch(other), "Access-Control-Allow-Origin").has_value());
  HttpCall other_preflight = listed.call("OPTIONS", "/v1/models");
  other_preflight.headers.push_back({"Origin", "https://evil.example"});
  EXPECT_EQ(listed.client().fetch(other_preflight).status, 400);

  ServerOptions off = tiny_options();
  off.allowed_origins = {};
  Served plain({}, off);
  HttpClientResponse none = plain.fetch("GET", "/v1/models");
  EXPECT_EQ(none.status, 200);
  EXPECT_FALSE(header_of(none, "Access-Control-Allow-Origin").has_value());
  EXPECT_EQ(plain.fetch("OPTIONS", "/v1/models").status, 405);
}

}  // namespace
}  // namespace dsinfer::server
