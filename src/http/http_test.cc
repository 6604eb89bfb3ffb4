// The HTTP transport on loopback, request by request: round trips, keep-alive and pipelining, the
// answers the transport gives itself (400, 413, 431, 500, 503), and the URL and request helpers.
// Streaming and disconnects are in http_stream_test.cc, framing in http_framing_test.cc, slow
// clients and timeouts in http_timeout_test.cc.
#include "http/http.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include "core/error.h"
#include "http/http_test_util.h"

namespace dsinfer::server {
namespace {

using namespace http_test;

TEST(HttpRequestTest, PathAndHeaders) {
  HttpRequest request;
  request.target = "/v1/models?x=1";
  request.headers = {{"Content-Type", "application/json"}, {"X-Empty", ""}};
  EXPECT_EQ(request.path(), "/v1/models");
  EXPECT_EQ(request.header("content-type"), "application/json");
  EXPECT_EQ(request.header("X-EMPTY"), "");
  EXPECT_FALSE(request.header("Authorization").has_value());
  request.target = "/health";
  EXPECT_EQ(request.path(), "/health");
}

TEST(ParseUrlTest, SplitsHostPortAndPath) {
  Url url = parse_url("http://127.0.0.1:8000/v1");
  EXPECT_EQ(url.host, "127.0.0.1");
  EXPECT_EQ(url.port, 8000);
  EXPECT_EQ(url.path, "/v1");
  url = parse_url("http://example.com/");
  EXPECT_EQ(url.host, "example.com");
  EXPECT_EQ(url.port, 80);
  EXPECT_EQ(url.path, "");
  url = parse_url("http://[::1]:9000/a/b/");
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.port, 9000);
  EXPECT_EQ(url.path, "/a/b");
}

TEST(ParseUrlTest, RejectsWhatItCannotServe) {
  EXPECT_THROW(
      {
        try {
          parse_url("https://api.example.com/v1");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("https is not supported"), std::string::npos);
          throw;
        }
      },
      Error);
  EXPECT_THROW(parse_url("ftp://host"), Error);
  EXPECT_THROW(parse_url("http://:80/"), Error);
  EXPECT_THROW(parse_url("http://host:99999"), Error);
  EXPECT_THROW(parse_url("http://host:port"), Error);
}

TEST(HttpServerTest, RoundTripOfGetAndPost) {
  HttpServer server(test_options(), [](const HttpRequest& request, std::shared_ptr<HttpResponder> responder) {
    const std::string text = str_cat(request.method, " ", request.path(), " ",
                                     request.header("x-test").value_or("-"), " ", request.body);
    responder->respond(201, "text/plain", text, {{"X-Reply", "yes"}});
  });
  server.start();
  HttpClient client;

  HttpCall get = call_to(server, "GET", "/v1/models?verbose=1");
  get.headers = {{"X-Test", "abc"}};
  HttpClientResponse response = client.fetch(get);
  EXPECT_EQ(response.error, "");
  EXPECT_EQ(response.status, 201);
  EXPECT_EQ(response.body, "GET /v1/models abc ");
  EXPECT_EQ(find_header(response, "x-reply"), "yes");
  EXPECT_EQ(find_header(response, "content-type"), "text/plain");

  response = client.fetch(call_to(server, "POST", "/v1/completions", "{\"prompt\":\"hi\"}"));
  EXPECT_EQ(response.status, 201);
  EXPECT_EQ(response.body, "POST /v1/completions - {\"prompt\":\"hi\"}");
}

TEST(HttpServerTest, BindingABusyPortNamesIt) {
  HttpServer first(test_options(), [](const HttpRequest&, std::shared_ptr<HttpResponder>) {});
  first.start();
  HttpServerOptions options = test_options();
  options.port = first.port();
  HttpServer second(options, [](const HttpRequest&, std::shared_ptr<HttpResponder>) {});
  try {
    second.start();
    FAIL() << "a second server bound a busy port";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              str_cat("cannot listen on 127.0.0.1:", first.port(), ": Address already in use"));
  }
}

