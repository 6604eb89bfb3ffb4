// Structured output and logit_bias (issue 12): every spelling of a constraint as the request parser
// reads it (openai_structured.h), then end to end on loopback over the bundled model, a real model
// that was never trained to write JSON: only the grammar makes its output parse.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "backend/make_backend.h"
#include "backend/test_device.h"
#include "core/file.h"
#include "core/json.h"
#include "core/strings.h"
#include "openai/openai_errors.h"
#include "server/openai_server.h"
#include "openai/openai_structured.h"
#include "server/server_test_util.h"
#include "tokenizer/chat/chat_template.h"

namespace dsinfer::server {
namespace {

using structured::GrammarKind;

// ---- parsing ----

std::optional<StructuredOutputRequest> parse(const std::string& body) {
  Json json = Json::parse(body);
  return parse_structured_output(RequestFields(json, ""));
}

// The 400 a body gets: its param and message.
std::pair<std::string, std::string> refusal(const std::string& body) {
  try {
    Json json = Json::parse(body);
    RequestFields fields(json, "");
    parse_structured_output(fields);
    parse_logit_bias(fields);
  } catch (const ProtocolError& error) {
    EXPECT_EQ(error.status(), 400);
    return {error.param(), error.what()};
  }
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

TEST(StructuredOutputFields, EverySpellingBecomesOneGrammarSpec) {
  EXPECT_FALSE(parse(R"({"response_format": {"type": "text"}})"));
  EXPECT_FALSE(parse(R"({"messages": []})"));

  auto json_object = parse(R"({"response_format": {"type": "json_object"}})");
  ASSERT_TRUE(json_object);
  EXPECT_EQ(json_object->spec.kind, GrammarKind::kJsonObject);
  EXPECT_EQ(json_object->field, "response_format");

  auto schema = parse(R"({"response_format": {"type": "json_schema", "json_schema":
      {"name": "p", "schema": {"type": "object"}, "strict": false}}})");
  ASSERT_TRUE(schema);
  EXPECT_EQ(schema->spec.kind, GrammarKind::kJsonSchema);
  EXPECT_EQ(Json::parse(schema->spec.text), Json::parse(R"({"type": "object"})"));
  EXPECT_FALSE(schema->spec.strict);
  EXPECT_TRUE(parse(R"({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}})")->spec.strict);

  auto tag = parse(R"({"response_format": {"type": "structural_tag", "structures": [], "triggers": []}})");
  ASSERT_TRUE(tag);
  EXPECT_EQ(tag->spec.kind, GrammarKind::kStructuralTag);
  EXPECT_EQ(Json::parse(tag->spec.text).find("type")->as_string(), "structural_tag");

