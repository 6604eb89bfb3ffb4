// vLLM's prompt_logprobs end to end on loopback, over the fixture model: their JSON in each
// completion choice and beside a chat answer's choices, their agreement with the logprobs of a
// sampled token (one definition for both), n > 1 and batched prompts with echo (one scoring per
// prompt, shared by its choices), and the refusals. Every page goes back to the pool.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "backend/make_backend.h"
#include "backend/test_device.h"
#include "core/file.h"
#include "core/json.h"
#include "core/source_path.h"
#include "core/strings.h"
#include "http/http_test_util.h"
#include "server/openai_server.h"
#include "server/server_test_util.h"
#include "tokenizer/chat/chat_template.h"

namespace dsinfer::server {
namespace {

std::string fixture_dir() { return source_path("tests/fixtures/models/v3-tiny"); }

class Served {
 public:
  Served()
      : backend_(backend::make_backend(backend::test_device())),
        model_(model::DeepseekModel::load(fixture_dir(), *backend_)),
        tokenizer_(tokenizer::Tokenizer::from_dir(fixture_dir())),
        chat_template_(chat::ChatTemplate::from_tokenizer_config(
            Json::parse(read_file(fixture_dir() + "/tokenizer_config.json")), fixture_dir())),
        engine_(*model_, tokenizer_, runtime::EngineConfig{}) {
    ServerOptions options;
    options.served_model_name = "tiny";
    options.http.port = 0;
    options.log_requests = false;
    server_ = std::make_unique<OpenAIServer>(options);
    server_->start();
    server_->attach({&engine_, &tokenizer_, &chat_template_});
  }

  HttpClientResponse post(std::string target, std::string body) {
    return client_.fetch(json_call(server_->port(), "POST", std::move(target), std::move(body), 60));
  }
  Json answer(std::string target, std::string body) {
    HttpClientResponse response = post(std::move(target), std::move(body));
    EXPECT_EQ(response.status, 200) << response.body;
    return response.status == 200 ? Json::parse(response.body) : Json::object();
  }
  void expect_pages_returned() {
    EXPECT_TRUE(http_test::wait_for([&] { return engine_.stats().running + engine_.stats().waiting == 0; }, 5));
    runtime::EngineStats stats = engine_.stats();
    EXPECT_EQ(stats.free_pages, stats.total_pages);
  }
  runtime::Engine& engine() { return engine_; }
  const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<model::DeepseekModel> model_;
  tokenizer::Tokenizer tokenizer_;
  chat::ChatTemplate chat_template_;
  runtime::Engine engine_;
  HttpClient client_;
  std::unique_ptr<OpenAIServer> server_;
};

std::vector<int32_t> prompt_of(int length, int salt) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < length; ++i) prompt.push_back(16 + (i * 37 + salt * 101) % 1000);
  return prompt;
}

std::string ids_json(const std::vector<int32_t>& ids) {
  std::vector<std::string> items;
  for (int32_t id : ids) items.push_back(std::to_string(id));
  return "[" + join(items, ",") + "]";
}

