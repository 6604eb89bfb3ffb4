// The HTTP transport's streamed responses on loopback: chunks that arrive as they are sent, clients
// that leave (before the answer, mid-stream), shutdown with open streams, and 2000 concurrent streams.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "http/http.h"
#include "http/http_test_util.h"

namespace dsinfer::server {
namespace {

using namespace std::chrono_literals;
using namespace http_test;

TEST(HttpServerTest, StreamedChunksArriveAsTheyAreSent) {
  std::vector<std::thread> writers;
  HttpServer server(test_options(), [&](const HttpRequest&, std::shared_ptr<HttpResponder> responder) {
    responder->start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    responder->send_chunk("data: first\n\n");
    writers.emplace_back([responder] {  // the engine's side: another thread, later
      std::this_thread::sleep_for(300ms);
      responder->send_chunk("data: second\n\n");
      responder->finish_stream();
    });
  });
  server.start();
  HttpClient client;
  const auto start = Clock::now();
  std::vector<std::pair<double, std::string>> pieces;  // seconds since start, bytes
  HttpCall call = call_to(server, "POST", "/v1/chat/completions", "{}");
  call.on_data = [&](std::string_view piece) {
    pieces.emplace_back(seconds_since(start), std::string(piece));
  };
  const HttpClientResponse response = client.fetch(call);
  const double finished = seconds_since(start);
  for (auto& writer : writers) writer.join();

  EXPECT_EQ(response.error, "");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(find_header(response, "transfer-encoding"), "chunked");
  EXPECT_EQ(response.body, "");  // delivered through on_data instead
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].second, "data: first\n\n");
  EXPECT_EQ(pieces[1].second, "data: second\n\n");
  EXPECT_LT(pieces[0].first, finished - 0.2) << "the first chunk waited for the end of the stream";
}

// A stream started by the handler and fed by another thread that sends before the handler returns
// (as a loaded machine can schedule them): the chunks used to overtake start_stream, whose post Asio
// held until the handler returned, and were dropped as sent before the stream.
TEST(HttpServerTest, ChunksSentWhileTheHandlerRunsFollowItsStreamStart) {
  std::vector<std::thread> writers;
  HttpServer server(test_options(), [&](const HttpRequest&, std::shared_ptr<HttpResponder> responder) {
    responder->start_stream(200, "text/event-stream");
    std::promise<void> sent;
    std::future<void> all_sent = sent.get_future();
    writers.emplace_back([responder, sent = std::move(sent)]() mutable {
      responder->send_chunk("data: first\n\n");
      responder->send_chunk("data: second\n\n");
      responder->finish_stream();
      sent.set_value();
    });
    all_sent.wait();  // each call only posts, so this waits no longer than the thread's start
  });
  server.start();
  HttpClient client;
  const HttpClientResponse response = client.fetch(call_to(server, "GET", "/stream"));
  for (auto& writer : writers) writer.join();
  EXPECT_EQ(response.error, "");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "data: first\n\ndata: second\n\n");
}

TEST(HttpServerTest, ClientLeavingAStreamIsNoticedOnce) {
  HeldRequests held;
  HttpServer server(test_options(), held.handler(/*stream=*/true));
  server.start();
  {
    RawConnection connection(server.port());
    connection.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}");
    connection.read_until("first");
    ASSERT_TRUE(wait_for([&] { return held.count() == 1; }));
  }
  const auto left = Clock::now();
  EXPECT_TRUE(wait_for([&] { return held.disconnects == 1; }, 1));
  EXPECT_LT(seconds_since(left), 1.0);
  // The engine keeps producing for a moment: harmless, and no second notice.
  const auto responder = held.all().front();
  for (int i = 0; i < 100; ++i) responder->send_chunk("late");
  responder->finish_stream();
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(held.disconnects.load(), 1);
  EXPECT_EQ(server.open_connections(), 0u);
}

TEST(HttpServerTest, ClientLeavingBeforeTheAnswerIsNoticed) {
  HeldRequests held;
  HttpServer server(test_options(), held.handler(/*stream=*/false));
  server.start();
  {
    RawConnection connection(server.port());
    connection.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_TRUE(wait_for([&] { return held.count() == 1; }));
  }
  EXPECT_TRUE(wait_for([&] { return held.disconnects == 1; }, 1));
  held.all().front()->respond(200, "text/plain", "too late");
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(held.disconnects.load(), 1);
}

