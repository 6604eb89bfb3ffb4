// DisconnectRelay: one registration with the transport, and the last on_disconnect call wins.
#include "server/disconnect_relay.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dsinfer::server {
namespace {

// The transport's side: keeps every registration, and the test says when the client leaves.
class RecordingResponder final : public HttpResponder {
 public:
  void respond(int, std::string, std::string, Headers) override {}
  void start_stream(int, std::string, Headers) override {}
  void send_chunk(std::string data) override { chunks.push_back(std::move(data)); }
  void finish_stream() override {}
  void on_disconnect(std::function<void()> callback) override { registered.push_back(std::move(callback)); }

  std::vector<std::function<void()>> registered;
  std::vector<std::string> chunks;
};

TEST(DisconnectRelay, TheLastRegistrationIsTheOneThatRuns) {
  auto transport = std::make_shared<RecordingResponder>();
  DisconnectRelay relay(transport);
  std::vector<std::string> ran;
  relay.on_disconnect([&] { ran.push_back("skip the preparation"); });
  relay.on_disconnect([&] { ran.push_back("abort the engine requests"); });
  relay.send_chunk("data: x\n\n");
  ASSERT_EQ(transport->registered.size(), 1u) << "one registration with the transport, made at once";
  EXPECT_EQ(transport->chunks, std::vector<std::string>{"data: x\n\n"});
  transport->registered[0]();  // the client leaves
  EXPECT_EQ(ran, std::vector<std::string>{"abort the engine requests"});
  transport->registered[0]();  // a second report changes nothing
  EXPECT_EQ(ran.size(), 1u);
}

TEST(DisconnectRelay, ARegistrationAfterTheClientLeftRunsAtOnce) {
  auto transport = std::make_shared<RecordingResponder>();
  DisconnectRelay relay(transport);
  transport->registered[0]();
  bool ran = false;
  relay.on_disconnect([&] { ran = true; });
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace dsinfer::server
