// Template snippets (expressions, filters, tests, statements, whitespace control) against the
// outputs jinja2 gave them in transformers' environment (tools/make_chat_fixtures.py).
#include <gtest/gtest.h>

#include "jinja/template.h"
#include "jinja/test_fixtures.h"

namespace dsinfer::jinja {
namespace {

TEST(ChatExpressions, RenderLikeJinja2) {
  Json fixture = load_json("tests/fixtures/chat/expressions.json");
  const Json& context = *fixture.find("context");
  const Json::Array& cases = fixture.find("cases")->as_array();
  ASSERT_GE(cases.size(), 150u);
  for (const Json& test_case : cases) {
    const std::string& source = test_case.find("template")->as_string();
    SCOPED_TRACE(source);
    if (test_case.contains("error")) {
      // jinja2 raised; we must raise dsinfer::Error (and nothing else), with a one-line message.
      try {
        std::string output = Template(source).render(context);
        ADD_FAILURE() << "expected an error like jinja2's (" << test_case.find("message")->as_string()
                      << "), rendered: " << output;
      } catch (const Error& error) {
        EXPECT_EQ(std::string(error.what()).find('\n'), std::string::npos) << error.what();
      }
      continue;
    }
    try {
      EXPECT_EQ(Template(source).render(context), test_case.find("expected")->as_string());
    } catch (const Error& error) {
      ADD_FAILURE() << "unexpected error: " << error.what();
    }
  }
}

}  // namespace
}  // namespace dsinfer::jinja