TEST(HttpServerTest, DisconnectCallbackSetAfterTheClientLeftStillRuns) {
  std::promise<std::shared_ptr<HttpResponder>> handed_over;
  HttpServer server(test_options(), [&](const HttpRequest&, std::shared_ptr<HttpResponder> responder) {
    handed_over.set_value(responder);
  });
  server.start();
  auto connection = std::make_unique<RawConnection>(server.port());
  connection->send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  const auto responder = handed_over.get_future().get();
  connection.reset();
  ASSERT_TRUE(wait_for([&] { return server.open_connections() == 0; }));
  std::atomic<int> disconnects{0};
  responder->on_disconnect([&] { ++disconnects; });
  EXPECT_TRUE(wait_for([&] { return disconnects == 1; }, 1));
}

TEST(HttpServerTest, NormalCompletionIsNoDisconnect) {
  std::atomic<int> disconnects{0};
  HttpServer server(test_options(),
                    [&](const HttpRequest& request, std::shared_ptr<HttpResponder> responder) {
                      responder->on_disconnect([&] { ++disconnects; });
                      if (request.path() == "/stream") {
                        responder->start_stream(200, "text/event-stream");
                        responder->send_chunk("a");
                        responder->send_chunk("b");
                        responder->finish_stream();
                      } else {
                        responder->respond(200, "text/plain", "whole");
                      }
                    });
  server.start();
  HttpClient client;
  EXPECT_EQ(client.fetch(call_to(server, "GET", "/stream")).body, "ab");
  EXPECT_EQ(client.fetch(call_to(server, "GET", "/whole")).body, "whole");
  EXPECT_TRUE(wait_for([&] { return server.open_connections() == 0; }));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(disconnects.load(), 0);
}

TEST(HttpServerTest, StopWithOpenStreamsReturnsAtOnce) {
  HeldRequests held;
  auto server = std::make_unique<HttpServer>(test_options(), held.handler(/*stream=*/true));
  server->start();
  HttpClient client;
  constexpr int kStreams = 20;
  std::atomic<int> ended_early{0};
  for (int i = 0; i < kStreams; ++i) {
    HttpCall call = call_to(*server, "GET", "/stream");
    call.on_data = [](std::string_view) {};
    call.on_done = [&](const HttpClientResponse& response) { ended_early += !response.error.empty(); };
    client.start(call);
  }
  ASSERT_TRUE(wait_for([&] { return held.count() == kStreams; }));
  const auto stopping = Clock::now();
  server->stop();
  EXPECT_LT(seconds_since(stopping), 1.0);
  EXPECT_EQ(held.disconnects.load(), kStreams);  // the engine hears that its requests are gone
  server.reset();
  for (const auto& responder : held.all()) responder->send_chunk("after the server is gone");
  EXPECT_TRUE(wait_for([&] { return ended_early == kStreams; }));
}

// The scale the server is for: 2000 clients streaming at once, each getting ten chunks over a second.
TEST(HttpServerTest, TwoThousandConcurrentStreams) {
  constexpr int kStreams = 2000;
  constexpr int kChunks = 10;
  if (!ensure_fd_limit(2 * kStreams + 200))
    GTEST_SKIP() << "the open-file limit cannot fit " << kStreams << " streams";
  HeldRequests held;
  HttpServer server(test_options(), held.handler(/*stream=*/true));
  server.start();
  HttpClient client;
  std::atomic<int> done{0}, good{0};
  for (int i = 0; i < kStreams; ++i) {
    auto received = std::make_shared<std::string>();
    HttpCall call = call_to(server, "POST", "/v1/completions", "{}");
    call.timeout_seconds = 30;
    call.on_data = [received](std::string_view piece) { received->append(piece); };
    call.on_done = [&, received](const HttpClientResponse& response) {
      good += response.error.empty() && response.status == 200 &&
              *received == "first" + std::string(kChunks, '.');
      ++done;
    };
    client.start(std::move(call));
  }
  ASSERT_TRUE(wait_for([&] { return held.count() == kStreams; }, 10)) << held.count() << " streams opened";
  EXPECT_EQ(server.open_connections(), static_cast<size_t>(kStreams));
  const auto responders = held.all();
  for (int chunk = 0; chunk < kChunks; ++chunk) {
    std::this_thread::sleep_for(100ms);
    for (const auto& responder : responders) responder->send_chunk(".");
  }
  for (const auto& responder : responders) responder->finish_stream();
  EXPECT_TRUE(wait_for([&] { return done == kStreams; }, 10));
  EXPECT_EQ(good.load(), kStreams);
  EXPECT_EQ(held.disconnects.load(), 0);
}

}  // namespace
}  // namespace dsinfer::server