  struct Spelling {
    const char* body;
    GrammarKind kind;
    const char* text;
    const char* field;
  };
  const Spelling spellings[] = {
      {R"({"structured_outputs": {"json": {"type": "array"}}})", GrammarKind::kJsonSchema, R"({"type":"array"})",
       "structured_outputs.json"},
      {R"({"structured_outputs": {"json": "{\"type\": \"array\"}"}})", GrammarKind::kJsonSchema,
       R"({"type": "array"})", "structured_outputs.json"},
      {R"({"structured_outputs": {"regex": "a+"}})", GrammarKind::kRegex, "a+", "structured_outputs.regex"},
      {R"({"structured_outputs": {"grammar": "root ::= \"x\""}})", GrammarKind::kEbnf, R"(root ::= "x")",
       "structured_outputs.grammar"},
      {R"({"structured_outputs": {"json_object": true}})", GrammarKind::kJsonObject, "", "structured_outputs.json_object"},
      {R"({"structured_outputs": {"structural_tag": "{\"type\": \"structural_tag\"}"}})", GrammarKind::kStructuralTag,
       R"({"type": "structural_tag"})", "structured_outputs.structural_tag"},
      {R"({"guided_json": {"type": "array"}, "guided_decoding_backend": "xgrammar"})", GrammarKind::kJsonSchema,
       R"({"type":"array"})", "guided_json"},
      {R"({"guided_regex": "b+", "guided_decoding_backend": "auto"})", GrammarKind::kRegex, "b+", "guided_regex"},
      {R"({"guided_grammar": "root ::= \"y\""})", GrammarKind::kEbnf, R"(root ::= "y")", "guided_grammar"},
      {R"({"regex": "c+"})", GrammarKind::kRegex, "c+", "regex"},
      {R"({"ebnf": "root ::= \"z\""})", GrammarKind::kEbnf, R"(root ::= "z")", "ebnf"},
      {R"({"json_schema": "{\"type\": \"integer\"}"})", GrammarKind::kJsonSchema, R"({"type": "integer"})",
       "json_schema"},
  };
  for (const Spelling& spelling : spellings) {
    auto found = parse(spelling.body);
    ASSERT_TRUE(found) << spelling.body;
    EXPECT_EQ(found->spec.kind, spelling.kind) << spelling.body;
    EXPECT_EQ(found->spec.text, spelling.text) << spelling.body;
    EXPECT_EQ(found->field, spelling.field) << spelling.body;
    EXPECT_TRUE(found->spec.strict) << spelling.body;
  }
  for (const char* body : {R"({"structured_outputs": {"choice": ["yes", "no"]}})", R"({"guided_choice": ["yes", "no"]})"}) {
    auto choice = parse(body);
    ASSERT_TRUE(choice) << body;
    EXPECT_EQ(choice->spec.kind, GrammarKind::kChoice);
    EXPECT_EQ(choice->spec.choices, (std::vector<std::string>{"yes", "no"}));
  }
}

TEST(StructuredOutputFields, WhatCannotBeHonouredIsA400NamingTheField) {
  struct Refused {
    const char* body;
    const char* param;
    const char* message;  // a substring
  };
  const Refused refused[] = {
      {R"({"response_format": {"type": "json_object"}, "regex": "a"})", "regex",
       "only one structured-output constraint may be given per request, got response_format and regex"},
      {R"({"structured_outputs": {"regex": "a", "choice": ["b"]}})", "structured_outputs.choice",
       "got structured_outputs.regex and structured_outputs.choice"},
      {R"({"guided_json": {}, "json_schema": {}})", "json_schema", "only one structured-output constraint"},
      {R"({"guided_regex": "a", "guided_decoding_backend": "outlines"})", "guided_decoding_backend",
       "must be 'xgrammar' or 'auto'"},
      {R"({"guided_regex": "a", "guided_whitespace_pattern": " "})", "guided_whitespace_pattern", "not supported"},
      {R"({"structured_outputs": {"json": {}, "disable_any_whitespace": true}})",
       "structured_outputs.disable_any_whitespace", "not supported"},
      {R"({"response_format": {"type": "json_schema"}})", "response_format.json_schema", "is required"},
      {R"({"response_format": {"type": "xml"}})", "response_format.type", "got 'xml'"},
      {R"({"guided_choice": []})", "guided_choice", "at least one string"},
      {R"({"guided_choice": ["a", 1]})", "guided_choice", "must be a list of strings"},
      {R"({"regex": ""})", "regex", "must not be empty"},
      {R"({"json_schema": 5})", "json_schema", "must be a JSON schema"},
      {R"({"logit_bias": {"abc": 1}})", "logit_bias", "keys must be token ids"},
      {R"({"logit_bias": {"-3": 1}})", "logit_bias", "keys must be token ids"},
      {R"({"logit_bias": {"99999999999": 1}})", "logit_bias", "keys must be token ids"},
      {R"({"logit_bias": {"3": 100.5}})", "logit_bias", "between -100 and 100"},
      {R"({"logit_bias": {"3": "1"}})", "logit_bias", "values must be numbers"},
      {R"({"logit_bias": [1]})", "logit_bias", "must be an object"},
  };
  for (const Refused& case_ : refused) {
    auto [param, message] = refusal(case_.body);
    EXPECT_EQ(param, case_.param) << case_.body;
    EXPECT_NE(message.find(case_.message), std::string::npos) << case_.body << ": " << message;
  }
  Json body = Json::parse(R"({"logit_bias": {"7": -100, "12": 2.5}})");
  std::vector<runtime::LogitBias> bias = parse_logit_bias(RequestFields(body, ""));
  EXPECT_EQ(bias, (std::vector<runtime::LogitBias>{{7, -100.0f}, {12, 2.5f}}));
}

