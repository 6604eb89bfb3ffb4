// Answers of several choices end to end on loopback (choice_fanout.h): n > 1 on both endpoints,
// streamed and not, batched completion prompts, and continue_final_message (chat_prompt.h).
// Sampling, seeds and the chat template run over the fixture model; what needs long or failing
// streams, and the check that shared prompt pages hold the right tokens, over the engine tests'
// stand-in model (paced_executor.h over runtime/testing_executor.h), which turns a paging mistake into
// other tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend/make_backend.h"
#include "backend/test_device.h"
#include "core/file.h"
#include "core/json.h"
#include "core/source_path.h"
#include "core/strings.h"
#include "http/http_test_util.h"
#include "server/openai_server.h"
#include "server/paced_executor.h"
#include "server/server_test_util.h"
#include "tokenizer/chat/chat_template.h"

namespace dsinfer::server {
namespace {

using http_test::wait_for;

std::string fixture_dir() { return source_path("tests/fixtures/models/v3-tiny"); }

struct FixtureModel {};
struct StandInModel {  // paced_executor.h
  std::chrono::milliseconds pace{0};
};

// A server on loopback over the fixture model or the stand-in.
class Served {
 public:
  explicit Served(FixtureModel, runtime::EngineConfig config = {})
      : tokenizer_(tokenizer::Tokenizer::from_dir(fixture_dir())),
        chat_template_(chat::ChatTemplate::from_tokenizer_config(
            Json::parse(read_file(fixture_dir() + "/tokenizer_config.json")), fixture_dir())),
        backend_(backend::make_backend(backend::test_device())),
        model_(model::DeepseekModel::load(fixture_dir(), *backend_)),
        engine_(std::make_unique<runtime::Engine>(*model_, tokenizer_, config)) {
    start();
  }
  explicit Served(StandInModel stand_in, runtime::EngineConfig config = {})
      : tokenizer_(tokenizer::Tokenizer::from_dir(fixture_dir())),
        chat_template_(chat::ChatTemplate::from_string("", "", "")),
        engine_(std::make_unique<runtime::Engine>(
            std::make_unique<PacedExecutor>(tokenizer_.vocab_size(), stand_in.pace), tokenizer_, config)) {
    start();
  }
  HttpCall call(std::string target, std::string body) const {
    return json_call(server_->port(), "POST", std::move(target), std::move(body), 60);
  }
  HttpClientResponse post(std::string target, std::string body) {
    return client_.fetch(call(std::move(target), std::move(body)));
  }
  // The whole answer of a request that must succeed.
  Json answer(std::string target, std::string body) {
    HttpClientResponse response = post(std::move(target), std::move(body));
    EXPECT_EQ(response.status, 200) << response.body;
    return response.status == 200 ? Json::parse(response.body) : Json::object();
  }

  // No request left in the engine, and every page free (or held only by the prefix cache).
  void expect_idle_with_every_page_free(double seconds = 5) {
    EXPECT_TRUE(wait_for([&] { return engine_->stats().running + engine_->stats().waiting == 0; }, seconds))
        << "requests still in the engine";
    runtime::EngineStats stats = engine_->stats();
    EXPECT_EQ(stats.free_pages, stats.total_pages);
  }

  OpenAIServer& server() { return *server_; }
  runtime::Engine& engine() { return *engine_; }
  const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }
  const chat::ChatTemplate& chat_template() const { return chat_template_; }

 private:
  void start() {
    ServerOptions options;
    options.served_model_name = "tiny";
    options.http.port = 0;
    options.log_requests = false;
    server_ = std::make_unique<OpenAIServer>(options);
    server_->start();
    server_->attach({engine_.get(), &tokenizer_, &chat_template_});
  }

