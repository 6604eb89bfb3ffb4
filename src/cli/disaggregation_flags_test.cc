// The prefill/decode disaggregation flags of serve: SGLang's spellings, our own, and the refusals.
#include "cli/disaggregation_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/serve_flags.h"
#include "cli/flags_testing.h"
#include "core/error.h"

namespace dsinfer::cli {
namespace {

// serve's flags parsed from `args` and checked as serve checks them; then the settings.
DisaggregationSettings settings(std::vector<std::string> args) {
  args.insert(args.begin(), "/m");
  return disaggregation_settings(flag_testing::parsed_serve_flags(std::move(args)));
}

std::string refusal(std::vector<std::string> args) {
  return flag_testing::error_of([&] { settings(std::move(args)); });
}

TEST(DisaggregationFlags, BothPhasesByDefault) {
  const DisaggregationSettings none = settings({});
  EXPECT_EQ(none.role, DisaggregationRole::kNone);
  EXPECT_STREQ(disaggregation_role_name(none.role), "null");
  EXPECT_EQ(settings({"--disaggregation-mode", "null"}).role, DisaggregationRole::kNone);
}

TEST(DisaggregationFlags, SGLangsSpellingsOfAPrefillAndADecodeInstance) {
  const DisaggregationSettings prefill = settings({"--disaggregation-mode", "prefill",
                                                   "--disaggregation-bootstrap-port", "9001",
                                                   "--disaggregation-transfer-backend", "ucx",
                                                   "--disaggregation-ib-device", "mlx5_0,mlx5_1"});
  EXPECT_EQ(prefill.role, DisaggregationRole::kPrefill);
  EXPECT_STREQ(disaggregation_role_name(prefill.role), "prefill");
  EXPECT_EQ(prefill.bootstrap_port, 9001);
  EXPECT_EQ(prefill.ib_devices, "mlx5_0,mlx5_1");
  EXPECT_EQ(prefill.layerwise_threshold, 8192);
  EXPECT_EQ(prefill.bootstrap_timeout.count(), 30'000);
  EXPECT_TRUE(prefill.ucx_transports.empty());

  const DisaggregationSettings decode = settings({"--disaggregation-mode=decode", "--disaggregation-ucx-transports",
                                                  " cuda_ipc, cuda_copy,tcp", "--disaggregation-layerwise-threshold",
                                                  "16k", "--disaggregation-bootstrap-timeout", "5"});
  EXPECT_EQ(decode.role, DisaggregationRole::kDecode);
  EXPECT_EQ(decode.ucx_transports, (std::vector<std::string>{"cuda_ipc", "cuda_copy", "tcp"}));
  EXPECT_EQ(decode.layerwise_threshold, 16000);
  EXPECT_EQ(decode.bootstrap_timeout.count(), 5'000);
}

TEST(DisaggregationFlags, RefusesWhatItCannotHonour) {
  EXPECT_NE(refusal({"--disaggregation-mode", "encode"}).find("'encode' is not known"), std::string::npos);
  EXPECT_NE(refusal({"--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "mooncake"})
                .find("mooncake is not available"),
            std::string::npos);
  // A transfer setting on an instance that transfers nothing is a mistake in the launch script.
  EXPECT_NE(refusal({"--disaggregation-bootstrap-port", "9001"}).find("runs both phases"), std::string::npos);
  EXPECT_NE(refusal({"--disaggregation-layerwise-threshold", "4096"}).find("runs both phases"), std::string::npos);
  EXPECT_NE(refusal({"--disaggregation-mode", "decode", "--disaggregation-bootstrap-timeout", "0"}), "");
}

}  // namespace
}  // namespace dsinfer::cli
