// The router when something fails (exchange.h, health_checker.h), end to end on loopback: a worker's
// error reaches the client and the other call is closed; a dead worker is marked unhealthy, the
// request retried on another pair, and the worker gets traffic back once its health check passes; a
// misconfigured worker gets none; a client that leaves closes both calls.
#include "router/router.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "router/router_test_util.h"

namespace dsinfer::router {
namespace {

using namespace testing;

std::string healthy_series(const FakeWorker& worker, WorkerRole role) {
  return str_cat("dsinfer_router_worker_healthy{worker=\"", worker.url(), "\",role=\"", role_name(role), "\"}");
}

bool contains(const std::vector<Json>& bodies, const Json& body) {
  return std::find(bodies.begin(), bodies.end(), body) != bodies.end();
}

std::string in_flight_series(const FakeWorker& worker, WorkerRole role) {
  return str_cat("dsinfer_router_worker_in_flight{worker=\"", worker.url(), "\",role=\"", role_name(role), "\"}");
}

// True once the router's /metrics shows `series` at `value`, within a few seconds.
bool shows(const Router& router, const std::string& series, double value) {
  return wait_for([&] { return metric(router.metrics_text(), series) == value; });
}

struct Routed {
  explicit Routed(RouterOptions options) : router(std::move(options)) {
    router.start();
    EXPECT_TRUE(wait_for([&] { return router.ready(); })) << router.metrics_text();
  }
  server::HttpClientResponse post(std::string body, std::string target = "/v1/completions") {
    return client.fetch(router_call(router, std::move(target), std::move(body)));
  }
  Router router;
  server::HttpClient client;
};

TEST(RouterFailure, APrefillErrorReachesTheClientAndClosesTheDecodeConnection) {
  FakeWorker prefill(WorkerRole::kPrefill), decode(WorkerRole::kDecode);
  prefill.hold = true;  // until the decode instance has the request
  decode.hold = true;   // a decode instance waits for the KV cache that will not come
  RouterOptions options = test_router_options();
  options.workers = {prefill_spec(prefill), decode_spec(decode)};
  Routed routed(std::move(options));

  auto answered = std::make_shared<std::promise<server::HttpClientResponse>>();
  server::HttpCall call = router_call(routed.router, "/v1/chat/completions", chat_body("Hi", /*stream=*/true));
  call.on_done = [answered](const server::HttpClientResponse& response) { answered->set_value(response); };
  routed.client.start(call);
  ASSERT_TRUE(wait_for([&] { return prefill.received() == 1 && decode.received() == 1; }));
  prefill.error_status = 400;
  prefill.release();
  const server::HttpClientResponse response = answered->get_future().get();
  EXPECT_EQ(response.status, 400);
  EXPECT_EQ(response.body, prefill.error_body);
  EXPECT_EQ(find_header(response.headers, "content-type"), "application/json");
  EXPECT_TRUE(wait_for([&] { return decode.disconnects() == 1; })) << "the decode call was left open";
  EXPECT_TRUE(shows(routed.router, in_flight_series(decode, WorkerRole::kDecode), 0));
}

TEST(RouterFailure, ADecodeErrorReachesTheClientAndClosesThePrefillConnection) {
  FakeWorker prefill(WorkerRole::kPrefill), decode(WorkerRole::kDecode);
  prefill.hold = true;
  decode.hold = true;  // until the prefill instance has the request
  decode.error_body = R"({"error":{"message":"too many requests","type":"invalid_request_error"}})";
  RouterOptions options = test_router_options();
  options.workers = {prefill_spec(prefill), decode_spec(decode)};
  Routed routed(std::move(options));

  auto answered = std::make_shared<std::promise<server::HttpClientResponse>>();
  server::HttpCall call = router_call(routed.router, "/v1/completions", R"({"prompt":"x","stream":true})");
  call.on_done = [answered](const server::HttpClientResponse& response) { answered->set_value(response); };
  routed.client.start(call);
  ASSERT_TRUE(wait_for([&] { return prefill.received() == 1 && decode.received() == 1; }));
  decode.error_status = 429;
  decode.release();
  const server::HttpClientResponse response = answered->get_future().get();
  EXPECT_EQ(response.status, 429);
  EXPECT_EQ(response.body, decode.error_body);
  EXPECT_TRUE(wait_for([&] { return prefill.disconnects() == 1; })) << "the prefill call was left open";
  // An error of the worker's own is no reason to take it out.
  EXPECT_EQ(metric(routed.router.metrics_text(), healthy_series(decode, WorkerRole::kDecode)), 1);
}

TEST(RouterFailure, ADeadPrefillIsMarkedUnhealthyTheRequestRetriedAndItGetsTrafficBackWhenHealthy) {
  FakeWorker dead(WorkerRole::kPrefill), alive(WorkerRole::kPrefill), decode(WorkerRole::kDecode);
  decode.hold = true;  // so the first attempt's decode call cannot answer before the prefill fails
  RouterOptions options = test_router_options();
  options.health.interval = 1s;  // a check does not find the dead worker before the request does
  options.workers = {prefill_spec(dead), prefill_spec(alive), decode_spec(decode)};
  Routed routed(std::move(options));
  ASSERT_TRUE(shows(routed.router, healthy_series(dead, WorkerRole::kPrefill), 1));
  dead.stop();  // its port is closed now

  auto answered = std::make_shared<std::promise<server::HttpClientResponse>>();
  server::HttpCall call = router_call(routed.router, "/v1/completions", R"({"prompt":"first"})");
  call.on_done = [answered](const server::HttpClientResponse& response) { answered->set_value(response); };
  routed.client.start(call);
  // The retry's pair: the live prefill instance and the decode instance, with one room. (The first
  // attempt's decode call is cancelled, before or after it reached the worker.)
  ASSERT_TRUE(wait_for([&] { return alive.received() == 1 && contains(decode.bodies(), alive.bodies()[0]); }))
      << "no retry reached the decode instance";
  if (decode.received() == 2) {
    EXPECT_NE(decode.bodies()[0].find("bootstrap_room")->as_int(), alive.bodies()[0].find("bootstrap_room")->as_int());
    EXPECT_TRUE(wait_for([&] { return decode.disconnects() == 1; })) << "the first attempt's decode call was left open";
  }
  decode.release();
  const server::HttpClientResponse response = answered->get_future().get();
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, decode.whole_answer);

