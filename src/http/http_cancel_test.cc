// The client's proxy features (http_cancel.cc, HttpCall::on_head): a call cancelled from another
// thread closes its connection, so the server sees its client leave; the head arrives before the
// body; a cancel before the start or after the end touches nothing it should not.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http/http.h"
#include "http/http_test_util.h"

namespace dsinfer::server {
namespace {

using namespace std::chrono_literals;
using namespace http_test;

TEST(HttpCancelTest, ACancelledStreamClosesItsConnectionAndEndsAsCancelled) {
  HeldRequests held;
  HttpServer server(test_options(), held.handler(/*stream=*/true));
  server.start();
  HttpClient client;
  auto cancel = std::make_shared<HttpCancel>();
  std::promise<HttpClientResponse> done;
  std::atomic<int> pieces{0};
  HttpCall call = call_to(server, "POST", "/v1/chat/completions", "{}");
  call.cancel = cancel;
  call.on_data = [&](std::string_view) { ++pieces; };
  call.on_done = [&](const HttpClientResponse& response) { done.set_value(response); };
  client.start(std::move(call));
  ASSERT_TRUE(wait_for([&] { return pieces.load() > 0; })) << "the stream's first chunk never came";

  std::thread([cancel] { cancel->cancel(); }).join();  // from a thread that is not the client's
  const HttpClientResponse response = done.get_future().get();
  EXPECT_EQ(response.error, "cancelled");
  EXPECT_EQ(response.status, 200);
  EXPECT_TRUE(wait_for([&] { return held.disconnects.load() == 1; })) << "the server never saw its client leave";
  cancel->cancel();  // again: nothing more happens
  EXPECT_TRUE(cancel->cancelled());
}

TEST(HttpCancelTest, ACallCancelledBeforeItStartsEndsAsCancelled) {
  HeldRequests held;
  HttpServer server(test_options(), held.handler(/*stream=*/false));
  server.start();
  HttpClient client;
  auto cancel = std::make_shared<HttpCancel>();
  cancel->cancel();
  HttpCall call = call_to(server, "GET", "/never");
  call.cancel = cancel;
  const HttpClientResponse response = client.fetch(std::move(call));
  EXPECT_EQ(response.error, "cancelled");
}

TEST(HttpCancelTest, ACancelAfterTheCallEndedChangesNothing) {
  HttpServer server(test_options(), [](const HttpRequest&, std::shared_ptr<HttpResponder> responder) {
    responder->respond(200, "text/plain", "whole");
  });
  server.start();
  auto cancel = std::make_shared<HttpCancel>();
  HttpClientResponse response;
  {
    HttpClient client;
    HttpCall call = call_to(server, "GET", "/");
    call.cancel = cancel;
    response = client.fetch(std::move(call));
  }
  cancel->cancel();  // the call and its client are gone
  EXPECT_EQ(response.error, "");
  EXPECT_EQ(response.body, "whole");
}

TEST(HttpCancelTest, TheHeadArrivesBeforeTheBody) {
  std::vector<std::thread> writers;
  HttpServer server(test_options(), [&](const HttpRequest&, std::shared_ptr<HttpResponder> responder) {
    responder->start_stream(201, "text/event-stream", {{"X-Worker", "decode"}});
    writers.emplace_back([responder] {
      std::this_thread::sleep_for(100ms);
      responder->send_chunk("data: 1\n\n");
      responder->finish_stream();
    });
  });
  server.start();
  HttpClient client;
  std::vector<std::string> events;  // the client loop's order of callbacks
  HttpCall call = call_to(server, "POST", "/");
  call.on_head = [&](const HttpClientResponse& head) {
    events.push_back(str_cat("head ", head.status, " ", find_header(head, "x-worker").value_or("?")));
  };
  call.on_data = [&](std::string_view piece) { events.push_back(str_cat("data ", piece)); };
  const HttpClientResponse response = client.fetch(std::move(call));
  for (auto& writer : writers) writer.join();
  EXPECT_EQ(response.error, "");
  EXPECT_EQ(events, (std::vector<std::string>{"head 201 decode", "data data: 1\n\n"}));
}

}  // namespace
}  // namespace dsinfer::server
