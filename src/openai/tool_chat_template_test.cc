// templates/deepseek_v3_tools.jinja through our Jinja engine: DeepSeek-V3's own layout where its
// template is right, the tools in the system part, and calls that --tool-call-parser deepseek_v3
// reads back as they were sent.
#include <gtest/gtest.h>

#include <string>

#include "core/file.h"
#include "core/json.h"
#include "core/source_path.h"
#include "openai/tool_call_parser.h"
#include "tokenizer/chat/chat_template.h"

namespace dsinfer::server {
namespace {

const std::string kBos = "<｜begin▁of▁sentence｜>";
const std::string kEos = "<｜end▁of▁sentence｜>";

chat::ChatTemplate tools_template() {
  return chat::ChatTemplate::from_string(read_file(source_path("templates/deepseek_v3_tools.jinja")), kBos, kEos);
}

chat::ChatTemplate official_v3_template() {
  std::string path = source_path("tests/fixtures/tokenizers/deepseek-v3/tokenizer_config.json");
  return chat::ChatTemplate::from_tokenizer_config(Json::parse(read_file(path)), path);
}

Json tools_context() {
  return Json::parse(R"({"tools": [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather of a city.",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "now"}}]})");
}

// Two calls, their two results, and the answer: the one case DeepSeek's own template renders as
// its model was trained (it leaves a single call's section open, and never closes a group of
// results before a user turn).
const char* kTwoCallsAndResults = R"([
  {"role": "system", "content": "Be brief."},
  {"role": "user", "content": "Weather in Paris and Oslo?"},
  {"role": "assistant", "content": null, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
    {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
  {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
  {"role": "tool", "tool_call_id": "call_2", "content": "rain"},
  {"role": "assistant", "content": "Paris: sunny. Oslo: rain."},
  {"role": "user", "content": "Thanks"}])";

TEST(ToolChatTemplate, PlainChatsRenderAsDeepseekV3sTemplate) {
  Json chat = Json::parse(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello"}, {"role": "system", "content": "T"},
    {"role": "user", "content": "2+2?"}])");
  for (bool generation_prompt : {false, true})
    EXPECT_EQ(tools_template().render(chat, generation_prompt), official_v3_template().render(chat, generation_prompt));
  Json calls = Json::parse(kTwoCallsAndResults);
  EXPECT_EQ(tools_template().render(calls, true), official_v3_template().render(calls, true));
}

TEST(ToolChatTemplate, ToolsAreDescribedAfterTheSystemPrompt) {
  Json chat = Json::parse(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])");
  std::string prompt = tools_template().render(chat, true, tools_context());
  const std::string expected_system =
      kBos +
      "Be brief.\n\n## Tools\n\nYou can call these functions:\n"
      "\n### get_weather\nDescription: The weather of a city.\n"
      "Parameters: {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, "
      "\"required\": [\"city\"]}\n"
      "\n### now\n"
      "\nTo call functions, answer with the calls in exactly this layout and nothing after them:\n"
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>FUNCTION_NAME\n```json\n"
      "{\"ARGUMENT\": \"VALUE\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>\n"
      "The arguments are one JSON object that follows the function's parameters. For several calls, put each "
      "<｜tool▁call▁begin｜>...<｜tool▁call▁end｜> on a line of its own inside the one "
      "<｜tool▁calls▁begin｜>...<｜tool▁calls▁end｜>. The results come back as tool outputs; then answer the user.";
  EXPECT_EQ(prompt, expected_system + "<｜User｜>Hi<｜Assistant｜>");
  // Without a system message the tools stand alone.
  std::string alone = tools_template().render(Json::parse(R"([{"role": "user", "content": "Hi"}])"), true,
                                              tools_context());
  EXPECT_TRUE(alone.starts_with(kBos + "## Tools\n\n")) << alone;
}

TEST(ToolChatTemplate, ASingleCallIsClosedAndResultsAreClosedBeforeTheNextUserTurn) {
  Json chat = Json::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "Checking.", "tool_calls": [
      {"id": "c", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "c", "content": "sunny"},
    {"role": "user", "content": "And now?"}])");
  EXPECT_EQ(tools_template().render(chat, true),
            kBos + "<｜User｜>Weather?<｜Assistant｜>Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
                   "<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>" +
                kEos +
                "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>sunny<｜tool▁output▁end｜><｜tool▁outputs▁end｜>"
                "<｜User｜>And now?<｜Assistant｜>");
  // Ending on results: the assistant goes on after them, with no new <｜Assistant｜>.
  chat.as_array().pop_back();
  EXPECT_TRUE(tools_template().render(chat, true).ends_with("sunny<｜tool▁output▁end｜><｜tool▁outputs▁end｜>"));
}

TEST(ToolChatTemplate, RenderedCallsParseBackAsSent) {
  Json chat = Json::parse(kTwoCallsAndResults);
  std::string prompt = tools_template().render(chat, false, tools_context());
  size_t begin = prompt.find("<｜Assistant｜>") + std::string("<｜Assistant｜>").size();
  size_t end = prompt.find(kEos, begin);
  ToolCallParse parse = ToolCallParser("deepseek_v3", {"get_weather"}).parse(prompt.substr(begin, end - begin));
  EXPECT_EQ(parse.error, "");
  EXPECT_EQ(parse.content, "");
  const Json& sent = *chat.at(2).find("tool_calls");
  ASSERT_EQ(parse.calls.size(), sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(parse.calls[i].name, sent.at(i).find("function")->find("name")->as_string());
    EXPECT_EQ(parse.calls[i].arguments, sent.at(i).find("function")->find("arguments")->as_string());
  }
}

}  // namespace
}  // namespace dsinfer::server