  std::string text = routed.router.metrics_text();
  EXPECT_EQ(metric(text, healthy_series(dead, WorkerRole::kPrefill)), 0);
  EXPECT_EQ(metric(text, "dsinfer_router_retries_total"), 1);
  EXPECT_EQ(metric(text, "dsinfer_router_connection_failures_total"), 1);
  decode.hold = false;
  EXPECT_EQ(routed.post(R"({"prompt":"second"})").status, 200);
  EXPECT_TRUE(wait_for([&] { return alive.received() == 2; }));  // the unhealthy one gets none

  dead.restart();  // /health answers 200 again on the same port
  ASSERT_TRUE(shows(routed.router, healthy_series(dead, WorkerRole::kPrefill), 1));
  EXPECT_EQ(routed.post(R"({"prompt":"third"})").status, 200);
  EXPECT_TRUE(wait_for([&] { return dead.received() == 1; }));  // the least loaded, the first given on a tie
}

TEST(RouterFailure, ADeadDecodeIsRetriedOnAnotherAndWithoutRetriesTheClientGets502) {
  FakeWorker prefill(WorkerRole::kPrefill), dead(WorkerRole::kDecode), alive(WorkerRole::kDecode);
  RouterOptions options = test_router_options();
  options.health.interval = 1s;
  options.workers = {prefill_spec(prefill), decode_spec(dead), decode_spec(alive)};
  Routed routed(std::move(options));
  ASSERT_TRUE(shows(routed.router, healthy_series(dead, WorkerRole::kDecode), 1));
  ASSERT_TRUE(shows(routed.router, healthy_series(alive, WorkerRole::kDecode), 1));
  dead.stop();
  const server::HttpClientResponse response = routed.post(R"({"prompt":"x"})");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(alive.received(), 1u);
  // A new pair, a new room (the first attempt's prefill call may have been cancelled before it got there).
  EXPECT_TRUE(wait_for([&] { return contains(prefill.bodies(), alive.bodies()[0]); }));

  FakeWorker lone_prefill(WorkerRole::kPrefill), lone_decode(WorkerRole::kDecode);
  RouterOptions no_retries = test_router_options();
  no_retries.health.interval = 1s;
  no_retries.max_retries = 0;
  no_retries.workers = {prefill_spec(lone_prefill), decode_spec(lone_decode)};
  Routed single(std::move(no_retries));
  lone_decode.stop();
  const server::HttpClientResponse failed = single.post(R"({"prompt":"x"})");
  EXPECT_EQ(failed.status, 502);
  EXPECT_NE(failed.body.find("the decode instance could not be reached"), std::string::npos) << failed.body;
}

TEST(RouterFailure, AStreamWhoseDecodeDiesMidwayEndsWithAnErrorEvent) {
  FakeWorker prefill(WorkerRole::kPrefill), decode(WorkerRole::kDecode);
  decode.stream_pieces = {"data: {\"n\":1}\n\n", "data: {\"n\":2}\n\n", "data: [DONE]\n\n"};
  decode.stream_pause = 300ms;
  RouterOptions options = test_router_options();
  options.workers = {prefill_spec(prefill), decode_spec(decode)};
  Routed routed(std::move(options));

  auto received = std::make_shared<std::string>();  // the client loop's; read after on_done
  auto first = std::make_shared<std::atomic<bool>>(false);
  auto answered = std::make_shared<std::promise<server::HttpClientResponse>>();
  server::HttpCall call = router_call(routed.router, "/v1/completions", R"({"prompt":"x","stream":true})");
  call.on_data = [received, first](std::string_view piece) {
    *received += piece;
    *first = true;
  };
  call.on_done = [answered](const server::HttpClientResponse& response) { answered->set_value(response); };
  routed.client.start(call);
  ASSERT_TRUE(wait_for([&] { return first->load(); }));
  decode.stop();  // the worker goes away mid-stream
  const server::HttpClientResponse response = answered->get_future().get();
  const std::string& text = *received;
  EXPECT_EQ(response.error, "");
  EXPECT_EQ(response.status, 200);
  EXPECT_TRUE(text.starts_with("data: {\"n\":1}\n\n")) << text;
  EXPECT_NE(text.find("data: {\"error\""), std::string::npos) << text;
  EXPECT_TRUE(text.ends_with("data: [DONE]\n\n")) << text;
}

TEST(RouterFailure, AMisconfiguredWorkerGetsNoTraffic) {
  FakeWorker prefill(WorkerRole::kPrefill), decode(WorkerRole::kDecode);
  prefill.server_info_mode = "decode";  // a decode instance listed under --prefill
  RouterOptions options = test_router_options();
  options.workers = {prefill_spec(prefill), decode_spec(decode)};
  Router router(std::move(options));
  router.start();
  ASSERT_TRUE(shows(router, healthy_series(decode, WorkerRole::kDecode), 1));
  std::this_thread::sleep_for(100ms);  // several checks
  EXPECT_FALSE(router.ready());
  EXPECT_EQ(metric(router.metrics_text(), healthy_series(prefill, WorkerRole::kPrefill)), 0);
  server::HttpClient client;
  const server::HttpClientResponse response = client.fetch(router_call(router, "/v1/completions", R"({"prompt":"x"})"));
  EXPECT_EQ(response.status, 503);
  EXPECT_NE(response.body.find("no prefill instance is healthy"), std::string::npos);
  EXPECT_EQ(prefill.received(), 0u);
}

TEST(RouterFailure, AClientThatLeavesClosesBothUpstreamConnections) {
  FakeWorker prefill(WorkerRole::kPrefill), decode(WorkerRole::kDecode);
  prefill.hold = true;
  decode.hold = true;
  RouterOptions options = test_router_options();
  options.workers = {prefill_spec(prefill), decode_spec(decode)};
  Routed routed(std::move(options));

  auto cancel = std::make_shared<server::HttpCancel>();
  server::HttpCall call = router_call(routed.router, "/v1/chat/completions", chat_body("Hi", true));
  call.cancel = cancel;
  routed.client.start(call);
  ASSERT_TRUE(wait_for([&] { return prefill.received() == 1 && decode.received() == 1; }));
  cancel->cancel();
  EXPECT_TRUE(wait_for([&] { return prefill.disconnects() == 1 && decode.disconnects() == 1; }));
  EXPECT_TRUE(wait_for([&] {
    const std::string text = routed.router.metrics_text();
    return metric(text, in_flight_series(prefill, WorkerRole::kPrefill)) == 0 &&
           metric(text, in_flight_series(decode, WorkerRole::kDecode)) == 0;
  }));
}

}  // namespace
}  // namespace dsinfer::router