// ---- end to end ----

// 128 pages of 64 tokens: enough for these tests, and quick to allocate (four servers run here).
runtime::EngineConfig small_cache() {
  runtime::EngineConfig config;
  config.num_pages = 128;
  return config;
}

// A server over the bundled model (6,144 tokens), on the test device.
class StructuredServer {
 public:
  explicit StructuredServer(const std::string& tool_call_parser = "")
      : backend_(backend::make_backend(backend::test_device())),
        model_(model::DeepseekModel::load(bundled_model_dir(), *backend_)),
        tokenizer_(tokenizer::Tokenizer::from_dir(bundled_model_dir())),
        chat_template_(chat::ChatTemplate::from_tokenizer_config(
            Json::parse(read_file(bundled_model_dir() + "/tokenizer_config.json")), bundled_model_dir())),
        engine_(*model_, tokenizer_, small_cache()) {
    ServerOptions options;
    options.served_model_name = "tiny";
    options.tool_call_parser = tool_call_parser;
    options.http.port = 0;
    server_ = std::make_unique<OpenAIServer>(options);
    server_->start();
    server_->attach({&engine_, &tokenizer_, &chat_template_});
  }

  HttpClientResponse post(const std::string& target, const std::string& body) {
    return client_.fetch(json_call(server_->port(), "POST", target, body, 60));
  }
  HttpClientResponse chat(const std::string& fields, const std::string& user = "Tell me about a cat.") {
    return post("/v1/chat/completions",
                str_cat(R"({"model": "tiny", "messages": [{"role": "user", "content": ")", user, R"("}])", fields, "}"));
  }
  HttpClientResponse complete(const std::string& fields, const std::string& prompt = "Once upon a time") {
    return post("/v1/completions", str_cat(R"({"model": "tiny", "prompt": ")", prompt, R"(")", fields, "}"));
  }
  const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }
  void expect_pages_returned() {
    for (int i = 0; i < 5000 && (engine_.stats().running || engine_.stats().waiting); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    runtime::EngineStats stats = engine_.stats();
    EXPECT_EQ(stats.free_pages, stats.total_pages);
  }

 private:
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<model::DeepseekModel> model_;
  tokenizer::Tokenizer tokenizer_;
  chat::ChatTemplate chat_template_;
  runtime::Engine engine_;
  HttpClient client_;
  std::unique_ptr<OpenAIServer> server_;
};

StructuredServer& served() {
  static StructuredServer server;  // one model load for the whole binary
  return server;
}

// A server started with --tool-call-parser `parser` (and without --enable-auto-tool-choice).
StructuredServer& tool_server(const std::string& parser) {
  static std::map<std::string, std::unique_ptr<StructuredServer>> servers;
  std::unique_ptr<StructuredServer>& server = servers[parser];
  if (!server) server = std::make_unique<StructuredServer>(parser);
  return *server;
}

// choices[0] of an answer, after checking it is a 200.
Json first_choice(const HttpClientResponse& response) {
  EXPECT_EQ(response.status, 200) << response.body;
  if (response.status != 200) return Json::object();
  return Json::parse(response.body).find("choices")->at(0);
}

constexpr const char* kPersonSchema = R"({"type": "object",
    "properties": {"name": {"type": "string", "maxLength": 10}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
                   "pet": {"enum": ["cat", "dog", "none"]}},
    "required": ["name", "age", "pet"]})";

