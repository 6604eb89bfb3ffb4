// dsinfer router's command line (router_flags.h): SGLang's --prefill URL [PORT] and --decode URL,
// the router's own flags into RouterOptions, and the refusals of a bad command line.
#include "cli/router_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/flags_testing.h"
#include "core/error.h"

namespace dsinfer::cli {
namespace {

std::optional<router::RouterOptions> parsed(std::vector<std::string> args, const char* api_key = nullptr) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return router_options(static_cast<int>(argv.size()), argv.data(), api_key);
}

// The message of the Error that parsing `args` throws ("" when none).
std::string refusal(std::vector<std::string> args) {
  return flag_testing::error_of([&] { parsed(std::move(args)); });
}

TEST(RouterFlags, PrefillUrlsTakeAnOptionalBootstrapPortAsSglangsRouterDoes) {
  const auto options = parsed({"--pd-disaggregation", "--prefill", "http://p1:30001", "8998", "--prefill",
                               "http://p2:30001", "--decode", "http://d1:30002", "--port", "9000", "--prefill",
                               "http://p3:30001", "none", "--decode=http://d2:30002", "--prefill=http://p4:1"});
  ASSERT_TRUE(options.has_value());
  const std::vector<router::WorkerSpec>& workers = options->workers;
  ASSERT_EQ(workers.size(), 6u);
  EXPECT_EQ(workers[0].role, router::WorkerRole::kPrefill);
  EXPECT_EQ(workers[0].url, "http://p1:30001");
  EXPECT_EQ(workers[0].bootstrap_port, 8998);
  EXPECT_FALSE(workers[1].bootstrap_port.has_value());
  EXPECT_EQ(workers[2].role, router::WorkerRole::kDecode);
  EXPECT_EQ(workers[3].url, "http://p3:30001");
  EXPECT_FALSE(workers[3].bootstrap_port.has_value());
  EXPECT_EQ(workers[4].url, "http://d2:30002");
  EXPECT_EQ(workers[5].url, "http://p4:1");
  EXPECT_EQ(options->http.port, 9000);
}

TEST(RouterFlags, TheRoutersFlagsBecomeItsOptions) {
  const auto defaults = parsed({"--prefill", "http://p:1", "--decode", "http://d:2"}, "from-env");
  ASSERT_TRUE(defaults.has_value());
  EXPECT_EQ(defaults->http.port, 8000);
  EXPECT_FALSE(defaults->registry.decode_slots.has_value());
  EXPECT_EQ(defaults->health.interval, std::chrono::seconds(5));
  EXPECT_EQ(defaults->health.api_key, "from-env");
  EXPECT_EQ(defaults->decode_absorbs_below, 0u);
  EXPECT_EQ(defaults->max_retries, 1);

  const auto options = parsed({"--prefill", "http://p:1", "--decode", "http://d:2", "--decode-slots", "64",
                               "--queue-size", "10", "--queue-timeout-secs", "2.5", "--health-check-interval-secs",
                               "0.5", "--decode-absorbs-below", "400", "--balance-abs-threshold", "8",
                               "--balance-rel-threshold", "2", "--max-retries", "0", "--api-key", "k",
                               "--scale-out-window", "10", "--request-timeout", "30", "--send-timeout", "7"},
                              "from-env");
  ASSERT_TRUE(options.has_value());
  EXPECT_EQ(options->registry.decode_slots, 64);
  EXPECT_EQ(options->max_queued_requests, 10u);
  EXPECT_EQ(options->queue_timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(options->health.interval, std::chrono::milliseconds(500));
  EXPECT_EQ(options->decode_absorbs_below, 400u);
  EXPECT_EQ(options->balance.absolute, 8);
  EXPECT_DOUBLE_EQ(options->balance.relative, 2.0);
  EXPECT_EQ(options->max_retries, 0);
  EXPECT_EQ(options->health.api_key, "k");
  EXPECT_EQ(options->scale_out_window, std::chrono::seconds(10));
  EXPECT_DOUBLE_EQ(options->request_timeout_seconds, 30.0);
  EXPECT_EQ(options->http.send_timeout, std::chrono::seconds(7));
}

TEST(RouterFlags, ABadCommandLineIsRefusedWithWhatIsWrong) {
  EXPECT_NE(refusal({"--decode", "http://d:2"}).find("at least one prefill and one decode"), std::string::npos);
  EXPECT_NE(refusal({"--prefill", "http://p:1"}).find("at least one prefill and one decode"), std::string::npos);
  EXPECT_NE(refusal({"--prefill", "--decode", "http://d:2"}).find("--prefill needs a URL"), std::string::npos);
  EXPECT_NE(refusal({"--prefill", "p:1", "--decode", "http://d:2"}).find("--prefill: URL p:1"), std::string::npos);
  EXPECT_NE(refusal({"--prefill", "http://p:1", "nine", "--decode", "http://d:2"}).find("bootstrap port"),
            std::string::npos);
  EXPECT_NE(refusal({"--prefill", "http://p:1", "70000", "--decode", "http://d:2"}).find("from 1 to 65535"),
            std::string::npos);
  EXPECT_NE(refusal({"--prefill", "http://p:1", "--decode", "http://d:2", "http://d:3"}).find("one URL"),
            std::string::npos);
  EXPECT_NE(refusal({"--prefill", "http://p:1", "--decode", "http://d:2", "--decode-slots", "0"}).find("decode-slots"),
            std::string::npos);
  EXPECT_NE(refusal({"--prefill", "http://p:1", "--decode", "http://d:2", "--balance-rel-threshold", "0.5"})
                .find("balance-rel-threshold"),
            std::string::npos);
  EXPECT_NE(refusal({"--prefill", "http://p:1", "--decode", "http://d:2", "--policy", "x"}).find("policy"),
            std::string::npos);
}

TEST(RouterFlags, HelpListsTheWorkerFlags) {
  testing::internal::CaptureStdout();
  EXPECT_FALSE(parsed({"--help"}).has_value());
  const std::string help = testing::internal::GetCapturedStdout();
  EXPECT_NE(help.find("--prefill"), std::string::npos);
  EXPECT_NE(help.find("--decode-absorbs-below"), std::string::npos);
  EXPECT_NE(help.find("--health-check-interval-secs"), std::string::npos);
}

}  // namespace
}  // namespace dsinfer::cli
