// Tool calling on the protocol side: the refusals of `tools` and `tool_choice`, the server flags
// they need, and the tool_calls of an answer, whole and streamed.
#include "openai/openai_tools.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "openai/openai_errors.h"
#include "openai/openai_request.h"
#include "openai/openai_response.h"
#include "openai/openai_stream.h"

namespace dsinfer::server {
namespace {

using runtime::FinishReason;
using runtime::StreamOutput;

#define MSG R"("messages":[{"role":"user","content":"hi"}])"
#define WEATHER R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}})"

const std::string kCallsBegin = "<｜tool▁calls▁begin｜>";
const std::string kCallsEnd = "<｜tool▁calls▁end｜>";

std::string v3_call(const std::string& name, const std::string& arguments) {
  return "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + name + "\n```json\n" + arguments + "\n```<｜tool▁call▁end｜>";
}

ProtocolError chat_refusal(const std::string& body) {
  try {
    parse_chat_request(parse_json_body(body));
  } catch (const ProtocolError& error) {
    return error;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ProtocolError(0, "");
}

TEST(OpenAITools, RefusesMalformedToolsAndForcedCallsNamingTheField) {
  struct Case {
    std::string body, param, message;
  };
  const std::vector<Case> cases = {
      {R"({)" MSG R"(,"tools":"f"})", "tools", "tools must be a list, got string"},
      {R"({)" MSG R"(,"tools":[7]})", "tools.[0]", "tools[0] must be an object, got integer"},
      {R"({)" MSG R"(,"tools":[{"type":"retrieval","function":{"name":"f"}}]})", "tools.[0].type",
       "tools[0].type must be 'function', got 'retrieval'"},
      {R"({)" MSG R"(,"tools":[{"type":"function"}]})", "tools.[0].function", "tools[0].function is required"},
      {R"({)" MSG R"(,"tools":[)" WEATHER R"(,{"type":"function","function":{"description":"x"}}]})",
       "tools.[1].function.name", "tools[1].function.name is required"},
      {R"({)" MSG R"(,"tools":[{"type":"function","function":{"name":""}}]})", "tools.[0].function.name",
       "must not be empty"},
      {R"({)" MSG R"(,"tools":[{"type":"function","function":{"name":"f","parameters":"{}"}}]})",
       "tools.[0].function.parameters", "must be an object, got string"},
      {R"({)" MSG R"(,"tools":[{"type":"function","function":{"name":"f","description":3}}]})",
       "tools.[0].function.description", "must be a string, got integer"},
      {R"({)" MSG R"(,"tools":[{"type":"function","function":{"name":"f","strict":true}}]})",
       "tools.[0].function.strict", "strict = true is not supported yet: arguments that always match the schema need "
                                    "constrained decoding, which comes with structured output (issue 12, item 2)"},
      {R"({)" MSG R"(,"tool_choice":"required"})", "tool_choice", "tool_choice \"required\" needs tools"},
      {R"({)" MSG R"(,"tools":[)" WEATHER R"(],"tool_choice":{"type":"function","function":{"name":"get_time"}}})",
       "tool_choice", "tool_choice names the function 'get_time', which is not among the tools"},
      {R"({)" MSG R"(,"tools":[)" WEATHER R"(],"tool_choice":{"type":"function"}})", "tool_choice.function",
       "tool_choice.function is required"},
      {R"({)" MSG R"(,"tools":[)" WEATHER R"(],"tool_choice":{"type":"function","function":{}}})",
       "tool_choice.function.name", "is required"},
      {R"({)" MSG R"(,"tool_choice":5})", "tool_choice", "must be 'none', 'auto', 'required' or a named function"},
      {R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function"}]}]})",
       "messages.[0].tool_calls.[0].function", "messages[0].tool_calls[0].function is required"},
      {R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]}]})",
       "messages.[0].tool_calls.[0].function.name", "is required"},
      {R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":[1]}}]}]})",
       "messages.[0].tool_calls.[0].function.arguments", "must be a string of JSON, got array"},
  };
  for (const Case& c : cases) {
    ProtocolError error = chat_refusal(c.body);
    EXPECT_EQ(error.status(), 400) << c.body;
    EXPECT_EQ(error.param(), c.param) << c.body;
    EXPECT_NE(std::string(error.what()).find(c.message), std::string::npos)
        << c.body << "\n  message: " << error.what() << "\n  expected to contain: " << c.message;
  }
}