TEST(StructuredServerTest, JsonSchemaOutputParsesAndHasTheRequiredKeys) {
  for (const char* temperature : {"0", "1"}) {
    Json choice = first_choice(served().chat(str_cat(R"(, "max_tokens": 400, "seed": 3, "temperature": )", temperature,
                                                     R"(, "response_format": {"type": "json_schema", "json_schema":
                                                         {"name": "person", "strict": true, "schema": )",
                                                     kPersonSchema, "}}")));
    EXPECT_EQ(choice.find("finish_reason")->as_string(), "stop");
    std::string content = choice.find("message")->find("content")->as_string();
    Json person;
    ASSERT_NO_THROW(person = Json::parse(content)) << content;
    ASSERT_TRUE(person.is_object()) << content;
    for (const char* key : {"name", "age", "pet"}) EXPECT_TRUE(person.contains(key)) << key << " in " << content;
    EXPECT_TRUE(person.find("age")->is_int()) << content;
    EXPECT_EQ(person.size(), 3u) << "strict: no other members in " << content;
  }
  // json_object: any object.
  Json choice = first_choice(served().complete(R"(, "max_tokens": 300, "temperature": 0,
                                                 "response_format": {"type": "json_object"})"));
  std::string text = choice.find("text")->as_string();
  const size_t start = text.find_first_not_of(" \n\t\r");
  ASSERT_NE(start, std::string::npos) << text;
  EXPECT_EQ(text[start], '{') << text;
  if (choice.find("finish_reason")->as_string() == "stop") {  // else cut at max_tokens inside a string
    Json object;
    ASSERT_NO_THROW(object = Json::parse(text)) << text;
    EXPECT_TRUE(object.is_object()) << text;
  }
  served().expect_pages_returned();
}

TEST(StructuredServerTest, RegexAndChoiceOutputsFollowTheirGrammar) {
  const std::string pattern = "[A-Z][a-z]{2,6} (is|was) [0-9]{1,3}";
  for (const std::string& fields : {str_cat(R"(, "guided_regex": ")", pattern, R"(")"),
                                   str_cat(R"(, "regex": ")", pattern, R"(")"),
                                   str_cat(R"(, "structured_outputs": {"regex": ")", pattern, R"("})")}) {
    Json choice = first_choice(served().complete(str_cat(R"(, "max_tokens": 40, "temperature": 0.8, "seed": 5)", fields)));
    EXPECT_EQ(choice.find("finish_reason")->as_string(), "stop") << fields;
    std::string text = choice.find("text")->as_string();
    EXPECT_TRUE(std::regex_match(text, std::regex(pattern))) << text;
  }
  const std::vector<std::string> choices = {"red", "green", "blue and yellow"};
  for (int seed = 0; seed < 3; ++seed) {
    Json choice = first_choice(served().chat(
        str_cat(R"(, "max_tokens": 20, "temperature": 1, "seed": )", seed,
                R"(, "structured_outputs": {"choice": ["red", "green", "blue and yellow"]})")));
    EXPECT_EQ(choice.find("finish_reason")->as_string(), "stop");
    std::string content = choice.find("message")->find("content")->as_string();
    EXPECT_NE(std::find(choices.begin(), choices.end(), content), choices.end()) << content;
  }
  served().expect_pages_returned();
}

TEST(StructuredServerTest, StreamingWorksWithAConstraint) {
  const std::string pattern = "(yes|no), [a-z]{3,9}\\.";
  HttpClientResponse response = served().chat(
      str_cat(R"(, "stream": true, "max_tokens": 40, "temperature": 0.7, "seed": 11, "guided_regex": ")",
              "(yes|no), [a-z]{3,9}\\\\.", R"(")"));
  ASSERT_EQ(response.status, 200) << response.body;
  std::vector<std::string> events = sse_events(response.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string content, finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    Json choice = Json::parse(events[i]).find("choices")->at(0);
    if (const Json* text = choice.find("delta")->find("content")) content += text->as_string();
    if (!choice.find("finish_reason")->is_null()) finish = choice.find("finish_reason")->as_string();
  }
  EXPECT_EQ(finish, "stop");
  EXPECT_TRUE(std::regex_match(content, std::regex(pattern))) << content;
  served().expect_pages_returned();
}

TEST(StructuredServerTest, BadGrammarsAndTwoConstraintsAre400s) {
  struct Bad {
    std::string fields;
    const char* param;
    const char* message;  // a substring
  };
  const Bad bad[] = {
      {R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nonsense"}}})",
       "response_format", "nonsense"},
      {R"(, "guided_regex": "[a-z")", "guided_regex", "regex"},
      {R"(, "ebnf": "root ::= undefined_rule")", "ebnf", "grammar"},
      {R"(, "json_schema": "{not json")", "json_schema", "not valid JSON"},
      {R"(, "regex": "a+", "guided_choice": ["a"])", "regex", "only one structured-output constraint"},
  };
  for (const Bad& b : bad) {
    HttpClientResponse response = served().chat(b.fields);
    ASSERT_EQ(response.status, 400) << b.fields << ": " << response.body;
    Json answer = Json::parse(response.body);
    const Json* error = answer.find("error");
    EXPECT_EQ(error->find("param")->as_string(), b.param) << response.body;
    EXPECT_NE(error->find("message")->as_string().find(b.message), std::string::npos) << response.body;
    EXPECT_EQ(error->find("message")->as_string().find(".cc:"), std::string::npos) << response.body;
  }
  served().expect_pages_returned();
}

TEST(StructuredServerTest, LogitBiasForcesAndBansTokens) {
  const std::vector<int32_t> z = served().tokenizer().encode("Z", false);
  ASSERT_EQ(z.size(), 1u);
  Json forced = first_choice(served().complete(
      str_cat(R"(, "max_tokens": 6, "temperature": 1, "seed": 1, "logit_bias": {")", z[0], R"(": 100})")));
  EXPECT_EQ(forced.find("text")->as_string(), "ZZZZZZ");

  // Greedy's first token, then the same request with it banned.
  auto first_token = [](const Json& choice) {
    return choice.find("logprobs")->find("tokens")->at(0).as_string();
  };
  Json plain = first_choice(served().complete(R"(, "max_tokens": 1, "temperature": 0, "logprobs": 0)"));
  std::string greedy = first_token(plain);
  std::vector<int32_t> ids = served().tokenizer().encode(greedy, false);
  ASSERT_EQ(ids.size(), 1u) << greedy;
  Json banned = first_choice(served().complete(
      str_cat(R"(, "max_tokens": 1, "temperature": 0, "logprobs": 0, "logit_bias": {")", ids[0], R"(": -100})")));
  EXPECT_NE(first_token(banned), greedy);

  HttpClientResponse outside = served().complete(R"(, "logit_bias": {"6144": 5})");
  EXPECT_EQ(outside.status, 400) << outside.body;
  EXPECT_NE(outside.body.find("outside the vocabulary"), std::string::npos) << outside.body;
  served().expect_pages_returned();
}

// ---- forced tool calls ----

constexpr const char* kTools = R"(, "tools": [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather of a city.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                     "unit": {"enum": ["celsius", "fahrenheit"]}},
                    "required": ["city", "unit"]}}},
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
     "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 999},
                    "b": {"type": "integer", "minimum": 0, "maximum": 999}}, "required": ["a", "b"]}}}])";

