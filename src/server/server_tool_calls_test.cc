// Tool calls end to end on loopback: a scripted stand-in model (scripted_executor.h) writes
// DeepSeek-V3 tool calls, which the bundled model was never trained to write, and the server
// answers with tool_calls, whole and streamed; what it cannot honour is a 400.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/file.h"
#include "core/json.h"
#include "core/source_path.h"
#include "core/strings.h"
#include "server/openai_server.h"
#include "server/scripted_executor.h"
#include "server/server_test_util.h"
#include "tokenizer/chat/chat_template.h"

namespace dsinfer::server {
namespace {

// A server whose model writes `output` for every request: the bundled model's tokenizer, and
// templates/deepseek_v3_tools.jinja as `dsinfer serve --chat-template` loads it.
class ScriptedServer {
 public:
  ScriptedServer(const std::string& output, ServerOptions options)
      : tokenizer_(tokenizer::Tokenizer::from_dir(bundled_model_dir())),
        chat_template_(tools_template()),
        engine_(std::make_unique<ScriptedExecutor>(tokenizer_.vocab_size(), tokenizer_.encode(output, false),
                                                   *tokenizer_.eos_id()),
                tokenizer_, {}) {
    // The test's premise: the script comes back as the very text it was made from.
    EXPECT_EQ(tokenizer_.decode(tokenizer_.encode(output, false)), output);
    options.served_model_name = "tiny";
    options.http.port = 0;
    server_ = std::make_unique<OpenAIServer>(options);
    server_->start();
    server_->attach({&engine_, &tokenizer_, &chat_template_});
  }

  HttpClientResponse chat(const std::string& fields) {
    HttpCall call;
    call.method = "POST";
    call.port = server_->port();
    call.target = "/v1/chat/completions";
    call.body = str_cat(R"({"model": "tiny", "messages": [{"role": "user", "content": "Weather in Paris?"}])", fields,
                        "}");
    call.headers = {{"Content-Type", "application/json"}};
    call.timeout_seconds = 30;
    return client_.fetch(call);
  }

 private:
  static chat::ChatTemplate tools_template() {
    Json config = Json::parse(read_file(bundled_model_dir() + "/tokenizer_config.json"));
    config["chat_template"] = read_file(source_path("templates/deepseek_v3_tools.jinja"));
    return chat::ChatTemplate::from_tokenizer_config(config, "deepseek_v3_tools.jinja");
  }

