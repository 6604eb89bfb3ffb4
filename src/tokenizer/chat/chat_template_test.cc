// Whole conversations through real and hand-written chat templates, against transformers'
// apply_chat_template (tools/make_chat_fixtures.py), and the tokenizer_config.json entry points.
#include "tokenizer/chat/chat_template.h"

#include <gtest/gtest.h>

#include "jinja/test_fixtures.h"

namespace dsinfer::chat {
namespace {

using jinja::load_json;

constexpr std::string_view kRenderings = "tests/fixtures/chat/renderings.json";
constexpr std::string_view kDeepSeekConfig = "tests/fixtures/tokenizers/deepseek-v3/tokenizer_config.json";

// Renders one fixture case and checks it; `chat_template` stands in for the case's own template.
void check_case(const ChatTemplate& chat_template, const Json& test_case) {
  const Json& messages = *test_case.find("messages");
  bool add_generation_prompt = test_case.find("add_generation_prompt")->as_bool();
  const Json& extra = *test_case.find("extra");
  if (test_case.contains("error")) {
    try {
      chat_template.render(messages, add_generation_prompt, extra);
      ADD_FAILURE() << "expected an error like transformers' (" << test_case.find("message")->as_string() << ")";
    } catch (const Error& error) {
      // raise_exception's message reaches the caller unchanged.
      EXPECT_EQ(error.what(), test_case.find("message")->as_string());
    }
    return;
  }
  try {
    EXPECT_EQ(chat_template.render(messages, add_generation_prompt, extra), test_case.find("expected")->as_string());
  } catch (const Error& error) {
    ADD_FAILURE() << "unexpected error: " << error.what();
  }
}

TEST(ChatTemplate, RendersLikeTransformers) {
  Json fixture = load_json(kRenderings);
  const Json& templates = *fixture.find("templates");
  const Json::Array& cases = fixture.find("cases")->as_array();
  ASSERT_GE(cases.size(), 40u);
  for (const Json& test_case : cases) {
    SCOPED_TRACE(test_case.find("name")->as_string());
    ChatTemplate chat_template = ChatTemplate::from_string(
        templates.find(test_case.find("template")->as_string())->as_string(),
        test_case.find("bos_token")->as_string(), test_case.find("eos_token")->as_string());
    check_case(chat_template, test_case);
  }
}

TEST(ChatTemplate, DeepSeekTokenizerConfigRendersLikeTransformers) {
  ChatTemplate chat_template =
      ChatTemplate::from_tokenizer_config(load_json(kDeepSeekConfig), "deepseek-v3/tokenizer_config.json");
  Json fixture = load_json(kRenderings);
  int checked = 0;
  for (const Json& test_case : fixture.find("cases")->as_array()) {
    if (test_case.find("template")->as_string() != "deepseek_v3") continue;
    SCOPED_TRACE(test_case.find("name")->as_string());
    check_case(chat_template, test_case);
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

TEST(ChatTemplate, NamedTemplateListUsesDefault) {
  Json config = Json::parse(R"({
    "chat_template": [{"name": "tool_use", "template": "tools"}, {"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}"}],
    "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
    "eos_token": "</s>"})");
  ChatTemplate chat_template = ChatTemplate::from_tokenizer_config(config, "config.json");
  EXPECT_EQ(chat_template.render(Json::parse(R"([{"role": "user", "content": "hi"}])"), false), "<s>hi");
}

TEST(ChatTemplate, ConfigErrorsNameTheSource) {
  auto error_of = [](std::string_view text) {
    try {
      ChatTemplate::from_tokenizer_config(Json::parse(text), "model/tokenizer_config.json");
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(R"({"bos_token": "<s>"})"), "model/tokenizer_config.json: chat_template is missing");
  EXPECT_EQ(error_of(R"({"chat_template": [{"name": "rag", "template": "x"}]})"),
            "model/tokenizer_config.json: chat_template has no template named \"default\"");
  EXPECT_EQ(error_of(R"({"chat_template": "{% if %}"})"), "template syntax error at line 1: expected an expression, got end of statement block");
}

TEST(ChatTemplate, MissingSpecialTokensStayUndefined) {
  Json config = Json::parse(R"({"chat_template": "{{ bos_token is defined }} {{ eos_token }}", "eos_token": null})");
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(config, "c").render(Json::array(), false), "False ");
}

TEST(ChatTemplate, VariablesMatchApplyChatTemplate) {
  ChatTemplate chat_template = ChatTemplate::from_string(
      "{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }} {{ messages | length }} "
      "{{ enable_thinking }} {{ bos_token }}",
      "<s>", "</s>");
  Json messages = Json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(chat_template.render(messages, true), "True True True 1  <s>");
  // Extra variables arrive as top-level names; they cannot replace messages or the prompt flag.
  Json extra = Json::parse(R"({"enable_thinking": false, "tools": [], "messages": [], "add_generation_prompt": false,
                               "bos_token": "<B>"})");
  EXPECT_EQ(chat_template.render(messages, true, extra), "False True True 1 False <B>");
}

TEST(ChatTemplate, RejectsMalformedArguments) {
  ChatTemplate chat_template = ChatTemplate::from_string("x", "", "");
  EXPECT_THROW(chat_template.render(Json::object(), false), Error);
  EXPECT_THROW(chat_template.render(Json::array(), false, Json::array()), Error);
}

}  // namespace
}  // namespace dsinfer::chat