TEST(OpenAITools, ToolChoiceDefaultsToAutoWithToolsAndKeepsTheMarkersInTheText) {
  ChatCompletionRequest with_tools = parse_chat_request(parse_json_body(R"({)" MSG R"(,"tools":[)" WEATHER R"(]})"));
  EXPECT_EQ(with_tools.tool_choice, ToolChoice::kAuto);
  EXPECT_FALSE(with_tools.params.skip_special_tokens);  // the parser must see the call markers
  EXPECT_EQ(with_tools.template_context().dump(), R"({"tools":[)" WEATHER R"(]})");

  ChatCompletionRequest told = parse_chat_request(
      parse_json_body(R"({)" MSG R"(,"tools":[)" WEATHER R"(],"skip_special_tokens":true,"tool_choice":"auto"})"));
  EXPECT_TRUE(told.params.skip_special_tokens);  // the client's word wins

  ChatCompletionRequest none =
      parse_chat_request(parse_json_body(R"({)" MSG R"(,"tools":[)" WEATHER R"(],"tool_choice":"none"})"));
  EXPECT_EQ(none.tool_choice, ToolChoice::kNone);
  EXPECT_TRUE(none.params.skip_special_tokens);
  EXPECT_FALSE(none.template_context().find("tools")->is_null());  // still rendered

  ChatCompletionRequest empty = parse_chat_request(parse_json_body(R"({)" MSG R"(,"tools":[]})"));
  EXPECT_TRUE(empty.tools.is_null());
  EXPECT_EQ(empty.tool_choice, ToolChoice::kNone);
  // An assistant turn may send its arguments as an object; templates write it with tojson.
  parse_chat_request(parse_json_body(
      R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}]})"));
}

TEST(OpenAITools, AutoNeedsTheServerFlags) {
  Json tools = Json::parse(std::string("[") + WEATHER + "]");
  try {
    tool_parsing(tools, ToolChoice::kAuto, "", false);
    ADD_FAILURE() << "auto accepted without --enable-auto-tool-choice";
  } catch (const ProtocolError& error) {
    EXPECT_EQ(error.status(), 400);
    EXPECT_EQ(error.param(), "tool_choice");
    EXPECT_STREQ(error.what(), "tool_choice \"auto\" (the default when tools are given) needs the server to be "
                               "started with --enable-auto-tool-choice and --tool-call-parser (deepseek_v3, "
                               "deepseek_v31, kimi_k2); or send tool_choice \"none\"");
  }
  EXPECT_THROW(tool_parsing(tools, ToolChoice::kAuto, "deepseek_v3", false), ProtocolError);
  EXPECT_FALSE(tool_parsing(tools, ToolChoice::kNone, "", false).enabled());
  EXPECT_FALSE(tool_parsing(Json(), ToolChoice::kAuto, "deepseek_v3", true).enabled());
  ToolParsing parsing = tool_parsing(tools, ToolChoice::kAuto, "deepseek_v3", true);
  EXPECT_EQ(parsing.parser, "deepseek_v3");
  EXPECT_EQ(parsing.offered, std::vector<std::string>{"get_weather"});
}

