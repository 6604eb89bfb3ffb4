// render_chat_prompt: continue_final_message leaves the last assistant message open, whatever the
// template writes after it, and keeps what the template does to its content.
#include "server/chat_prompt.h"

#include <gtest/gtest.h>

#include <string>

#include "core/file.h"
#include "core/json.h"
#include "core/source_path.h"
#include "core/strings.h"
#include "openai/openai_errors.h"

namespace dsinfer::server {
namespace {

chat::ChatTemplate deepseek_v3_template() {
  const std::string dir = source_path("tests/fixtures/models/v3-tiny");
  return chat::ChatTemplate::from_tokenizer_config(Json::parse(read_file(dir + "/tokenizer_config.json")), dir);
}

ChatCompletionRequest request_of(const std::string& messages, const std::string& extra = "") {
  return parse_chat_request(parse_json_body(str_cat(R"({"messages":)", messages, extra, "}")));
}

constexpr const char* kQuestion = R"([{"role":"system","content":"Be brief."},{"role":"user","content":"2+2?"})";

TEST(ChatPrompt, ContinuingTheFinalMessageLeavesItOpen) {
  chat::ChatTemplate deepseek = deepseek_v3_template();
  // The same text as the conversation before it with the generation prompt, then the partial answer:
  // no end-of-turn after it.
  const std::string opened = render_chat_prompt(deepseek, request_of(str_cat(kQuestion, "]")));
  for (const char* partial : {"The answer is", "Four, because ", ""}) {
    const std::string messages = str_cat(kQuestion, R"(,{"role":"assistant","content":")", partial, R"("}])");
    const std::string continued =
        render_chat_prompt(deepseek, request_of(messages, R"(,"continue_final_message":true)"));
    EXPECT_EQ(continued, opened + partial);
    // Without the flag (and without a new turn), the assistant's turn is closed as the template closes it.
    const std::string closed = render_chat_prompt(deepseek, request_of(messages, R"(,"add_generation_prompt":false)"));
    EXPECT_EQ(closed, continued + "<｜end▁of▁sentence｜>");
  }
}

TEST(ChatPrompt, WhatTheTemplateDoesToTheContentIsKept) {
  // DeepSeek-R1's way: an assistant turn's reasoning, before </think>, is not shown again.
  chat::ChatTemplate r1 = chat::ChatTemplate::from_string(
      "{% for m in messages %}<{{ m.role }}>{% set c = m.content %}"
      "{% if '</think>' in c %}{% set c = c.split('</think>')[-1] %}{% endif %}{{ c }}</{{ m.role }}>{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}",
      "", "");
  const std::string messages =
      R"([{"role":"user","content":"q"},{"role":"assistant","content":"<think>r</think>The "}])";
  EXPECT_EQ(render_chat_prompt(r1, request_of(messages, R"(,"continue_final_message":true)")),
            "<user>q</user><assistant>The ");
}

TEST(ChatPrompt, ATemplateThatDropsTheContentCannotBeContinued) {
  chat::ChatTemplate roles_only =
      chat::ChatTemplate::from_string("{% for m in messages %}<{{ m.role }}>{% endfor %}", "", "");
  const std::string messages = R"([{"role":"user","content":"q"},{"role":"assistant","content":"The"}])";
  try {
    render_chat_prompt(roles_only, request_of(messages, R"(,"continue_final_message":true)"));
    ADD_FAILURE() << "continued a message the template never wrote";
  } catch (const ProtocolError& error) {
    EXPECT_EQ(error.status(), 400);
    EXPECT_EQ(error.param(), "continue_final_message");
    EXPECT_NE(std::string(error.what()).find("does not write the last message's content"), std::string::npos);
  }
}

}  // namespace
}  // namespace dsinfer::server
