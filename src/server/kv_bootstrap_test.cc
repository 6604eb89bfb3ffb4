// The disaggregation control plane over loopback: a destination reaches the prefill side's handler,
// a refused one comes back with the handler's reason, and an unreachable prefill instance is an
// error for the decode side, never a hang.
#include "server/kv_bootstrap.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"

namespace dsinfer::server {
namespace {

// Posts `body` and waits for the answer (10 s at most).
std::string post(KvBootstrapClient& client, uint16_t port, std::string body) {
  auto answer = std::make_shared<std::promise<std::string>>();
  std::future<std::string> result = answer->get_future();
  client.post_destination("127.0.0.1", port, std::move(body), [answer](std::string error) { answer->set_value(error); });
  EXPECT_EQ(result.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  return result.get();
}

TEST(KvBootstrap, DestinationsReachThePrefillSideAndRefusalsComeBack) {
  std::mutex mutex;
  std::vector<std::string> taken;
  KvBootstrapServer server("127.0.0.1", 0, [&](std::string_view body) {
    if (body == "bad") throw Error("the destination does not parse");
    std::lock_guard lock(mutex);
    taken.emplace_back(body);
  });
  server.start();
  KvBootstrapClient client;
  EXPECT_EQ(post(client, server.port(), R"({"room": "7"})"), "");
  EXPECT_EQ(post(client, server.port(), R"({"room": "8"})"), "");
  const std::string refused = post(client, server.port(), "bad");
  EXPECT_NE(refused.find("answered 400"), std::string::npos) << refused;
  EXPECT_NE(refused.find("the destination does not parse"), std::string::npos) << refused;
  std::lock_guard lock(mutex);
  EXPECT_EQ(taken, (std::vector<std::string>{R"({"room": "7"})", R"({"room": "8"})"}));
}

TEST(KvBootstrap, AnUnreachablePrefillInstanceIsAnError) {
  uint16_t closed_port = 0;
  {
    KvBootstrapServer server("127.0.0.1", 0, [](std::string_view) {});
    server.start();
    closed_port = server.port();
  }
  KvBootstrapClient client(2.0);
  const std::string error = post(client, closed_port, "{}");
  EXPECT_NE(error.find("bootstrap at 127.0.0.1:"), std::string::npos) << error;
}

TEST(KvBootstrap, OnlyItsTwoRoutes) {
  KvBootstrapServer server("127.0.0.1", 0, [](std::string_view) {});
  server.start();
  HttpClient http;
  HttpCall health;
  health.method = "GET";
  health.port = server.port();
  health.target = "/health";
  EXPECT_EQ(http.fetch(health).status, 200);
  HttpCall other = health;
  other.target = "/v1/completions";
  EXPECT_EQ(http.fetch(other).status, 404);
  HttpCall wrong_method = health;
  wrong_method.target = "/kv_destination";
  EXPECT_EQ(http.fetch(wrong_method).status, 405);
}

}  // namespace
}  // namespace dsinfer::server