TEST(OpenAITools, RequiredAndNamedChoicesForceACallWithTheParserAlone) {
  ChatCompletionRequest required =
      parse_chat_request(parse_json_body(R"({)" MSG R"(,"tools":[)" WEATHER R"(],"tool_choice":"required"})"));
  EXPECT_EQ(required.tool_choice, ToolChoice::kRequired);
  EXPECT_EQ(required.tool_choice_function, "");
  EXPECT_FALSE(required.params.skip_special_tokens);
  ChatCompletionRequest named = parse_chat_request(parse_json_body(
      R"({)" MSG R"(,"tools":[)" WEATHER R"(],"tool_choice":{"type":"function","function":{"name":"get_weather"}}})"));
  EXPECT_EQ(named.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(named.tool_choice_function, "get_weather");
  // The call is forced in the parser's format: a parser is needed, --enable-auto-tool-choice is not.
  Json tools = Json::parse(std::string("[") + WEATHER + "]");
  EXPECT_THROW(tool_parsing(tools, ToolChoice::kRequired, "", true), ProtocolError);
  EXPECT_EQ(tool_parsing(tools, ToolChoice::kNamed, "deepseek_v3", false).parser, "deepseek_v3");
}

TEST(OpenAITools, ServerFlagsAreCheckedTogether) {
  EXPECT_NO_THROW(check_tool_flags("", false));
  EXPECT_NO_THROW(check_tool_flags("kimi_k2", true));
  EXPECT_NO_THROW(check_tool_flags("deepseek_v31", false));
  try {
    check_tool_flags("hermes", true);
    ADD_FAILURE() << "an unknown parser was accepted";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "--tool-call-parser 'hermes' is not known (known: deepseek_v3, deepseek_v31, kimi_k2)");
  }
  try {
    check_tool_flags("", true);
    ADD_FAILURE() << "--enable-auto-tool-choice was accepted without a parser";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("--enable-auto-tool-choice needs --tool-call-parser"), std::string::npos);
  }
}

OutputFormat tool_format(std::vector<std::string> offered = {"get_weather"}) {
  OutputFormat format;
  format.tools = {"deepseek_v3", std::move(offered)};
  return format;
}

Generation generation_of(const std::string& text, FinishReason reason) {
  Generation generation;
  StreamOutput output;
  output.text = text;
  output.finished = true;
  output.finish_reason = reason;
  generation.add(output);
  return generation;
}

const ResponseMeta kMeta{"chatcmpl-9", 1700000000, "dsv3"};

TEST(OpenAITools, AnswerCarriesToolCallsAndNullContent) {
  std::string text = kCallsBegin + v3_call("get_weather", R"({"city": "Paris"})") + kCallsEnd;
  Json choice = chat_completion_response(kMeta, generation_of(text, FinishReason::kStop), tool_format())
                    .find("choices")->at(0);
  EXPECT_EQ(choice.find("finish_reason")->as_string(), "tool_calls");
  const Json* message = choice.find("message");
  EXPECT_TRUE(message->find("content")->is_null());
  ASSERT_EQ(message->find("tool_calls")->size(), 1u);
  const Json& call = message->find("tool_calls")->at(0);
  EXPECT_TRUE(call.find("id")->as_string().starts_with("call_"));
  EXPECT_EQ(call.find("type")->as_string(), "function");
  EXPECT_EQ(call.find("function")->dump(), R"({"name":"get_weather","arguments":"{\"city\": \"Paris\"}"})");

  // Cut off after a call: the client learns that more may have followed.
  choice = chat_completion_response(kMeta, generation_of(text + "and", FinishReason::kLength), tool_format())
               .find("choices")->at(0);
  EXPECT_EQ(choice.find("finish_reason")->as_string(), "length");
  EXPECT_EQ(choice.find("message")->find("content")->as_string(), "and");
}

TEST(OpenAITools, PlainTextAndUnofferedFunctionsStayContent) {
  Json message = *chat_completion_response(kMeta, generation_of("Sunny.", FinishReason::kStop), tool_format())
                      .find("choices")->at(0).find("message");
  EXPECT_EQ(message.dump(), R"({"role":"assistant","content":"Sunny."})");

  std::string text = "Hm. " + kCallsBegin + v3_call("rm_rf", "{}") + kCallsEnd;
  Json choice = chat_completion_response(kMeta, generation_of(text, FinishReason::kStop), tool_format())
                    .find("choices")->at(0);
  EXPECT_EQ(choice.find("message")->find("content")->as_string(), text);
  EXPECT_FALSE(choice.find("message")->contains("tool_calls"));
  EXPECT_EQ(choice.find("finish_reason")->as_string(), "stop");
}

