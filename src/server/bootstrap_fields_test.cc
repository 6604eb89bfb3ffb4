// SGLang's prefill/decode fields of a request, as each kind of instance reads them.
#include "server/bootstrap_fields.h"

#include <gtest/gtest.h>

#include <string>

#include "openai/openai_errors.h"

namespace dsinfer::server {
namespace {

Json with(const std::string& fields) {
  return Json::parse(R"({"model": "m", "prompt": "hi")" + (fields.empty() ? "" : ", " + fields) + "}");
}

// The 400's param, or "" when the fields were taken.
std::string refused_param(const std::string& fields, InstanceRole role) {
  try {
    bootstrap_fields(with(fields), role);
  } catch (const ProtocolError& error) {
    EXPECT_EQ(error.status(), 400);
    return error.param();
  }
  return "";
}

constexpr const char* kAll = R"("bootstrap_host": "10.0.0.7", "bootstrap_port": 8998, "bootstrap_room": 123456789)";

TEST(BootstrapFields, AnOrdinaryRequestOnAnyInstance) {
  for (InstanceRole role : {InstanceRole::kBoth, InstanceRole::kPrefill, InstanceRole::kDecode}) {
    EXPECT_FALSE(bootstrap_fields(with(""), role).has_value());
    EXPECT_FALSE(bootstrap_fields(with(R"("bootstrap_room": null, "kv_transfer_params": null)"), role).has_value());
  }
}

TEST(BootstrapFields, PrefillAndDecodeInstancesReadTheThree) {
  const BootstrapFields want{"10.0.0.7", 8998, "123456789"};
  EXPECT_EQ(bootstrap_fields(with(kAll), InstanceRole::kPrefill), want);
  EXPECT_EQ(bootstrap_fields(with(kAll), InstanceRole::kDecode), want);
  // A room as a string of digits (a gateway that keeps 64-bit ids out of JSON numbers).
  const auto as_string = bootstrap_fields(
      with(R"("bootstrap_host": "p", "bootstrap_port": 1, "bootstrap_room": "9223372036854775807")"), InstanceRole::kDecode);
  ASSERT_TRUE(as_string.has_value());
  EXPECT_EQ(as_string->room, "9223372036854775807");
}

TEST(BootstrapFields, RefusalsNameTheField) {
  // A server of both phases hears that it is not a prefill or decode instance.
  EXPECT_EQ(refused_param(R"("bootstrap_port": 8998)", InstanceRole::kBoth), "bootstrap_port");
  EXPECT_EQ(refused_param(kAll, InstanceRole::kBoth), "bootstrap_host");
  // vLLM's protocol, on every instance.
  for (InstanceRole role : {InstanceRole::kBoth, InstanceRole::kPrefill, InstanceRole::kDecode})
    EXPECT_EQ(refused_param(R"("kv_transfer_params": {"do_remote_decode": true})", role), "kv_transfer_params");
  // One of the three missing, or malformed.
  EXPECT_EQ(refused_param(R"("bootstrap_host": "p", "bootstrap_port": 1)", InstanceRole::kDecode), "bootstrap_room");
  EXPECT_EQ(refused_param(R"("bootstrap_host": "", "bootstrap_port": 1, "bootstrap_room": 1)", InstanceRole::kPrefill),
            "bootstrap_host");
  EXPECT_EQ(refused_param(R"("bootstrap_host": "p", "bootstrap_port": 70000, "bootstrap_room": 1)", InstanceRole::kDecode),
            "bootstrap_port");
  EXPECT_EQ(refused_param(R"("bootstrap_host": "p", "bootstrap_port": 1, "bootstrap_room": -3)", InstanceRole::kDecode),
            "bootstrap_room");
  EXPECT_EQ(refused_param(R"("bootstrap_host": "p", "bootstrap_port": 1, "bootstrap_room": "12a")", InstanceRole::kDecode),
            "bootstrap_room");
}

TEST(BootstrapFields, OneAnswerARoom) {
  refuse_bootstrap_fanout(1);
  EXPECT_THROW(refuse_bootstrap_fanout(2), ProtocolError);
}

}  // namespace
}  // namespace dsinfer::server
