// Slow and hostile clients on loopback: idle time between bytes of a request head and body (408),
// clients that read nothing of their answers (send timeout, queued-bytes cap), slow heads that
// would otherwise hold every connection slot, and keep-alive connections left idle.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
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

HttpHandler answer_ok() {
  return [](const HttpRequest&, std::shared_ptr<HttpResponder> responder) {
    responder->respond(200, "text/plain", "ok");
  };
}

// Idle time counts between bytes, not from the start: a head trickling in faster than the timeout
// lives on; once it stops, 408 and close.
TEST(HttpTimeoutTest, HeadThatStopsArrivingGets408) {
  HttpServerOptions options = test_options();
  options.header_timeout = 300ms;
  HttpServer server(options, answer_ok());
  server.start();
  RawConnection connection(server.port());
  const std::string head = "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: abcdefgh";
  for (const char byte : head) {  // about 0.6 s in all, 2x the timeout
    connection.send(std::string(1, byte));
    std::this_thread::sleep_for(15ms);
  }
  const auto stopped = Clock::now();
  const std::string& received = connection.read_until("}", 3);
  EXPECT_EQ(received.rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u) << received;
  EXPECT_NE(received.find("Connection: close"), std::string::npos);
  EXPECT_GT(seconds_since(stopped), 0.2);
  EXPECT_TRUE(connection.wait_closed_by_peer(3));
}

TEST(HttpTimeoutTest, BodyThatStopsArrivingGets408) {
  HttpServerOptions options = test_options();
  options.body_timeout = 300ms;
  std::atomic<int> handled{0};
  HttpServer server(options, [&](const HttpRequest&, std::shared_ptr<HttpResponder> responder) {
    ++handled;
    responder->respond(200, "text/plain", "ok");
  });
  server.start();
  RawConnection connection(server.port());
  connection.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789");
  const auto stopped = Clock::now();
  const std::string& received = connection.read_until("}", 3);
  EXPECT_EQ(received.rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u) << received;
  EXPECT_GT(seconds_since(stopped), 0.2);
  EXPECT_LT(seconds_since(stopped), 2.0);
  EXPECT_TRUE(connection.wait_closed_by_peer(3));
  EXPECT_EQ(handled.load(), 0);
}

// A connection that sends nothing at all is closed without an answer: there is no request to time out.
TEST(HttpTimeoutTest, ConnectionThatSendsNothingIsClosedSilently) {
  HttpServerOptions options = test_options();
  options.header_timeout = 200ms;
  HttpServer server(options, answer_ok());
  server.start();
  RawConnection connection(server.port());
  EXPECT_TRUE(connection.wait_closed_by_peer(3));
  EXPECT_EQ(connection.read_until("never", 0), "");
}

TEST(HttpTimeoutTest, IdleKeepAliveConnectionsAreClosed) {
  HttpServerOptions options = test_options();
  options.idle_timeout = 300ms;
  HttpServer server(options, answer_ok());
  server.start();
  RawConnection connection(server.port());
  connection.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  connection.read_until("ok");
  const auto idle_since = Clock::now();
  EXPECT_TRUE(connection.wait_closed_by_peer(3));
  EXPECT_GT(seconds_since(idle_since), 0.2);
  EXPECT_EQ(count_of(connection.read_until("never", 0), "HTTP/1.1"), 1);  // nothing sent on closing
}