TEST(OpenAITools, ReasoningIsSplitOffBeforeTheCallsAreRead) {
  OutputFormat format = tool_format();
  format.reasoning = true;
  // A call written inside the thinking is reasoning, not a call.
  std::string thought = "<think>maybe " + kCallsBegin + v3_call("get_weather", "{}") + kCallsEnd + "</think>";
  std::string text = thought + "\n\n" + kCallsBegin + v3_call("get_weather", R"({"city": "Oslo"})") + kCallsEnd;
  Json message = *chat_completion_response(kMeta, generation_of(text, FinishReason::kStop), format)
                      .find("choices")->at(0).find("message");
  EXPECT_EQ(message.find("reasoning_content")->as_string(),
            "maybe " + kCallsBegin + v3_call("get_weather", "{}") + kCallsEnd);
  EXPECT_EQ(message.find("content")->as_string(), "\n\n");
  ASSERT_EQ(message.find("tool_calls")->size(), 1u);
  EXPECT_EQ(message.find("tool_calls")->at(0).find("function")->find("arguments")->as_string(), R"({"city": "Oslo"})");
}

// The deltas of a stream fed `pieces`, without the role chunk and [DONE].
std::vector<Json> stream_deltas(const OutputFormat& format, const std::vector<std::string>& pieces,
                                std::string* finish_reason) {
  ChatCompletionStream stream(kMeta, format, false);
  std::string body = stream.begin();
  for (size_t i = 0; i < pieces.size(); ++i) {
    StreamOutput output;
    output.text = pieces[i];
    output.finished = i + 1 == pieces.size();
    output.finish_reason = output.finished ? FinishReason::kStop : FinishReason::kNone;
    body += stream.next(output);
  }
  std::vector<Json> deltas;
  for (size_t start = 0, end; (end = body.find("\n\n", start)) != std::string::npos; start = end + 2) {
    std::string data = body.substr(start + 6, end - start - 6);
    if (data == "[DONE]") break;
    Json choice = Json::parse(data).find("choices")->at(0);
    if (!choice.find("finish_reason")->is_null()) *finish_reason = choice.find("finish_reason")->as_string();
    deltas.push_back(*choice.find("delta"));
  }
  deltas.erase(deltas.begin());  // the role chunk
  deltas.pop_back();             // the empty delta of the finish chunk
  return deltas;
}

TEST(OpenAITools, StreamAnnouncesACallThenSendsItsArgumentsInPieces) {
  std::string finish;
  std::vector<Json> deltas = stream_deltas(
      tool_format(), {"Let me look. " + kCallsBegin + "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_wea",
                      "ther\n```json\n{\"city\": ", "\"Paris\"}\n```<｜tool▁call▁end｜>" + kCallsEnd},
      &finish);
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_EQ(deltas.size(), 4u);
  EXPECT_EQ(deltas[0].dump(), R"({"content":"Let me look. "})");
  const Json& announced = deltas[1].find("tool_calls")->at(0);
  EXPECT_EQ(announced.find("index")->as_int(), 0);
  EXPECT_TRUE(announced.find("id")->as_string().starts_with("call_"));
  EXPECT_EQ(announced.find("type")->as_string(), "function");
  EXPECT_EQ(announced.find("function")->dump(), R"({"name":"get_weather","arguments":""})");
  // A blank at the end of a piece may belong to the call's closing: it waits for the next piece.
  EXPECT_EQ(deltas[2].dump(), R"({"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]})");
  EXPECT_EQ(deltas[3].dump(), R"({"tool_calls":[{"index":0,"function":{"arguments":" \"Paris\"}"}}]})");
}

TEST(OpenAITools, StreamSendsAnUnofferedCallAsContent) {
  std::string finish;
  std::string call = kCallsBegin + v3_call("rm_rf", R"({"path": "/"})") + kCallsEnd;
  std::vector<Json> deltas = stream_deltas(tool_format(), {"Ok. ", call.substr(0, 40), call.substr(40)}, &finish);
  EXPECT_EQ(finish, "stop");
  std::string content;
  for (const Json& delta : deltas) {
    EXPECT_FALSE(delta.contains("tool_calls")) << delta.dump();
    content += delta.find("content")->as_string();
  }
  EXPECT_EQ(content, "Ok. " + call);
}

}  // namespace
}  // namespace dsinfer::server