  tokenizer::Tokenizer tokenizer_;
  chat::ChatTemplate chat_template_;
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<model::DeepseekModel> model_;
  std::unique_ptr<runtime::Engine> engine_;
  HttpClient client_;
  std::unique_ptr<OpenAIServer> server_;
};

std::string ids_json(const std::vector<int32_t>& ids) {
  std::vector<std::string> items;
  for (int32_t id : ids) items.push_back(std::to_string(id));
  return "[" + join(items, ",") + "]";
}

std::vector<int32_t> prompt_of(int length, int salt) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < length; ++i) prompt.push_back(16 + (i * 37 + salt * 101) % 1000);
  return prompt;
}

std::string chat_body(const std::string& extra) {
  return str_cat(R"({"model": "tiny", "messages": [{"role": "user", "content": "What is 123+456?"}])", extra, "}");
}

std::string completion_body(const std::string& prompt, const std::string& extra) {
  return str_cat(R"({"model": "tiny", "prompt": )", prompt, extra, "}");
}

// The text of each choice of a whole answer, by index; checks that the indexes run 0, 1, ...
std::vector<std::string> choice_texts(const Json& answer, bool chat) {
  std::vector<std::string> texts;
  for (const Json& choice : answer.find("choices")->as_array()) {
    EXPECT_EQ(choice.find("index")->as_int(), static_cast<int64_t>(texts.size()));
    texts.push_back(chat ? choice.find("message")->find("content")->as_string() : choice.find("text")->as_string());
  }
  return texts;
}

// What a stream of several choices carried, checked on the way: every event is a chunk of the
// right object, an error event, the usage chunk, or the one [DONE] that ends the stream.
struct Streamed {
  std::map<int64_t, std::string> text;          // per choice index
  std::map<int64_t, int> role_chunks, finishes;  // per choice index
  std::map<int64_t, std::string> finish_reason;
  std::vector<int64_t> text_order;  // the index of each chunk that carried text, in order
  std::optional<Json> usage;        // the usage chunk, when it came right before [DONE]
  std::optional<std::string> error;  // the error event's message
};

Streamed read_stream(const std::string& body, bool chat) {
  Streamed streamed;
  std::vector<std::string> events = sse_events(body);
  EXPECT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(std::count(events.begin(), events.end(), "[DONE]"), 1) << "one [DONE] ends the stream";
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    Json event = Json::parse(events[i]);
    if (const Json* error = event.find("error")) {
      EXPECT_EQ(i + 2, events.size()) << "the error event comes last, before [DONE]";
      streamed.error = error->find("message")->as_string();
      continue;
    }
    EXPECT_EQ(event.find("object")->as_string(), chat ? "chat.completion.chunk" : "text_completion");
    const Json::Array& choices = event.find("choices")->as_array();
    if (choices.empty()) {
      EXPECT_EQ(i + 2, events.size()) << "the usage chunk comes last, before [DONE]";
      streamed.usage = *event.find("usage");
      continue;
    }
    EXPECT_EQ(choices.size(), 1u);
    const Json& choice = choices[0];
    const int64_t index = choice.find("index")->as_int();
    EXPECT_EQ(streamed.finishes[index], 0) << "choice " << index << " sent a chunk after its finish";
    std::string piece;
    if (chat) {
      const Json* delta = choice.find("delta");
      if (delta->contains("role")) ++streamed.role_chunks[index];
      if (const Json* content = delta->find("content"); content && content->is_string()) piece = content->as_string();
    } else {
      piece = choice.find("text")->as_string();
    }
    if (!piece.empty()) streamed.text_order.push_back(index);
    streamed.text[index] += piece;
    if (!choice.find("finish_reason")->is_null()) {
      ++streamed.finishes[index];
      streamed.finish_reason[index] = choice.find("finish_reason")->as_string();
    }
  }
  return streamed;
}

// n > 1 ------------------------------------------------------------------------------------------

