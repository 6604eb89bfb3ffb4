// The engine's own contract: error messages, the limits that stop hostile templates, and the
// behaviour that goes beyond (or deliberately differs from) transformers' environment.
#include "jinja/template.h"

#include <chrono>
#include <ctime>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"

namespace dsinfer::jinja {
namespace {

std::string render(std::string_view source, const Json& variables = Json::object()) {
  return Template(source).render(variables);
}

std::string error_of(std::string_view source, const RenderLimits& limits = {}) {
  try {
    Template(source).render(Json::object(), limits);
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

TEST(Template, SyntaxErrorsNameTheLine) {
  EXPECT_EQ(error_of("line 1\n{% for x in xs %}\n{% endif %}"), "template syntax error at line 3: unknown tag 'endif'");
  EXPECT_EQ(error_of("{{ x | nope }}"), "template syntax error at line 1: no filter named 'nope'");
  EXPECT_EQ(error_of("\n{{ x is nope }}"), "template syntax error at line 2: no test named 'nope'");
  EXPECT_EQ(error_of("{% if x %}\n\n"), "template syntax error at line 1: unexpected end of template, expected 'elif' or 'else' or 'endif'");
  EXPECT_EQ(error_of("{{ 'open }}"), "template syntax error at line 1: unterminated string literal");
  EXPECT_EQ(error_of("a\n{{ (1 ] }}"), "template syntax error at line 2: unexpected ']', expected ')'");
  EXPECT_EQ(error_of("{% break %}"), "template syntax error at line 1: 'break' outside loop");
  EXPECT_EQ(error_of("{% include 'x' %}"), "template syntax error at line 1: the 'include' tag is not supported in chat templates");
}

TEST(Template, RuntimeErrorsNameTheLine) {
  EXPECT_EQ(error_of("a\n\n{{ 1 // 0 }}"), "template error at line 3: integer division or modulo by zero");
  EXPECT_EQ(error_of("{% for m in [1] %}\n{{ m.content.text }}{% endfor %}"),
            "template error at line 2: 'int object' has no attribute 'content'");
  EXPECT_EQ(error_of("{{ missing.attribute }}"), "template error at line 1: 'missing' is undefined");
  EXPECT_EQ(error_of("{% macro f() %}\n{{ 1 + 'a' }}{% endmacro %}{{ f() }}"),
            "template error at line 2: unsupported operand type(s) for +: 'int' and 'str'");
}

TEST(Template, RaiseExceptionKeepsTheTemplatesMessage) {
  EXPECT_EQ(error_of("{{ raise_exception('Conversation roles must alternate') }}"), "Conversation roles must alternate");
}

TEST(Template, EndlessLoopsStop) {
  constexpr std::string_view kNested =
      "{% for i in range(3000) %}{% for j in range(3000) %}{% for k in range(3000) %}{% endfor %}{% endfor %}"
      "{% endfor %}";
  EXPECT_EQ(error_of(kNested, RenderLimits{.max_steps = 100'000}),
            "template error at line 1: template ran more than 100000 steps (an endless loop?)");
  // With the default limits, as a server meets it: the step count or (in slow sanitizer builds)
  // the clock stops it.
  std::string message = error_of(kNested);
  EXPECT_TRUE(message.find("steps") != std::string::npos || message.find("longer than") != std::string::npos)
      << message;
}

TEST(Template, SlowStepsStopAtTheDeadline) {
  // Each step counts the characters of a 1 MB string: few steps, much time.
  std::string message = error_of(
      "{% set big = 'x' * 1000000 %}{% for i in range(1000000) %}{% if big | length > 0 %}{% endif %}{% endfor %}",
      RenderLimits{.max_time = std::chrono::milliseconds(100)});
  EXPECT_NE(message.find("template ran longer than 100 ms"), std::string::npos) << message;
}

TEST(Template, RunawayRecursionStops) {
  std::string message = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(message.find("recursion deeper than"), std::string::npos) << message;
}

TEST(Template, ExplodingValuesStop) {
  // Doubling a string: each step is cheap, the 27th would be 128 MiB.
  std::string message = error_of(
      "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}");
  EXPECT_NE(message.find("too large"), std::string::npos) << message;
  // Rebuilding a large string over and over exhausts the cumulative budget.
  message = error_of("{% set s = 'x' * 1000000 %}{% for i in range(1000) %}{% set t = s ~ i %}{% endfor %}",
                     RenderLimits{.max_bytes = 100'000'000});
  EXPECT_NE(message.find("bytes of values"), std::string::npos) << message;
  EXPECT_NE(error_of("{{ 'x' * 10000000000 }}").find("too large"), std::string::npos);
  EXPECT_NE(error_of("{{ [1] * 10000000000 }}").find("too large"), std::string::npos);
  EXPECT_NE(error_of("{{ range(10000000000) | length }}").find("too long"), std::string::npos);
  EXPECT_NE(error_of("{{ 'x' | center(10000000000) }}").find("too large"), std::string::npos);
  EXPECT_NE(error_of("{{ 2 ** 64 }}").find("integer overflow"), std::string::npos);
}

TEST(Template, DeepNestingIsASyntaxError) {
  std::string deep = "{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}";
  EXPECT_NE(error_of(deep).find("nesting deeper than"), std::string::npos);
  std::string nots = "{{ " + std::string(0, ' ');
  for (int i = 0; i < 1000; ++i) nots += "not ";
  EXPECT_NE(error_of(nots + "1 }}").find("nesting deeper than"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  EXPECT_NE(error_of(ifs).find("nesting deeper than"), std::string::npos);
}

TEST(Template, SelfReferencesDoNotLeak) {
  // Run under LeakSanitizer (the sanitize build): cycles through namespaces and lists are broken
  // when the render ends.
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me is defined }}"), "True");
  EXPECT_EQ(render("{% set l = [] %}{% set _ = l.append(l) %}{{ l | length }}{{ l[0] | length }}"), "11");
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").find("nested too deeply"),
            std::string::npos);
}

// transformers' sandbox forbids list.append; templates that rely on it render here.
TEST(Template, ListAppendGoesBeyondTransformers) {
  EXPECT_EQ(render("{% set l = [] %}{% for x in range(3) %}{% set _ = l.append(x * 2) %}{% endfor %}{{ l }}"),
            "[0, 2, 4]");
  EXPECT_EQ(render("{% set ns = namespace(items=[]) %}{{ ns.items.append('a') }}{{ ns.items }}"), "None['a']");
  EXPECT_THROW(render("{{ (1, 2).append(3) }}"), Error);
}

TEST(Template, StrftimeNowFormatsTheLocalTime) {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  EXPECT_EQ(render("{{ strftime_now('%Y') }}"), std::to_string(local.tm_year + 1900));
  EXPECT_EQ(render("{{ strftime_now('') }}"), "");
}

TEST(Template, VariablesComeFromJson) {
  Json variables = Json::parse(R"({"n": 3, "f": 2.0, "s": "é", "l": [1, null], "o": {"k": true}, "big": 1e300})");
  EXPECT_EQ(render("{{ n }} {{ f }} {{ s }} {{ l }} {{ o }} {{ big }} [{{ absent }}]", variables),
            "3 2.0 é [1, None] {'k': True} 1e+300 []");
  EXPECT_THROW(render("x", Json::array()), Error);
}

TEST(Template, RendersConcurrently) {
  Template shared("{% set ns = namespace(total=0) %}{% for x in range(n) %}{% set ns.total = ns.total + x %}"
                  "{% endfor %}{{ ns.total }}");
  std::vector<std::string> results(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      Json variables = Json::object();
      variables["n"] = 1000 + i;
      results[static_cast<size_t>(i)] = shared.render(variables);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int i = 0; i < 8; ++i) {
    int64_t n = 1000 + i;
    EXPECT_EQ(results[static_cast<size_t>(i)], std::to_string(n * (n - 1) / 2));
  }
}

}  // namespace
}  // namespace dsinfer::jinja
