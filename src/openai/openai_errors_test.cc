#include "openai/openai_errors.h"

#include <gtest/gtest.h>

#include "core/json.h"

namespace dsinfer::server {
namespace {

TEST(OpenAIErrors, BodyHasOpenAIsShapeWithNullsForMissingFields) {
  EXPECT_EQ(error_body(400, "bad"), R"({"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}})");
  EXPECT_EQ(error_body(500, "boom"), R"({"error":{"message":"boom","type":"server_error","param":null,"code":null}})");
  EXPECT_EQ(error_body(400, "t", "", "temperature", "x"),
            R"({"error":{"message":"t","type":"invalid_request_error","param":"temperature","code":"x"}})");
}

TEST(OpenAIErrors, ProtocolErrorIsADsinferError) {
  try {
    throw invalid_request("n > 1 is not supported yet", "n");
  } catch (const Error& error) {
    const auto* protocol = dynamic_cast<const ProtocolError*>(&error);
    ASSERT_NE(protocol, nullptr);
    EXPECT_EQ(protocol->status(), 400);
    EXPECT_EQ(protocol->param(), "n");
    Json body = Json::parse(error_body(*protocol));
    EXPECT_EQ(body.find("error")->find("message")->as_string(), "n > 1 is not supported yet");
    EXPECT_EQ(body.find("error")->find("param")->as_string(), "n");
  }
}

TEST(OpenAIErrors, CommonRefusals) {
  struct Case {
    ProtocolError error;
    int status;
    const char* type;
    const char* code;
  };
  const Case cases[] = {
      {model_not_found("gpt-9"), 404, "invalid_request_error", "model_not_found"},
      {missing_api_key(), 401, "invalid_request_error", ""},
      {invalid_api_key(), 401, "invalid_request_error", "invalid_api_key"},
      {route_not_found("POST", "/v1/nope"), 404, "invalid_request_error", ""},
      {method_not_allowed("GET", "/v1/completions"), 405, "invalid_request_error", ""},
      {server_not_ready(), 503, "server_error", ""},
      {internal_error("out of pages"), 500, "server_error", ""},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.error.status(), c.status) << c.error.what();
    EXPECT_EQ(c.error.type(), c.type) << c.error.what();
    EXPECT_EQ(c.error.code(), c.code) << c.error.what();
  }
  EXPECT_STREQ(model_not_found("gpt-9").what(), "The model `gpt-9` does not exist.");
  EXPECT_STREQ(route_not_found("POST", "/v1/nope").what(), "Invalid URL (POST /v1/nope)");
}

}  // namespace
}  // namespace dsinfer::server