TEST(FanOut, ChoicesCarryTheirIndexesAndUsageCountsThePromptOnce) {
  Served served{FixtureModel{}};
  const std::string sampled = R"(, "max_tokens": 6, "ignore_eos": true, "temperature": 1, "seed": 7)";
  Json one = served.answer("/v1/chat/completions", chat_body(sampled));
  Json three = served.answer("/v1/chat/completions", chat_body(str_cat(sampled, R"(, "n": 3, "best_of": 3)")));
  std::vector<std::string> texts = choice_texts(three, /*chat=*/true);
  ASSERT_EQ(texts.size(), 3u);
  for (const Json& choice : three.find("choices")->as_array())
    EXPECT_EQ(choice.find("finish_reason")->as_string(), "length");
  EXPECT_FALSE(texts[0] == texts[1] && texts[1] == texts[2]) << "three seeds drew the same text";
  const Json* usage = three.find("usage");
  EXPECT_EQ(usage->find("prompt_tokens")->as_int(), one.find("usage")->find("prompt_tokens")->as_int());
  EXPECT_EQ(usage->find("completion_tokens")->as_int(), 18);
  EXPECT_EQ(usage->find("total_tokens")->as_int(), usage->find("prompt_tokens")->as_int() + 18);
  // best_of above n would need ranking; n beyond the limit is refused.
  EXPECT_EQ(served.post("/v1/chat/completions", chat_body(R"(, "n": 2, "best_of": 3)")).status, 400);
  EXPECT_EQ(served.post("/v1/completions", completion_body(R"("Hi")", R"(, "n": 129)")).status, 400);
  served.expect_idle_with_every_page_free();
}

TEST(FanOut, SeededChoiceIDrawsFromSeedPlusIAndRepeats) {
  Served served{FixtureModel{}};
  const std::string prompt = ids_json(prompt_of(20, 3));
  const std::string sampled = R"(, "max_tokens": 8, "ignore_eos": true, "temperature": 1)";
  std::vector<std::string> texts =
      choice_texts(served.answer("/v1/completions", completion_body(prompt, sampled + R"(, "seed": 40, "n": 3)")),
                   /*chat=*/false);
  ASSERT_EQ(texts.size(), 3u);
  EXPECT_EQ(choice_texts(served.answer("/v1/completions", completion_body(prompt, sampled + R"(, "seed": 40, "n": 3)")),
                         false),
            texts);
  for (int i = 0; i < 3; ++i) {
    Json alone = served.answer("/v1/completions", completion_body(prompt, str_cat(sampled, R"(, "seed": )", 40 + i)));
    EXPECT_EQ(choice_texts(alone, false), std::vector<std::string>{texts[i]}) << "choice " << i;
  }
  served.expect_idle_with_every_page_free();
}

TEST(FanOut, AStreamInterleavesItsChoicesAndEndsOnce) {
  Served served{FixtureModel{}};
  const std::string sampled = R"(, "max_tokens": 8, "ignore_eos": true, "temperature": 1, "seed": 5, "n": 3)";
  std::vector<std::string> whole = choice_texts(served.answer("/v1/chat/completions", chat_body(sampled)), true);
  HttpClientResponse response = served.post(
      "/v1/chat/completions", chat_body(sampled + R"(, "stream": true, "stream_options": {"include_usage": true})"));
  ASSERT_EQ(response.status, 200) << response.body;
  Streamed streamed = read_stream(response.body, /*chat=*/true);
  ASSERT_EQ(streamed.text.size(), 3u);
  for (int64_t index = 0; index < 3; ++index) {
    EXPECT_EQ(streamed.role_chunks[index], 1) << "choice " << index;
    EXPECT_EQ(streamed.finishes[index], 1) << "choice " << index;
    EXPECT_EQ(streamed.finish_reason[index], "length");
    EXPECT_EQ(streamed.text[index], whole[static_cast<size_t>(index)]) << "choice " << index;
  }
  // The choices ran side by side: their chunks are interleaved, not one choice after another.
  EXPECT_FALSE(std::is_sorted(streamed.text_order.begin(), streamed.text_order.end()));
  ASSERT_TRUE(streamed.usage.has_value());
  EXPECT_EQ(streamed.usage->find("completion_tokens")->as_int(), 24);
  EXPECT_FALSE(streamed.error.has_value());

  // The completions endpoint streams its choices the same way.
  HttpClientResponse completions = served.post(
      "/v1/completions", completion_body(R"("Once upon a time")", R"(, "max_tokens": 5, "n": 2, "stream": true)"));
  Streamed plain = read_stream(completions.body, /*chat=*/false);
  EXPECT_EQ(plain.finishes.size(), 2u);
  EXPECT_FALSE(plain.usage.has_value());
  served.expect_idle_with_every_page_free();
}