// Checks vLLM's shape for a prompt of `prompt` tokens scored with top `top_n`: null first, then per
// token a dict whose first key is the token, each value {logprob, rank, decoded_token}, the other
// keys the top tokens (ranks 1..top_n with the prompt token's place left out), most likely first.
void expect_vllm_shape(const Json& list, const std::vector<int32_t>& prompt, int top_n,
                       const tokenizer::Tokenizer& tokenizer) {
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), prompt.size());
  EXPECT_TRUE(list.at(0).is_null());
  for (size_t p = 1; p < prompt.size(); ++p) {
    SCOPED_TRACE(testing::Message() << "prompt token " << p);
    const Json::Object& entry = list.at(p).as_object();
    ASSERT_FALSE(entry.empty());
    EXPECT_EQ(entry.front().first, std::to_string(prompt[p]));
    std::set<int64_t> ranks;
    double previous = 0.0;
    for (size_t i = 0; i < entry.size(); ++i) {
      const Json& value = entry[i].second;
      const int64_t rank = value.find("rank")->as_int();
      const double logprob = value.find("logprob")->as_double();
      EXPECT_LE(logprob, 0.0);
      EXPECT_GE(rank, 1);
      EXPECT_EQ(value.find("decoded_token")->as_string(),
                tokenizer.decode(std::vector<int32_t>{static_cast<int32_t>(std::stoi(entry[i].first))}));
      if (i == 0) {
        if (rank <= top_n) ranks.insert(rank);
        continue;
      }
      EXPECT_LE(rank, top_n);
      EXPECT_TRUE(ranks.insert(rank).second) << "rank " << rank << " twice";
      if (i > 1) {
        EXPECT_LE(logprob, previous) << "the top tokens are not most likely first";
      }
      previous = logprob;
    }
    EXPECT_EQ(ranks.size(), static_cast<size_t>(top_n)) << "ranks 1.." << top_n << " once each";
  }
}

TEST(ServerPromptLogprobs, CompletionsCarryThemInTheChoiceAsVllmShapesThem) {
  Served served;
  const std::vector<int32_t> prompt = prompt_of(20, 1);
  Json answer = served.answer("/v1/completions", str_cat(R"({"prompt": )", ids_json(prompt), R"(, "max_tokens": 2,)",
                                                         R"( "temperature": 0, "prompt_logprobs": 2})"));
  const Json& choice = answer.find("choices")->at(0);
  expect_vllm_shape(*choice.find("prompt_logprobs"), prompt, 2, served.tokenizer());
  EXPECT_TRUE(choice.find("logprobs")->is_null()) << "logprobs were not asked for";
  EXPECT_EQ(answer.find("usage")->find("prompt_tokens")->as_int(), 20);
  // Without the field, no member.
  Json plain = served.answer("/v1/completions", str_cat(R"({"prompt": )", ids_json(prompt), R"(, "max_tokens": 2})"));
  EXPECT_FALSE(plain.find("choices")->at(0).contains("prompt_logprobs"));
  served.expect_pages_returned();
}

TEST(ServerPromptLogprobs, APromptRowAgreesWithTheLogprobOfTheTokenSampledFromIt) {
  // One definition (the raw model distribution): the greedy token after a prompt, with its logprob,
  // is the most likely token of the prompt_logprobs entry of whatever token follows that prompt.
  Served served;
  std::vector<int32_t> prompt = prompt_of(30, 2);
  Json sampled = served.answer("/v1/completions", str_cat(R"({"prompt": )", ids_json(prompt),
                                                          R"(, "max_tokens": 1, "temperature": 0, "logprobs": 0})"));
  const Json& logprobs = *sampled.find("choices")->at(0).find("logprobs");
  prompt.push_back(prompt.front());
  Json scored = served.answer("/v1/completions", str_cat(R"({"prompt": )", ids_json(prompt),
                                                         R"(, "max_tokens": 1, "prompt_logprobs": 1})"));
  const Json::Object& last = scored.find("choices")->at(0).find("prompt_logprobs")->as_array().back().as_object();
  auto most_likely = std::find_if(last.begin(), last.end(),
                                  [](const Json::Member& member) { return member.second.find("rank")->as_int() == 1; });
  ASSERT_NE(most_likely, last.end());
  EXPECT_EQ(most_likely->second.find("decoded_token")->as_string(), logprobs.find("tokens")->at(0).as_string());
  // The CPU computes each row alone, so the same row gives the same bits; bf16 on a GPU moves them.
  const double tolerance = backend::test_device() == "cpu" ? 0.0 : 5e-2;
  EXPECT_NEAR(most_likely->second.find("logprob")->as_double(), logprobs.find("token_logprobs")->at(0).as_double(),
              tolerance);
  served.expect_pages_returned();
}