// Each call of an answer's message: a known function whose arguments are JSON with its required keys.
void expect_valid_calls(const Json& message, const std::string& only = "") {
  const Json* calls = message.find("tool_calls");
  ASSERT_TRUE(calls != nullptr && calls->size() >= 1) << message.dump();
  for (const Json& call : calls->as_array()) {
    const std::string& name = call.find("function")->find("name")->as_string();
    if (!only.empty()) {
      EXPECT_EQ(name, only);
    }
    Json arguments;
    ASSERT_NO_THROW(arguments = Json::parse(call.find("function")->find("arguments")->as_string())) << message.dump();
    ASSERT_TRUE(arguments.is_object()) << message.dump();
    if (name == "get_weather") {
      EXPECT_TRUE(arguments.contains("city") && arguments.contains("unit")) << message.dump();
    } else {
      ASSERT_EQ(name, "add");
      EXPECT_TRUE(arguments.find("a") && arguments.find("a")->is_int()) << message.dump();
      EXPECT_TRUE(arguments.find("b") && arguments.find("b")->is_int()) << message.dump();
    }
  }
}

class ForcedToolCalls : public ::testing::TestWithParam<std::string> {};  // the --tool-call-parser

TEST_P(ForcedToolCalls, RequiredAndNamedChoicesGiveValidCallsFromAModelNeverTaughtTools) {
  StructuredServer& server = tool_server(GetParam());
  for (const char* temperature : {"0", "1"}) {
    Json choice = first_choice(server.chat(str_cat(kTools, R"(, "tool_choice": "required", "max_tokens": 300,)",
                                                   R"( "seed": 7, "temperature": )", temperature),
                                           "What is the weather in Paris?"));
    EXPECT_EQ(choice.find("finish_reason")->as_string(), "tool_calls") << choice.dump();
    expect_valid_calls(*choice.find("message"));
  }
  Json named = first_choice(server.chat(str_cat(kTools, R"(, "max_tokens": 300, "temperature": 1, "seed": 2,)",
                                                R"( "tool_choice": {"type": "function", "function": {"name": "add"}})"),
                                        "Add two numbers."));
  EXPECT_EQ(named.find("finish_reason")->as_string(), "tool_calls") << named.dump();
  expect_valid_calls(*named.find("message"), "add");
  EXPECT_EQ(named.find("message")->find("tool_calls")->size(), 1u);

  // Streamed: the named call's arguments, in pieces, make the same valid JSON.
  HttpClientResponse streamed = server.chat(str_cat(kTools, R"(, "stream": true, "max_tokens": 300,)",
                                                    R"( "temperature": 0, "tool_choice": {"type": "function",)",
                                                    R"( "function": {"name": "get_weather"}})"));
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  std::vector<std::string> events = sse_events(streamed.body);
  ASSERT_EQ(events.back(), "[DONE]");
  std::string name, arguments, finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    Json chunk = Json::parse(events[i]).find("choices")->at(0);
    if (!chunk.find("finish_reason")->is_null()) finish = chunk.find("finish_reason")->as_string();
    const Json* calls = chunk.find("delta")->find("tool_calls");
    if (calls == nullptr) continue;
    const Json& function = *calls->at(0).find("function");
    if (const Json* piece = function.find("name")) name += piece->as_string();
    if (const Json* piece = function.find("arguments")) arguments += piece->as_string();
  }
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(name, "get_weather");
  Json parsed;
  ASSERT_NO_THROW(parsed = Json::parse(arguments)) << arguments;
  EXPECT_TRUE(parsed.contains("city") && parsed.contains("unit")) << arguments;
  server.expect_pages_returned();
}

INSTANTIATE_TEST_SUITE_P(EachFormat, ForcedToolCalls, ::testing::Values("deepseek_v3", "deepseek_v31", "kimi_k2"));

TEST(StructuredServerTest, AForcedCallCannotBeCombinedWithAnotherConstraint) {
  HttpClientResponse response = tool_server("deepseek_v3").chat(
      str_cat(kTools, R"(, "tool_choice": "required", "response_format": {"type": "json_object"})"));
  EXPECT_EQ(response.status, 400) << response.body;
  EXPECT_NE(response.body.find("cannot be combined with response_format"), std::string::npos) << response.body;
}

}  // namespace
}  // namespace dsinfer::server