// Batched prompts -----------------------------------------------------------------------------------

TEST(FanOut, BatchedPromptsNumberTheirChoicesPromptTimesNPlusI) {
  Served served{FixtureModel{}};
  const std::vector<int32_t> first = prompt_of(12, 1), second = prompt_of(17, 2);
  const std::string greedy = R"(, "max_tokens": 5, "ignore_eos": true, "temperature": 0)";
  std::string alone_first = choice_texts(served.answer("/v1/completions", completion_body(ids_json(first), greedy)),
                                         false)[0];
  std::string alone_second = choice_texts(served.answer("/v1/completions", completion_body(ids_json(second), greedy)),
                                          false)[0];
  const std::string echoed_first = served.tokenizer().decode(first) + alone_first;
  const std::string echoed_second = served.tokenizer().decode(second) + alone_second;
  const std::string batch = str_cat("[", ids_json(first), ",", ids_json(second), "]");
  Json answer = served.answer("/v1/completions", completion_body(batch, greedy + R"(, "n": 2, "echo": true)"));
  EXPECT_EQ(choice_texts(answer, false),
            (std::vector<std::string>{echoed_first, echoed_first, echoed_second, echoed_second}));
  const Json* usage = answer.find("usage");
  EXPECT_EQ(usage->find("prompt_tokens")->as_int(), 12 + 17);  // each prompt once
  EXPECT_EQ(usage->find("completion_tokens")->as_int(), 4 * 5);

  const std::string streamed_batch =
      R"(, "n": 2, "echo": true, "stream": true, "stream_options": {"include_usage": true})";
  HttpClientResponse response = served.post("/v1/completions", completion_body(batch, greedy + streamed_batch));
  Streamed streamed = read_stream(response.body, /*chat=*/false);
  EXPECT_EQ(streamed.text, (std::map<int64_t, std::string>{
                               {0, echoed_first}, {1, echoed_first}, {2, echoed_second}, {3, echoed_second}}));
  for (int64_t index = 0; index < 4; ++index) EXPECT_EQ(streamed.finishes[index], 1) << "choice " << index;
  ASSERT_TRUE(streamed.usage.has_value());
  EXPECT_EQ(streamed.usage->find("prompt_tokens")->as_int(), 12 + 17);

  // Text prompts: each choice's echo is its own prompt, as given.
  Json texts = served.answer("/v1/completions",
                             completion_body(R"(["Hello there", "The sky is"])", R"(, "max_tokens": 3, "echo": true)"));
  std::vector<std::string> echoed = choice_texts(texts, false);
  ASSERT_EQ(echoed.size(), 2u);
  EXPECT_TRUE(echoed[0].starts_with("Hello there")) << echoed[0];
  EXPECT_TRUE(echoed[1].starts_with("The sky is")) << echoed[1];
  served.expect_idle_with_every_page_free();
}

TEST(FanOut, APromptTheEngineRefusesFailsTheBatchAndLeavesNothingRunning) {
  Served served{FixtureModel{}};
  // The first prompt reaches the engine before the second is refused; it must be taken back.
  HttpClientResponse response = served.post(
      "/v1/completions", completion_body("[[5, 6, 8], [5, 99999]]", R"(, "max_tokens": 200, "ignore_eos": true)"));
  EXPECT_EQ(response.status, 400) << response.body;
  EXPECT_EQ(Json::parse(response.body).find("error")->find("param")->as_string(), "prompt");
  served.expect_idle_with_every_page_free();
  EXPECT_EQ(served.post("/v1/completions", completion_body("[[5, 6], [8]]", R"(, "max_tokens": 2)")).status, 200);
}

// continue_final_message --------------------------------------------------------------------------------

