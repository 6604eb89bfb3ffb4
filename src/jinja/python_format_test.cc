// Python's spelling of numbers and strings, checked against CPython's repr() and json.dumps.
#include "jinja/python_format.h"

#include <gtest/gtest.h>

#include <limits>

namespace dsinfer::jinja {
namespace {

TEST(PythonFormat, FloatsLikeRepr) {
  // Expected strings from CPython 3.11's repr().
  const std::pair<double, const char*> cases[] = {
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {1.0, "1.0"},
      {0.1, "0.1"},
      {1e16, "1e+16"},
      {1e15, "1000000000000000.0"},
      {123456789012345678.0, "1.2345678901234568e+17"},
      {1e-4, "0.0001"},
      {1.5e-4, "0.00015"},
      {1e-5, "1e-05"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {3.14159, "3.14159"},
      {100.0, "100.0"},
      {1e22, "1e+22"},
      {12345.678e10, "123456780000000.0"},
      {-2.5e-7, "-2.5e-07"},
      {9007199254740992.0, "9007199254740992.0"},
      {1.0 / 3, "0.3333333333333333"},
      {std::numeric_limits<double>::infinity(), "inf"},
      {-std::numeric_limits<double>::infinity(), "-inf"},
      {std::numeric_limits<double>::quiet_NaN(), "nan"},
  };
  for (const auto& [value, expected] : cases) EXPECT_EQ(format_float(value), expected);
}

TEST(PythonFormat, StringsLikeRepr) {
  auto quoted = [](std::string_view text) {
    std::string out;
    append_quoted(out, text);
    return out;
  };
  EXPECT_EQ(quoted("plain"), "'plain'");
  EXPECT_EQ(quoted("it's"), "\"it's\"");
  EXPECT_EQ(quoted("it's \"x\""), "'it\\'s \"x\"'");
  EXPECT_EQ(quoted("tab\tnew\nline\\"), "'tab\\tnew\\nline\\\\'");
  EXPECT_EQ(quoted("\x01\x7f\xc2\xa0\xe2\x80\x8b"), "'\\x01\\x7f\\xa0\\u200b'");
  EXPECT_EQ(quoted("é 😀 中"), "'é 😀 中'");
}

TEST(PythonFormat, JsonLikeJsonDumps) {
  Value value = from_json(Json::parse(R"({"a": [1, 2.0, null, true], "é": {"k": "v\n"}, "e": {}})"));
  EXPECT_EQ(to_json(value, JsonStyle{}), R"({"a": [1, 2.0, null, true], "é": {"k": "v\n"}, "e": {}})");
  JsonStyle indented;
  indented.indented = true;
  indented.indent = "  ";
  indented.item_separator = ",";
  EXPECT_EQ(to_json(value, indented),
            "{\n  \"a\": [\n    1,\n    2.0,\n    null,\n    true\n  ],\n  \"é\": {\n    \"k\": \"v\\n\"\n  },\n"
            "  \"e\": {}\n}");
  JsonStyle ascii;
  ascii.ensure_ascii = true;
  EXPECT_EQ(to_json(Value("é😀"), ascii), R"("\u00e9\ud83d\ude00")");
}

}  // namespace
}  // namespace dsinfer::jinja