  tokenizer::Tokenizer tokenizer_;
  chat::ChatTemplate chat_template_;
  runtime::Engine engine_;
  HttpClient client_;
  std::unique_ptr<OpenAIServer> server_;
};

ServerOptions tool_options() {
  ServerOptions options;
  options.reasoning = true;
  options.tool_call_parser = "deepseek_v3";
  options.enable_auto_tool_choice = true;
  return options;
}

constexpr std::string_view kWeatherTool =
    R"(, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])";

const std::string kToolCallOutput =
    "<think>The user wants the weather.</think>\n\nLet me check."
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```"
    "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";

TEST(Server, ToolCallsComeBackAsToolCallsWholeAndStreamed) {
  ScriptedServer served(kToolCallOutput, tool_options());
  HttpClientResponse whole = served.chat(str_cat(kWeatherTool, R"(, "temperature": 0)"));
  ASSERT_EQ(whole.status, 200) << whole.body;
  Json choice = Json::parse(whole.body).find("choices")->at(0);
  EXPECT_EQ(choice.find("finish_reason")->as_string(), "tool_calls");
  const Json* message = choice.find("message");
  EXPECT_EQ(message->find("reasoning_content")->as_string(), "The user wants the weather.");
  EXPECT_EQ(message->find("content")->as_string(), "\n\nLet me check.");
  ASSERT_EQ(message->find("tool_calls")->size(), 1u);
  const Json& call = message->find("tool_calls")->at(0);
  EXPECT_TRUE(call.find("id")->as_string().starts_with("call_"));
  EXPECT_EQ(call.find("type")->as_string(), "function");
  EXPECT_EQ(call.find("function")->find("name")->as_string(), "get_weather");
  EXPECT_EQ(call.find("function")->find("arguments")->as_string(), R"({"city": "Paris"})");

  // Streamed: the same call, announced once (id, type, name, empty arguments), then its arguments.
  HttpClientResponse streamed = served.chat(str_cat(kWeatherTool, R"(, "stream": true)"));
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  std::string reasoning, content, id, name, arguments, finish;
  int announcements = 0;
  std::vector<std::string> events = sse_events(streamed.body);
  ASSERT_EQ(events.back(), "[DONE]");
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    Json chunk_choice = Json::parse(events[i]).find("choices")->at(0);
    if (!chunk_choice.find("finish_reason")->is_null()) finish = chunk_choice.find("finish_reason")->as_string();
    const Json* delta = chunk_choice.find("delta");
    if (const Json* text = delta->find("reasoning_content")) reasoning += text->as_string();
    if (const Json* text = delta->find("content")) content += text->as_string();
    const Json* calls = delta->find("tool_calls");
    if (calls == nullptr) continue;
    ASSERT_EQ(calls->size(), 1u);
    const Json& piece = calls->at(0);
    EXPECT_EQ(piece.find("index")->as_int(), 0);
    if (const Json* call_id = piece.find("id")) {
      ++announcements;
      id = call_id->as_string();
      EXPECT_EQ(piece.find("type")->as_string(), "function");
      name = piece.find("function")->find("name")->as_string();
      EXPECT_EQ(piece.find("function")->find("arguments")->as_string(), "");
    } else {
      EXPECT_EQ(announcements, 1);
      EXPECT_FALSE(piece.find("function")->contains("name"));
      arguments += piece.find("function")->find("arguments")->as_string();
    }
  }
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(reasoning, message->find("reasoning_content")->as_string());
  EXPECT_EQ(content, message->find("content")->as_string());
  EXPECT_EQ(announcements, 1);
  EXPECT_TRUE(id.starts_with("call_"));
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(arguments, R"({"city": "Paris"})");
}

TEST(Server, ParallelToolCallsFalseKeepsOnlyTheFirstCallWholeAndStreamed) {
  const std::string two_calls =
      "<think>Two cities.</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```"
      "<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Rome\"}\n```"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  ScriptedServer served(two_calls, tool_options());
  auto calls_of = [](const HttpClientResponse& response) -> size_t {
    Json answer = Json::parse(response.body);
    const Json* calls = answer.find("choices")->at(0).find("message")->find("tool_calls");
    return calls == nullptr ? 0 : calls->size();
  };
  HttpClientResponse both = served.chat(str_cat(kWeatherTool, R"(, "temperature": 0)"));
  ASSERT_EQ(both.status, 200) << both.body;
  EXPECT_EQ(calls_of(both), 2u);
  HttpClientResponse one = served.chat(str_cat(kWeatherTool, R"(, "temperature": 0, "parallel_tool_calls": false)"));
  ASSERT_EQ(one.status, 200) << one.body;
  ASSERT_EQ(calls_of(one), 1u);
  Json answer = Json::parse(one.body);
  const Json& call = answer.find("choices")->at(0).find("message")->find("tool_calls")->at(0);
  EXPECT_EQ(call.find("function")->find("arguments")->as_string(), R"({"city": "Paris"})");

  HttpClientResponse streamed =
      served.chat(str_cat(kWeatherTool, R"(, "stream": true, "parallel_tool_calls": false)"));
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  std::string arguments;
  std::vector<std::string> events = sse_events(streamed.body);
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    Json chunk = Json::parse(events[i]);
    const Json* calls = chunk.find("choices")->at(0).find("delta")->find("tool_calls");
    if (calls == nullptr) continue;
    for (const Json& piece : calls->as_array()) {
      EXPECT_EQ(piece.find("index")->as_int(), 0);
      arguments += piece.find("function")->find("arguments")->as_string();
    }
  }
  EXPECT_EQ(arguments, R"({"city": "Paris"})");
}