TEST(FanOut, ContinueFinalMessageContinuesTheAssistantsText) {
  Served served{FixtureModel{}};
  const std::string question = R"({"role": "user", "content": "What is 123+456?"})";
  const std::string partial = R"({"role": "assistant", "content": "The sum is"})";
  const std::string continued =
      str_cat(R"({"model": "tiny", "messages": [)", question, ",", partial, R"(], "continue_final_message": true)");
  // The prompt: the conversation with its generation prompt, then the partial answer, left open.
  Json tokenized = served.answer("/tokenize", continued + "}");
  const std::string expected_text =
      served.chat_template().render(Json::parse(str_cat("[", question, "]")), /*add_generation_prompt=*/true) +
      "The sum is";
  std::vector<int32_t> expected = served.tokenizer().encode(expected_text, /*add_special_tokens=*/false);
  std::vector<int32_t> tokens;
  for (const Json& id : tokenized.find("tokens")->as_array()) tokens.push_back(static_cast<int32_t>(id.as_int()));
  EXPECT_EQ(tokens, expected);

  // The answer goes on from there: the same text as a completion of those tokens.
  const std::string greedy = R"(, "max_tokens": 8, "ignore_eos": true, "temperature": 0)";
  Json chat = served.answer("/v1/chat/completions", continued + greedy + "}");
  Json completion = served.answer("/v1/completions", completion_body(ids_json(expected), greedy));
  EXPECT_EQ(choice_texts(chat, true), choice_texts(completion, false));

  // A last message that is not the assistant's, or a new turn asked for as well: 400.
  for (const std::string& bad :
       {str_cat(R"({"model": "tiny", "messages": [)", question, R"(], "continue_final_message": true})"),
        continued + R"(, "add_generation_prompt": true})"}) {
    HttpClientResponse refused = served.post("/v1/chat/completions", bad);
    EXPECT_EQ(refused.status, 400) << bad;
    EXPECT_EQ(Json::parse(refused.body).find("error")->find("param")->as_string(), "continue_final_message");
  }
}

// Sharing, leaving, failing, draining (the stand-in) ----------------------------------------------------

TEST(FanOut, ChoicesShareTheirPromptsPagesAndReadTheRightTokens) {
  Served served{StandInModel{}};
  runtime::EngineConfig no_cache;
  no_cache.enable_prefix_caching = false;
  Served reference{StandInModel{}, no_cache};
  const std::string prompt = ids_json(prompt_of(150, 9));  // two full pages and 22 tokens
  const std::string greedy = R"(, "max_tokens": 10, "ignore_eos": true, "temperature": 0)";
  const std::string alone =
      choice_texts(reference.answer("/v1/completions", completion_body(prompt, greedy)), false)[0];

  const int64_t hits_before = served.engine().stats().prefix_hits;
  Json answer = served.answer("/v1/completions", completion_body(prompt, greedy + R"(, "n": 4)"));
  EXPECT_EQ(choice_texts(answer, false), std::vector<std::string>(4, alone));
  // The first choice computes the prompt; the other three find its two full pages.
  EXPECT_EQ(served.engine().stats().prefix_hits - hits_before, 3 * 128);
  EXPECT_EQ(answer.find("usage")->find("prompt_tokens")->as_int(), 150);
  EXPECT_EQ(answer.find("usage")->find("prompt_tokens_details")->find("cached_tokens")->as_int(), 0);
  served.expect_idle_with_every_page_free();
}

TEST(FanOut, AClientThatLeavesAbortsEveryChoice) {
  Served served{StandInModel{std::chrono::milliseconds(5)}};  // 2000 tokens: 10 s
  const std::string body = completion_body(
      "[5, 6, 8]", R"(, "max_tokens": 2000, "ignore_eos": true, "temperature": 0, "n": 4, "stream": true)");
  http_test::RawConnection raw(served.server().port());
  raw.send(str_cat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ",
                   body.size(), "\r\n\r\n", body));
  raw.read_until(R"("index":3)", 10);  // every choice is streaming
  ASSERT_TRUE(wait_for([&] { return served.engine().stats().running == 4; }));
  raw.close();
  served.expect_idle_with_every_page_free(/*seconds=*/5);
  EXPECT_EQ(served.engine().metrics().requests_aborted.load(), 4u);
}

