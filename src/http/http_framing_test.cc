// The HTTP transport against RFC 9112 on loopback: message framing that cannot be trusted (request
// smuggling through Transfer-Encoding), Host on HTTP/1.1, close-delimited streams for HTTP/1.0
// clients, half-closed clients, pipelined bytes while a stream runs, and the check on request heads
// that answers before any body is read.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "http/http.h"
#include "http/http_framing.h"
#include "http/http_test_util.h"

namespace dsinfer::server {
namespace {

using namespace std::chrono_literals;
using namespace http_test;

// Answers "<method> <target> <body size>" and remembers every target it saw.
struct EchoTargets {
  std::mutex mutex;
  std::vector<std::string> targets;

  HttpHandler handler() {
    return [this](const HttpRequest& request, std::shared_ptr<HttpResponder> responder) {
      {
        std::lock_guard lock(mutex);
        targets.push_back(request.target);
      }
      responder->respond(200, "text/plain", str_cat(request.method, " ", request.target, " ", request.body.size()));
    };
  }
  std::vector<std::string> seen() {
    std::lock_guard lock(mutex);
    return targets;
  }
};

HttpRequest head_of(int version, Headers headers) {
  HttpRequest head;
  head.method = "POST";
  head.target = "/v1/completions";
  head.version = version;
  head.headers = std::move(headers);
  return head;
}

TEST(HttpFramingTest, ChecksTransferEncodingAndHost) {
  const auto status_of = [](int version, Headers headers) {
    const auto problem = check_request_head(head_of(version, std::move(headers)));
    return problem ? problem->status : 0;
  };
  EXPECT_EQ(status_of(11, {{"Host", "x"}}), 0);
  EXPECT_EQ(status_of(11, {{"Host", "x"}, {"Transfer-Encoding", "chunked"}}), 0);
  EXPECT_EQ(status_of(11, {{"Host", "x"}, {"transfer-encoding", " Chunked "}}), 0);
  EXPECT_EQ(status_of(10, {}), 0);  // HTTP/1.0 has no Host requirement
  EXPECT_EQ(status_of(11, {{"Host", ""}}), 0);  // empty is allowed (a target without authority)
  for (const char* coding : {"gzip", "identity", "xchunked", "chunked, gzip", "chunked;x=1, identity", ""}) {
    EXPECT_EQ(status_of(11, {{"Host", "x"}, {"Transfer-Encoding", coding}}), 400) << coding;
  }
  EXPECT_EQ(status_of(11, {{"Host", "x"}, {"Transfer-Encoding", "gzip, chunked"}}), 501);
  EXPECT_EQ(status_of(11, {{"Host", "x"}, {"Transfer-Encoding", "gzip"}, {"Transfer-Encoding", "chunked"}}), 501);
  EXPECT_EQ(status_of(11, {{"Host", "x"}, {"Transfer-Encoding", "chunked, chunked"}}), 400);
  EXPECT_EQ(status_of(11, {{"Host", "x"}, {"Transfer-Encoding", "chunked"}, {"Content-Length", "5"}}), 400);
  EXPECT_EQ(status_of(10, {{"Transfer-Encoding", "chunked"}}), 400);
  EXPECT_EQ(status_of(11, {}), 400);
  EXPECT_EQ(status_of(11, {{"Host", "x"}, {"host", "y"}}), 400);
}

// A body the server cannot delimit must not be read as the next request: 400, then close.
TEST(HttpFramingTest, TransferEncodingOtherThanAFinalChunkedGets400AndClose) {
  for (const char* coding : {"gzip", "identity", "xchunked", "chunked, gzip"}) {
    EchoTargets echo;
    HttpServer server(test_options(), echo.handler());
    server.start();
    RawConnection connection(server.port());
    const std::string smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    connection.send(str_cat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ", coding,
                            "\r\n\r\n", smuggled));
    const std::string& received = connection.read_until("}");
    EXPECT_EQ(received.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << coding << ": " << received;
    EXPECT_NE(received.find("Connection: close"), std::string::npos) << coding;
    EXPECT_TRUE(connection.wait_closed_by_peer(3)) << coding;
    EXPECT_EQ(received.find("/smuggled"), std::string::npos) << coding << ": " << received;
    EXPECT_TRUE(echo.seen().empty()) << coding << ": the handler saw " << echo.seen().front();
  }
}

TEST(HttpFramingTest, UnsupportedTransferCodingGets501AndClose) {
  EchoTargets echo;
  HttpServer server(test_options(), echo.handler());
  server.start();
  RawConnection connection(server.port());
  connection.send(
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
  const std::string& received = connection.read_until("}");
  EXPECT_EQ(received.rfind("HTTP/1.1 501 Not Implemented\r\n", 0), 0u) << received;
  EXPECT_TRUE(connection.wait_closed_by_peer(3));
  EXPECT_TRUE(echo.seen().empty());
}

TEST(HttpFramingTest, Http11WithoutHostGets400) {
  EchoTargets echo;
  HttpServer server(test_options(), echo.handler());
  server.start();
  RawConnection connection(server.port());
  connection.send("GET /v1/models HTTP/1.1\r\n\r\n");
  const std::string& received = connection.read_until("}");
  EXPECT_EQ(received.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << received;
  EXPECT_NE(received.find("Host"), std::string::npos) << received;
  EXPECT_TRUE(connection.wait_closed_by_peer(3));
  EXPECT_TRUE(echo.seen().empty());
  // HTTP/1.0 needs no Host.
  RawConnection old_client(server.port());
  old_client.send("GET /v1/models HTTP/1.0\r\n\r\n");
  EXPECT_NE(old_client.read_until("GET /v1/models 0").find("HTTP/1.1 200 OK"), std::string::npos);
}

TEST(HttpFramingTest, StreamsToHttp10ClientsAreCloseDelimited) {
  HttpServer server(test_options(), [](const HttpRequest&, std::shared_ptr<HttpResponder> responder) {
    responder->start_stream(200, "text/event-stream");
    responder->send_chunk("data: a\n\n");
    responder->send_chunk("data: b\n\n");
    responder->finish_stream();
  });
  server.start();
  RawConnection connection(server.port());
  connection.send("POST /v1/completions HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}");
  EXPECT_TRUE(connection.wait_closed_by_peer(3));  // the close marks the end of the body
  const std::string& received = connection.read_until("never");
  const size_t body_at = received.find("\r\n\r\n");
  ASSERT_NE(body_at, std::string::npos) << received;
  const std::string head = received.substr(0, body_at);
  EXPECT_EQ(head.find("Transfer-Encoding"), std::string::npos) << head;
  EXPECT_EQ(head.find("Content-Length"), std::string::npos) << head;
  EXPECT_NE(head.find("Connection: close"), std::string::npos) << head;
  EXPECT_EQ(received.substr(body_at + 4), "data: a\n\ndata: b\n\n");
}

TEST(HttpFramingTest, Http10KeepAliveIsAnnounced) {
  EchoTargets echo;
  HttpServer server(test_options(), echo.handler());
  server.start();
  RawConnection connection(server.port());
  connection.send("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  const std::string& first = connection.read_until("GET /a 0");
  EXPECT_NE(first.find("Connection: keep-alive"), std::string::npos) << first;
  connection.send("GET /b HTTP/1.0\r\n\r\n");  // no keep-alive this time: answered, then closed
  EXPECT_NE(connection.read_until("GET /b 0").find("GET /b 0"), std::string::npos);
  EXPECT_TRUE(connection.wait_closed_by_peer(3));
}

// A client may shut down its sending side once its request is out; it still gets the answer.
TEST(HttpFramingTest, HalfClosedClientIsAnswered) {
  for (const bool announced_close : {false, true}) {
    HeldRequests held;
    HttpServer server(test_options(), held.handler(/*stream=*/false));
    server.start();
    RawConnection connection(server.port());
    connection.send(str_cat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n",
                            announced_close ? "Connection: close\r\n" : "", "\r\n{}"));
    // Half-closed right behind the request, or (having said "Connection: close") later, while the
    // request is worked on.
    if (announced_close) {
      ASSERT_TRUE(wait_for([&] { return held.count() == 1; }));
    }
    connection.shutdown_sending();
    ASSERT_TRUE(wait_for([&] { return held.count() == 1; }));
    std::this_thread::sleep_for(100ms);  // the server has seen the end of the request stream
    held.all().front()->respond(200, "text/plain", "the answer");
    const std::string& received = connection.read_until("the answer");
    // Interim answers (the server's probe of the half-close) may come first; the final one follows.
    EXPECT_NE(received.find("HTTP/1.1 200 OK"), std::string::npos) << announced_close << ": " << received;
    EXPECT_TRUE(received.starts_with("HTTP/1.1 200 OK") ||
                received.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK"))
        << received;
    EXPECT_NE(received.find("the answer"), std::string::npos) << announced_close;
    EXPECT_TRUE(connection.wait_closed_by_peer(3)) << announced_close;
    EXPECT_EQ(held.disconnects.load(), 0) << announced_close;
  }
}

// A client that closes its socket while it waits has left (a client-side timeout): its request is
// aborted, whether or not it asked to keep the connection. From the server's side its stream ended
// just as a half-closed one's does; the answer to the server's probe tells them apart.
TEST(HttpFramingTest, ClientThatClosesWhileWaitingIsAborted) {
  for (const bool announced_close : {false, true}) {
    HeldRequests held;
    HttpServer server(test_options(), held.handler(/*stream=*/false));
    server.start();
    RawConnection connection(server.port());
    connection.send(str_cat("GET /slow HTTP/1.1\r\nHost: x\r\n", announced_close ? "Connection: close\r\n" : "",
                            "\r\n"));
    ASSERT_TRUE(wait_for([&] { return held.count() == 1; }));
    std::this_thread::sleep_for(50ms);
    connection.close();
    EXPECT_TRUE(wait_for([&] { return held.disconnects == 1; }, 2)) << announced_close;
    EXPECT_TRUE(wait_for([&] { return server.open_connections() == 0; }, 1)) << announced_close;
  }
}

// The lifetime bug of issue 13: with a request in flight, 64 KiB or more of pipelined bytes paused
// the read-ahead, after which nothing owned the connection and the in-flight stream was reset.
TEST(HttpFramingTest, PipelinedBytesDuringAStreamKeepTheConnection) {
  HeldRequests held;
  HttpServer server(test_options(), [&](const HttpRequest& request, std::shared_ptr<HttpResponder> responder) {
    if (request.target == "/second") return responder->respond(200, "text/plain", str_cat("second ", request.body.size()));
    held.handler(/*stream=*/true)(request, std::move(responder));
  });
  server.start();
  RawConnection connection(server.port());
  connection.send("POST /first HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}");
  connection.read_until("first");
  ASSERT_TRUE(wait_for([&] { return held.count() == 1; }));
  std::this_thread::sleep_for(100ms);
  constexpr size_t kBody = 66000;
  connection.send(str_cat("POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: ", kBody, "\r\n\r\n",
                          std::string(kBody, 'x')));
  std::this_thread::sleep_for(200ms);  // the read-ahead fills and pauses
  EXPECT_EQ(held.disconnects.load(), 0);
  const auto responder = held.all().front();
  responder->send_chunk("more");
  responder->finish_stream();
  const std::string& received = connection.read_until(str_cat("second ", kBody));
  EXPECT_NE(received.find("more"), std::string::npos) << received.substr(0, 300);
  EXPECT_NE(received.find("0\r\n\r\n"), std::string::npos);
  EXPECT_NE(received.find(str_cat("second ", kBody)), std::string::npos);
  EXPECT_EQ(held.disconnects.load(), 0);
}

// The head check runs before the body is read: an unauthenticated client gets its 401 at once,
// without sending (or the server storing) the 31 MiB it announced.
TEST(HttpFramingTest, HeadCheckAnswersBeforeTheBodyIsRead) {
  HttpServerOptions options = test_options();
  std::atomic<int> checked{0};
  options.check_head = [&](const HttpRequest& head) -> std::optional<HttpAnswer> {
    ++checked;
    EXPECT_TRUE(head.body.empty());
    if (head.path().starts_with("/v1/") && head.header("authorization") != "Bearer key") {
      return HttpAnswer{401, "application/json", "{\"error\":\"no key\"}", {{"WWW-Authenticate", "Bearer"}}};
    }
    return std::nullopt;
  };
  EchoTargets echo;
  HttpServer server(options, echo.handler());
  server.start();
  const auto start = Clock::now();
  RawConnection connection(server.port());
  connection.send("POST /v1/anything HTTP/1.1\r\nHost: x\r\nContent-Length: 32505856\r\nExpect: 100-continue\r\n\r\n");
  const std::string& received = connection.read_until("}");
  EXPECT_EQ(received.rfind("HTTP/1.1 401 Unauthorized\r\n", 0), 0u) << received;  // and no 100 Continue
  EXPECT_NE(received.find("WWW-Authenticate: Bearer"), std::string::npos);
  EXPECT_NE(received.find("Connection: close"), std::string::npos);
  EXPECT_TRUE(connection.wait_closed_by_peer(3));
  EXPECT_LT(seconds_since(start), 2.5);
  EXPECT_TRUE(echo.seen().empty());

  HttpClient client;
  HttpCall call = call_to(server, "POST", "/v1/completions", "{}");
  call.headers = {{"Authorization", "Bearer key"}};
  EXPECT_EQ(client.fetch(call).body, "POST /v1/completions 2");
  EXPECT_EQ(client.fetch(call_to(server, "GET", "/health")).status, 200);
  EXPECT_EQ(checked.load(), 3);
}

}  // namespace
}  // namespace dsinfer::server