TEST(ServerPromptLogprobs, ChoicesOfABatchShareTheirPromptsScoringAndEchoKeepsItsText) {
  Served served;
  const std::vector<int32_t> first = prompt_of(100, 3), second = prompt_of(30, 4);  // the first fills a page
  const int64_t hits_before = served.engine().stats().prefix_hits;
  Json answer = served.answer("/v1/completions", str_cat(R"({"prompt": [)", ids_json(first), ",", ids_json(second),
                                                         R"(], "n": 2, "echo": true, "max_tokens": 3,)",
                                                         R"( "temperature": 0.8, "seed": 7, "prompt_logprobs": 1})"));
  const Json::Array& choices = answer.find("choices")->as_array();
  ASSERT_EQ(choices.size(), 4u);
  for (size_t i = 0; i < choices.size(); ++i) {
    const std::vector<int32_t>& prompt = i < 2 ? first : second;
    SCOPED_TRACE(testing::Message() << "choice " << i);
    expect_vllm_shape(*choices[i].find("prompt_logprobs"), prompt, 1, served.tokenizer());
    EXPECT_TRUE(choices[i].find("text")->as_string().starts_with(served.tokenizer().decode(prompt)));
  }
  EXPECT_EQ(choices[1].find("prompt_logprobs")->dump(), choices[0].find("prompt_logprobs")->dump());
  EXPECT_EQ(choices[3].find("prompt_logprobs")->dump(), choices[2].find("prompt_logprobs")->dump());
  // The first prompt's second choice took its page from the cache: only its first choice scored it.
  EXPECT_EQ(served.engine().stats().prefix_hits - hits_before, 64);
  EXPECT_EQ(answer.find("usage")->find("prompt_tokens_details")->find("cached_tokens")->as_int(), 0);
  served.expect_pages_returned();
}

TEST(ServerPromptLogprobs, ChatPutsThemBesideTheChoices) {
  Served served;
  const std::string messages = R"("messages": [{"role": "user", "content": "What is 123+456?"}])";
  Json answer = served.answer("/v1/chat/completions",
                              str_cat("{", messages, R"(, "n": 2, "max_tokens": 2, "prompt_logprobs": 0})"));
  const Json* list = answer.find("prompt_logprobs");
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(static_cast<int64_t>(list->size()), answer.find("usage")->find("prompt_tokens")->as_int());
  EXPECT_TRUE(list->at(0).is_null());
  for (size_t p = 1; p < list->size(); ++p) EXPECT_EQ(list->at(p).size(), 1u) << "0 top tokens: the prompt token alone";
  for (const Json& choice : answer.find("choices")->as_array()) EXPECT_FALSE(choice.contains("prompt_logprobs"));
  Json plain = served.answer("/v1/chat/completions", str_cat("{", messages, R"(, "max_tokens": 2})"));
  EXPECT_FALSE(plain.contains("prompt_logprobs"));
  served.expect_pages_returned();
}

TEST(ServerPromptLogprobs, StreamsAndOutOfRangeCountsAreRefused) {
  Served served;
  const std::string messages = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::pair<std::string, std::string> refused[] = {
      {"/v1/completions", R"({"prompt": [5, 6], "stream": true, "prompt_logprobs": 1})"},
      {"/v1/chat/completions", str_cat("{", messages, R"(, "stream": true, "prompt_logprobs": 0})")},
      {"/v1/completions", R"({"prompt": [5, 6], "prompt_logprobs": 21})"},
      {"/v1/chat/completions", str_cat("{", messages, R"(, "prompt_logprobs": "all"})")},
  };
  for (const auto& [target, body] : refused) {
    HttpClientResponse response = served.post(target, body);
    EXPECT_EQ(response.status, 400) << body;
    EXPECT_EQ(Json::parse(response.body).find("error")->find("param")->as_string(), "prompt_logprobs") << body;
  }
  served.expect_pages_returned();
}

}  // namespace
}  // namespace dsinfer::server