TEST(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  HttpServer server(test_options(), [](const HttpRequest& request, std::shared_ptr<HttpResponder> responder) {
    responder->respond(200, "text/plain", str_cat("reply to ", request.target));
  });
  server.start();
  RawConnection connection(server.port());
  connection.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  connection.read_until("reply to /a");
  connection.send("GET /b HTTP/1.1\r\nHost: x\r\n\r\n");
  // Pipelined: both requests in one write; the answers come back in order.
  connection.send(
      "GET /c HTTP/1.1\r\nHost: x\r\n\r\nGET /d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string& received = connection.read_until("reply to /d");
  EXPECT_EQ(count_of(received, "HTTP/1.1 200 OK"), 4);
  EXPECT_LT(received.find("reply to /c"), received.find("reply to /d"));
  EXPECT_EQ(server.open_connections(), 1u);
  EXPECT_NE(received.find("Connection: close"), std::string::npos);
  EXPECT_TRUE(connection.wait_closed_by_peer(2));  // the last request asked for it
  connection.close();
  EXPECT_TRUE(wait_for([&] { return server.open_connections() == 0; }));
}

TEST(HttpServerTest, BodyOverTheLimitGets413WithoutReachingTheHandler) {
  HttpServerOptions options = test_options();
  options.max_body_bytes = 1024;
  std::atomic<int> handled{0};
  HttpServer server(options, [&](const HttpRequest&, std::shared_ptr<HttpResponder> responder) {
    ++handled;
    responder->respond(200, "text/plain", "ok");
  });
  server.start();
  HttpClient client;
  for (size_t size : {size_t{1025}, size_t{4} << 20}) {  // small, and large enough to still be in flight
    const HttpClientResponse response = client.fetch(call_to(server, "POST", "/", std::string(size, 'x')));
    EXPECT_EQ(response.error, "") << size;
    EXPECT_EQ(response.status, 413) << size;
    EXPECT_EQ(response.body, test_error_body(413, "the request body is larger than the limit of 1024 bytes"));
    EXPECT_EQ(find_header(response, "content-type"), "application/json");
  }
  EXPECT_EQ(client.fetch(call_to(server, "POST", "/", std::string(1024, 'x'))).status, 200);
  EXPECT_EQ(handled.load(), 1);
}

TEST(HttpServerTest, MalformedRequestGets400AndClose) {
  HttpServer server(test_options(), [](const HttpRequest&, std::shared_ptr<HttpResponder> responder) {
    responder->respond(200, "text/plain", "ok");
  });
  server.start();
  RawConnection connection(server.port());
  connection.send("GET / HTTP/1.1\r\nHost x\r\n\r\n");
  const std::string& received = connection.read_until("}");
  EXPECT_EQ(received.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << received;
  EXPECT_NE(received.find("Content-Type: application/json"), std::string::npos);
  EXPECT_NE(received.find("{\"status\":400,\"message\":\"malformed HTTP request: "), std::string::npos);
  EXPECT_TRUE(connection.wait_closed_by_peer(3));
}

TEST(HttpServerTest, OversizedHeadersGet431) {
  HttpServer server(test_options(), [](const HttpRequest&, std::shared_ptr<HttpResponder> responder) {
    responder->respond(200, "text/plain", "ok");
  });
  server.start();
  RawConnection connection(server.port());
  connection.send(str_cat("GET / HTTP/1.1\r\nHost: x\r\nX-Big: ", std::string(16 << 10, 'x'), "\r\n\r\n"));
  const std::string& received = connection.read_until("}");
  EXPECT_EQ(received.rfind("HTTP/1.1 431 ", 0), 0u) << received.substr(0, 100);
  EXPECT_NE(received.find(test_error_body(431, "the request headers are too large")), std::string::npos);
}

TEST(HttpServerTest, ExpectContinueGets100BeforeTheBody) {
  HttpServer server(test_options(), [](const HttpRequest& request, std::shared_ptr<HttpResponder> responder) {
    responder->respond(200, "text/plain", str_cat("got ", request.body.size()));
  });
  server.start();
  RawConnection connection(server.port());
  connection.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_NE(connection.read_until("\r\n\r\n", 2).find("HTTP/1.1 100 Continue"), std::string::npos);
  connection.send("hello");
  EXPECT_NE(connection.read_until("got 5").find("got 5"), std::string::npos);
}

TEST(HttpServerTest, HandlerFailuresGet500) {
  HttpServer server(test_options(), [](const HttpRequest& request, std::shared_ptr<HttpResponder>) {
    if (request.path() == "/throw") throw Error("bad JSON");
    // Otherwise the responder is dropped without an answer.
  });
  server.start();
  HttpClient client;
  for (const char* target : {"/throw", "/drop"}) {
    const HttpClientResponse response = client.fetch(call_to(server, "GET", target));
    EXPECT_EQ(response.status, 500) << target;
    EXPECT_EQ(find_header(response, "content-type"), "application/json");
  }
}

TEST(HttpServerTest, ConnectionsOverTheLimitGet503) {
  HttpServerOptions options = test_options();
  options.max_connections = 2;
  HeldRequests held;
  HttpServer server(options, held.handler(/*stream=*/true));
  server.start();
  // Requests being answered (connections still waiting for theirs would make room instead).
  RawConnection first(server.port());
  RawConnection second(server.port());
  first.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  second.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(wait_for([&] { return held.count() == 2; }));
  RawConnection third(server.port());
  third.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string& received = third.read_until("}");
  EXPECT_EQ(received.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u) << received;
  EXPECT_NE(received.find(test_error_body(503, "the server is at its limit of 2 open connections")),
            std::string::npos);
  EXPECT_TRUE(third.wait_closed_by_peer(3));
  third.close();
  EXPECT_TRUE(wait_for([&] { return server.open_connections() == 2; }));
  EXPECT_EQ(held.disconnects.load(), 0);  // never evicted
}

TEST(HttpClientTest, TimeoutEndsTheCall) {
  HeldRequests held;
  HttpServer server(test_options(), held.handler(/*stream=*/false));
  server.start();
  HttpClient client;
  HttpCall call = call_to(server, "GET", "/never");
  call.timeout_seconds = 0.3;
  const auto start = Clock::now();
  const HttpClientResponse response = client.fetch(call);
  EXPECT_EQ(response.error, "timeout after 0.3 s");
  EXPECT_LT(seconds_since(start), 2.0);
  EXPECT_TRUE(wait_for([&] { return held.disconnects == 1; }, 1));  // and the server sees it leave
}

TEST(HttpClientTest, ConnectionRefusedIsReported) {
  uint16_t closed_port = 0;
  {
    HttpServer server(test_options(), [](const HttpRequest&, std::shared_ptr<HttpResponder>) {});
    server.start();
    closed_port = server.port();
  }
  HttpClient client;
  HttpCall call;
  call.port = closed_port;
  const HttpClientResponse response = client.fetch(call);
  EXPECT_EQ(response.error, str_cat("cannot connect to 127.0.0.1:", closed_port, ": Connection refused"));
}

}  // namespace
}  // namespace dsinfer::server