TEST(Server, ToolChoiceNoneAndUnofferedFunctionsLeaveTheTextAsContent) {
  ScriptedServer served(kToolCallOutput, tool_options());
  std::string after_thinking = kToolCallOutput.substr(kToolCallOutput.find("</think>") + 8);
  HttpClientResponse none = served.chat(str_cat(kWeatherTool, R"(, "tool_choice": "none")"));
  ASSERT_EQ(none.status, 200) << none.body;
  Json choice = Json::parse(none.body).find("choices")->at(0);
  EXPECT_EQ(choice.find("message")->find("content")->as_string(), after_thinking);
  EXPECT_FALSE(choice.find("message")->contains("tool_calls"));
  EXPECT_EQ(choice.find("finish_reason")->as_string(), "stop");

  HttpClientResponse other = served.chat(R"(, "tools": [{"type": "function", "function": {"name": "now"}}])");
  ASSERT_EQ(other.status, 200) << other.body;
  choice = Json::parse(other.body).find("choices")->at(0);
  EXPECT_EQ(choice.find("message")->find("content")->as_string(), after_thinking);
  EXPECT_FALSE(choice.find("message")->contains("tool_calls"));
  EXPECT_EQ(choice.find("finish_reason")->as_string(), "stop");
}

TEST(Server, ToolRequestsItCannotHonourAre400s) {
  struct Case {
    const char* name;
    bool server_enabled;
    std::string fields, param, message;
  };
  const std::vector<Case> cases = {
      {"auto on a server without the flags", false, std::string(kWeatherTool), "tool_choice",
       "needs the server to be started with --enable-auto-tool-choice and --tool-call-parser"},
      {"required on a server without a parser", false, str_cat(kWeatherTool, R"(, "tool_choice": "required")"),
       "tool_choice", "needs the server to be started with --tool-call-parser"},
      {"named, not offered", true,
       str_cat(kWeatherTool, R"(, "tool_choice": {"type": "function", "function": {"name": "get_time"}})"),
       "tool_choice", "tool_choice names the function 'get_time', which is not among the tools"},
      {"not a function", true, R"(, "tools": [{"type": "code_interpreter"}])", "tools.[0].type", "must be 'function'"},
      {"no name", true, R"(, "tools": [{"type": "function", "function": {"parameters": {}}}])",
       "tools.[0].function.name", "is required"},
      {"parameters not an object", true,
       R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters": []}}])",
       "tools.[0].function.parameters", "must be an object, got array"},
  };
  ScriptedServer plain(kToolCallOutput, ServerOptions{});
  ScriptedServer enabled(kToolCallOutput, tool_options());
  for (const Case& c : cases) {
    HttpClientResponse response = (c.server_enabled ? enabled : plain).chat(c.fields);
    EXPECT_EQ(response.status, 400) << c.name << ": " << response.body;
    Json error = *Json::parse(response.body).find("error");
    EXPECT_EQ(error.find("type")->as_string(), "invalid_request_error") << c.name;
    EXPECT_EQ(error.find("param")->as_string(), c.param) << c.name;
    EXPECT_NE(error.find("message")->as_string().find(c.message), std::string::npos)
        << c.name << ": " << error.find("message")->as_string();
  }
  // The same server still answers a request without tools.
  EXPECT_EQ(plain.chat("").status, 200);
}

TEST(Server, UnknownToolCallParserIsRefusedAtStart) {
  ServerOptions options;
  options.tool_call_parser = "hermes";
  options.enable_auto_tool_choice = true;
  try {
    OpenAIServer server(options);
    ADD_FAILURE() << "the server started with an unknown parser";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "--tool-call-parser 'hermes' is not known (known: deepseek_v3, deepseek_v31, kimi_k2)");
  }
}

}  // namespace
}  // namespace dsinfer::server