// Six clients that never read their large /tokenize answers held 540 MB: each is now dropped once
// its answer has made no progress for the send timeout.
TEST(HttpTimeoutTest, ClientThatReadsNothingOfItsAnswerIsDropped) {
  HttpServerOptions options = test_options();
  options.send_timeout = 300ms;
  HttpServer server(options, [](const HttpRequest&, std::shared_ptr<HttpResponder> responder) {
    responder->respond(200, "application/json", std::string(16 << 20, 'x'));  // more than the socket buffers
  });
  server.start();
  RawConnection connection(server.port(), /*receive_buffer_bytes=*/4096);
  connection.send("GET /tokenize HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(wait_for([&] { return server.open_connections() == 1; }));
  const auto start = Clock::now();
  EXPECT_TRUE(wait_for([&] { return server.open_connections() == 0; }, 3));
  EXPECT_GT(seconds_since(start), 0.2);
}

// 40 SSE clients that never read were never dropped: a stream whose unsent bytes pass the cap is
// ended, and its request aborted (the responder's on_disconnect runs).
TEST(HttpTimeoutTest, StreamToAClientThatReadsNothingIsDroppedAtTheQueueCap) {
  HttpServerOptions options = test_options();
  options.max_queued_bytes = 256 << 10;
  HeldRequests held;
  HttpServer server(options, held.handler(/*stream=*/true));
  server.start();
  RawConnection connection(server.port(), /*receive_buffer_bytes=*/4096);
  connection.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}");
  ASSERT_TRUE(wait_for([&] { return held.count() == 1; }));
  const auto responder = held.all().front();
  const std::string chunk(64 << 10, 'x');
  // Enough to fill the kernel's buffers on both sides and then the cap, many times over.
  for (int i = 0; i < 400 && held.disconnects == 0; ++i) {
    responder->send_chunk(chunk);
    if (i % 16 == 0) std::this_thread::sleep_for(2ms);  // let the loop write
  }
  EXPECT_TRUE(wait_for([&] { return held.disconnects == 1; }, 3));
  EXPECT_TRUE(wait_for([&] { return server.open_connections() == 0; }, 1));
}

// The cap bounds what is waiting, not what is sent: a client that keeps up gets a stream many times
// the cap. (The producer stays at most 64 KiB ahead of what the client has received, as a token
// stream stays far behind any reader.)
TEST(HttpTimeoutTest, StreamToAClientThatKeepsUpPassesTheCap) {
  constexpr size_t kChunk = 16 << 10;
  constexpr int kChunks = 200;
  HttpServerOptions options = test_options();
  options.max_queued_bytes = 256 << 10;
  std::atomic<size_t> received{0};
  std::vector<std::thread> producers;
  HttpServer server(options, [&](const HttpRequest&, std::shared_ptr<HttpResponder> responder) {
    responder->start_stream(200, "text/event-stream");
    producers.emplace_back([&received, responder] {
      for (int i = 0; i < kChunks; ++i) {
        // Never more than 64 KB ahead of the client. A client that stops taking data for 30 s has
        // failed the test: stop producing, so that the failure shows at once instead of after
        // 200 more waits (a loaded CI machine once stalled it that way).
        if (!wait_for([&] { return received + (64 << 10) >= i * kChunk; }, 30)) break;
        responder->send_chunk(std::string(kChunk, 'x'));
      }
      responder->finish_stream();
    });
  });
  server.start();
  HttpClient client;
  HttpCall call = call_to(server, "GET", "/stream");
  call.timeout_seconds = 60;  // the whole stream; 80 ms unloaded
  call.on_data = [&](std::string_view piece) { received += piece.size(); };
  const HttpClientResponse response = client.fetch(call);
  for (auto& producer : producers) producer.join();
  EXPECT_EQ(response.error, "");
  EXPECT_EQ(received.load(), kChunks * kChunk) << "status " << response.status;
}

// 128 one-byte-per-second connections locked every legitimate request out at --max-connections
// 100. A connection that has not sent its whole request now yields its slot to a new client.
TEST(HttpTimeoutTest, SlowHeadsCannotLockOutNewClients) {
  HttpServerOptions options = test_options();
  options.max_connections = 8;
  HttpServer server(options, answer_ok());
  server.start();
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(std::make_unique<RawConnection>(server.port()));
    slow.back()->send("GET / HTTP/1.1\r\nHo");
    ASSERT_TRUE(wait_for([&] { return server.open_connections() == slow.size(); }));
  }
  HttpClient client;
  for (int i = 0; i < 3; ++i) {
    const HttpClientResponse response = client.fetch(call_to(server, "GET", "/v1/models"));
    EXPECT_EQ(response.status, 200) << i << ": " << response.body;
  }
  EXPECT_TRUE(slow.front()->wait_closed_by_peer(2));  // the longest-waiting slow head made room
  EXPECT_FALSE(slow.back()->wait_closed_by_peer(0.05));
}

}  // namespace
}  // namespace dsinfer::server