TEST(FanOut, AClientThatLeavesBeforeTheFirstTokenNeverStartsTheOtherChoices) {
  // The prompt spans two pages, so the later choices wait for the first one's prompt (200 ms a step).
  Served served{StandInModel{std::chrono::milliseconds(200)}};
  const std::string body = completion_body(ids_json(prompt_of(100, 4)),
                                            R"(, "max_tokens": 2000, "ignore_eos": true, "n": 4, "stream": true)");
  http_test::RawConnection raw(served.server().port());
  raw.send(str_cat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ",
                   body.size(), "\r\n\r\n", body));
  ASSERT_TRUE(wait_for([&] { return served.engine().stats().running >= 1; }, 10));
  raw.close();
  // Had the other choices been submitted after the client left, they would run for 400 s.
  served.expect_idle_with_every_page_free(/*seconds=*/5);
  runtime::Metrics& metrics = served.engine().metrics();
  EXPECT_GE(metrics.requests_aborted.load(), 1u);
  EXPECT_EQ(metrics.requests_finished_length.load() + metrics.requests_finished_stop.load(), 0u);
}

TEST(FanOut, AFailingChoiceFailsTheAnswerAndStopsTheOthers) {
  Served served{StandInModel{std::chrono::milliseconds(5)}};
  const std::string batch = str_cat("[[5, 6, 8], [5, ", kPoisonToken, ", 8]]");
  const std::string options = R"(, "max_tokens": 2000, "ignore_eos": true, "temperature": 0, "n": 2)";
  HttpClientResponse whole = served.post("/v1/completions", completion_body(batch, options));
  EXPECT_EQ(whole.status, 500) << whole.body;
  EXPECT_NE(whole.body.find("an op reported an error"), std::string::npos) << whole.body;
  served.expect_idle_with_every_page_free(/*seconds=*/5);

  const std::string stream = R"(, "stream": true, "stream_options": {"include_usage": true})";
  HttpClientResponse streamed = served.post("/v1/completions", completion_body(batch, options + stream));
  Streamed events = read_stream(streamed.body, /*chat=*/false);
  ASSERT_TRUE(events.error.has_value()) << streamed.body;
  EXPECT_NE(events.error->find("an op reported an error"), std::string::npos);
  EXPECT_FALSE(events.usage.has_value());
  served.expect_idle_with_every_page_free(/*seconds=*/5);
}

TEST(FanOut, ADrainCutsEveryChoiceShortWithOneErrorEvent) {
  Served served{StandInModel{std::chrono::milliseconds(5)}};
  std::mutex mutex;
  std::string body;
  std::promise<HttpClientResponse> done;
  HttpCall call = served.call(
      "/v1/completions",
      completion_body("[5, 6, 8]", R"(, "max_tokens": 2000, "ignore_eos": true, "n": 3, "stream": true)"));
  call.on_data = [&](std::string_view piece) {
    std::lock_guard lock(mutex);
    body.append(piece);
  };
  call.on_done = [&](const HttpClientResponse& response) { done.set_value(response); };
  HttpClient client;
  client.start(std::move(call));
  ASSERT_TRUE(wait_for([&] {
    std::lock_guard lock(mutex);
    return body.find(R"("index":2)") != std::string::npos;
  }));
  EXPECT_FALSE(served.server().drain(std::chrono::milliseconds(0)));
  ASSERT_EQ(done.get_future().get().status, 200);
  std::lock_guard lock(mutex);
  Streamed events = read_stream(body, /*chat=*/false);
  ASSERT_TRUE(events.error.has_value()) << body.substr(body.size() - 300);
  EXPECT_NE(events.error->find("shut down"), std::string::npos);
  served.expect_idle_with_every_page_free();
}

}  // namespace
}  // namespace dsinfer::server
