#include "core/json.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace dsinfer {
namespace {

TEST(Json, ParsesEveryType) {
  Json value = Json::parse(
      R"({"a": 1, "b": -2.5e1, "c": "x\ny\u00e9\ud83d\ude00", "d": [true, false, null], "e": {}})");
  ASSERT_TRUE(value.is_object());
  EXPECT_EQ(value.size(), 5u);
  EXPECT_EQ(value.find("a")->as_int(), 1);
  EXPECT_TRUE(value.find("a")->is_int());
  EXPECT_DOUBLE_EQ(value.find("b")->as_double(), -25.0);
  EXPECT_EQ(value.find("c")->as_string(), "x\ny\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_TRUE(value.find("d")->at(0).as_bool());
  EXPECT_TRUE(value.find("d")->at(2).is_null());
  EXPECT_TRUE(value.find("e")->is_object());
  EXPECT_EQ(value.find("missing"), nullptr);
}

TEST(Json, KeepsMemberOrderAndRoundTrips) {
  std::string text = R"({"z":1,"a":[1,2.5,"s"],"m":{"k":null}})";
  EXPECT_EQ(Json::parse(text).dump(), text);
  Json built;
  built["second"] = 2;
  built["first"] = "one";
  built["list"].push_back(Json(true));
  EXPECT_EQ(built.dump(), R"({"second":2,"first":"one","list":[true]})");
  EXPECT_EQ(built.dump(2), "{\n  \"second\": 2,\n  \"first\": \"one\",\n  \"list\": [\n    true\n  ]\n}");
}

TEST(Json, EscapesOnDump) {
  Json value(std::string("q\"\\\x01\xc3\xa9"));
  EXPECT_EQ(value.dump(), "\"q\\\"\\\\\\u0001\xc3\xa9\"");
  EXPECT_EQ(value.dump(-1, true), "\"q\\\"\\\\\\u0001\\u00e9\"");
  EXPECT_EQ(Json(std::string("\xf0\x9f\x98\x80")).dump(-1, true), "\"\\ud83d\\ude00\"");
  EXPECT_EQ(Json(std::string("bad\xff")).dump(), "\"bad\xef\xbf\xbd\"");  // invalid UTF-8 replaced
  EXPECT_EQ(Json(1.0).dump(), "1.0");
  EXPECT_EQ(Json(0.1).dump(), "0.1");
}

TEST(Json, ErrorsNameLineAndColumn) {
  try {
    Json::parse("{\n  \"a\": tru\n}");
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("line 2, column 8"), std::string::npos) << error.what();
  }
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "\"unterminated", "01", "1.", "-", "[1] x",
                          "\"\\x\"", "{\"a\":1,}", "\"\x01\""}) {
    EXPECT_THROW(Json::parse(bad), Error) << bad;
  }
  EXPECT_THROW(Json::parse(std::string(100000, '[')), Error);  // depth limit, not a crash
}

TEST(Json, TypeMismatchIsAnError) {
  Json value = Json::parse(R"({"n": "text", "f": 2.0, "g": 2.5})");
  EXPECT_THROW(value.find("n")->as_int(), Error);
  EXPECT_EQ(value.find("f")->as_int(), 2);
  EXPECT_THROW(value.find("g")->as_int(), Error);
  EXPECT_THROW(value.as_array(), Error);
}

TEST(Json, LargeIntegersStayExact) {
  EXPECT_EQ(Json::parse("9007199254740993").as_int(), 9007199254740993LL);
  EXPECT_TRUE(Json::parse("1e400").as_double() > 1e300);
}

}  // namespace
}  // namespace dsinfer
