// The router end to end on loopback: a client, the router, and fake prefill (P) and decode (D)
// workers (router_test_util.h). What each worker receives, what the client gets back, and where
// requests go: prefix affinity against load, free slots and KV pages, admission, short prompts.
#include "router/router.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "router/router_test_util.h"

namespace dsinfer::router {
namespace {

using namespace testing;

// A router over `options` (its workers set), started and ready, with a client.
struct Routed {
  explicit Routed(RouterOptions options) : router(std::move(options)) {
    router.start();
    EXPECT_TRUE(wait_for([&] { return router.ready(); })) << router.metrics_text();
  }
  server::HttpClientResponse post(std::string target, std::string body) {
    return client.fetch(router_call(router, std::move(target), std::move(body)));
  }
  server::HttpClientResponse get(std::string target) {
    return client.fetch(router_call(router, std::move(target), "", "GET"));
  }
  Router router;
  server::HttpClient client;
};

TEST(Router, PrefillAndDecodeGetTheClientsBodyWithOneRoomAndThePrefillsAddress) {
  FakeWorker prefill(WorkerRole::kPrefill), decode(WorkerRole::kDecode);
  RouterOptions options = test_router_options();
  options.workers = {prefill_spec(prefill, 8998), decode_spec(decode)};
  Routed routed(std::move(options));

  const server::HttpClientResponse response =
      routed.post("/v1/completions", R"({"model":"m","prompt":"Hello","max_tokens":5,"temperature":0})");
  EXPECT_EQ(response.error, "");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, decode.whole_answer);  // D's answer, as it sent it
  EXPECT_EQ(find_header(response.headers, "content-type"), "application/json");

  // P's answer is not waited for, so its request may still be on its way.
  ASSERT_TRUE(wait_for([&] { return prefill.received() == 1; }));
  ASSERT_EQ(decode.received(), 1u);
  const Json sent_to_prefill = prefill.bodies()[0];
  const Json sent_to_decode = decode.bodies()[0];
  EXPECT_EQ(sent_to_prefill, sent_to_decode);
  EXPECT_EQ(sent_to_prefill.find("prompt")->as_string(), "Hello");
  EXPECT_EQ(sent_to_prefill.find("max_tokens")->as_int(), 5);
  EXPECT_EQ(sent_to_prefill.find("bootstrap_host")->as_string(), "127.0.0.1");
  EXPECT_EQ(sent_to_prefill.find("bootstrap_port")->as_int(), 8998);
  EXPECT_TRUE(sent_to_prefill.find("bootstrap_room")->is_int());
  EXPECT_GE(sent_to_prefill.find("bootstrap_room")->as_int(), 0);

  // A second request draws another room.
  routed.post("/v1/chat/completions", chat_body("Hi"));
  ASSERT_EQ(decode.received(), 2u);
  ASSERT_TRUE(wait_for([&] { return prefill.received() == 2; }));
  EXPECT_NE(decode.bodies()[1].find("bootstrap_room")->as_int(), sent_to_decode.find("bootstrap_room")->as_int());
  EXPECT_EQ(prefill.bodies()[1].find("bootstrap_room")->as_int(), decode.bodies()[1].find("bootstrap_room")->as_int());
}

TEST(Router, TheClientGetsTheDecodeStreamByteForByteAsItArrives) {
  FakeWorker prefill(WorkerRole::kPrefill), decode(WorkerRole::kDecode);
  decode.stream_pieces = {"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n",
                          "data: {\"choices\":[{\"delta\":{\"content\":\"lo \\u00e9\"}}]}\n\n",
                          std::string(10000, 'x') + "\n\n", "data: [DONE]\n\n"};
  decode.stream_pause = 100ms;
  RouterOptions options = test_router_options();
  options.workers = {prefill_spec(prefill), decode_spec(decode)};
  Routed routed(std::move(options));

  const auto start = Clock::now();
  std::string received;
  std::vector<double> arrivals;  // seconds since start
  server::HttpCall call = router_call(routed.router, "/v1/chat/completions", chat_body("Hi", /*stream=*/true));
  call.on_data = [&](std::string_view piece) {
    received += piece;
    arrivals.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  };
  const server::HttpClientResponse response = routed.client.fetch(call);
  const double finished = std::chrono::duration<double>(Clock::now() - start).count();

  EXPECT_EQ(response.error, "");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(find_header(response.headers, "content-type"), "text/event-stream");
  std::string sent;
  for (const std::string& piece : decode.stream_pieces) sent += piece;
  EXPECT_EQ(received, sent);
  ASSERT_FALSE(arrivals.empty());
  EXPECT_LT(arrivals.front(), finished - 0.2) << "the stream was held back until its end";
  // The stream's length reached the decode instance's average output length: its data events but
  // [DONE].
  EXPECT_TRUE(wait_for([&] {
    return metric(routed.router.metrics_text(), str_cat("dsinfer_router_decode_average_output_tokens{worker=\"",
                                                        decode.url(), "\",role=\"decode\"}")) == 2;
  }));
}

TEST(Router, ThePrefillBootstrapPortComesFromServerInfoWhenNotGiven) {
  FakeWorker prefill(WorkerRole::kPrefill), decode(WorkerRole::kDecode);
  prefill.server_info_bootstrap_port = 7123;
  RouterOptions options = test_router_options();
  options.workers = {prefill_spec(prefill, std::nullopt), decode_spec(decode)};
  Routed routed(std::move(options));
  EXPECT_EQ(routed.post("/v1/completions", R"({"prompt":"x"})").status, 200);
  ASSERT_EQ(decode.received(), 1u);
  EXPECT_EQ(decode.bodies()[0].find("bootstrap_port")->as_int(), 7123);
}

TEST(Router, ShortPromptsAreAbsorbedByTheDecodeInstanceWithoutBootstrapFields) {
  FakeWorker prefill(WorkerRole::kPrefill), decode(WorkerRole::kDecode);
  RouterOptions options = test_router_options();
  options.workers = {prefill_spec(prefill), decode_spec(decode)};
  options.decode_absorbs_below = 100;
  Routed routed(std::move(options));

  EXPECT_EQ(routed.post("/v1/completions", R"({"prompt":"short"})").status, 200);
  ASSERT_EQ(decode.received(), 1u);
  EXPECT_EQ(prefill.received(), 0u);
  EXPECT_EQ(decode.bodies()[0], Json::parse(R"({"prompt":"short"})"));

  EXPECT_EQ(routed.post("/v1/completions", str_cat(R"({"prompt":")", std::string(100, 'p'), R"("})")).status, 200);
  EXPECT_TRUE(wait_for([&] { return prefill.received() == 1; }));  // 100 characters: not below the bound
  EXPECT_TRUE(decode.bodies()[1].contains("bootstrap_room"));
}

// A P that holds its requests keeps them in flight, which is the load the threshold weighs.
TEST(Router, ARepeatedLongPrefixStaysOnOnePrefillUntilItsLoadPassesTheThreshold) {
  FakeWorker first(WorkerRole::kPrefill), second(WorkerRole::kPrefill), decode(WorkerRole::kDecode);
  first.hold = true;
  second.hold = true;
  RouterOptions options = test_router_options();
  options.workers = {prefill_spec(first), prefill_spec(second), decode_spec(decode)};
  options.prefix_block_chars = 64;
  options.balance = {.absolute = 2, .relative = 1.5};
  Routed routed(std::move(options));
  // Routed waits for one healthy P; the choices below assume both are. (A loaded machine once
  // sent the first requests before the first P's health check had passed: all went to the second.)
  auto healthy = [&](const FakeWorker& prefill) {
    return metric(routed.router.metrics_text(),
                  str_cat("dsinfer_router_worker_healthy{worker=\"", prefill.url(), "\",role=\"prefill\"}")) == 1;
  };
  ASSERT_TRUE(wait_for([&] { return healthy(first) && healthy(second); }));

  const std::string context(2000, 'c');  // a long shared system prompt
  auto send = [&](const std::string& question) {
    EXPECT_EQ(routed.post("/v1/completions", str_cat(R"({"prompt":")", context, question, R"("})")).status, 200);
  };
  // The load counts from the router's reservation, so each choice is made when send() returns;
  // the P's own receipt may come later.
  send("q1");  // no match anywhere: the least loaded, the first on a tie
  send("q2");  // matches the first: 1 in flight against 0 is within the threshold
  send("q3");  // 2 against 0: still within it
  EXPECT_TRUE(wait_for([&] { return first.received() == 3; }));
  EXPECT_EQ(second.received(), 0u);
  send("q4");  // 3 against 0: more than 2 more and more than 1.5 times as many
  EXPECT_TRUE(wait_for([&] { return second.received() == 1; }));
  EXPECT_EQ(routed.post("/v1/completions", R"({"prompt":"unrelated"})").status, 200);
  EXPECT_TRUE(wait_for([&] { return second.received() == 2; }));  // no match: the least loaded (1 against 3)
  EXPECT_EQ(first.received(), 3u);
  first.release();
  second.release();
  auto in_flight = [&](const FakeWorker& prefill) {
    return metric(routed.router.metrics_text(),
                  str_cat("dsinfer_router_worker_in_flight{worker=\"", prefill.url(), "\",role=\"prefill\"}"));
  };
  EXPECT_TRUE(wait_for([&] { return in_flight(first) == 0 && in_flight(second) == 0; }));
}

TEST(Router, TheDecodeChoiceFollowsFreeSlotsAndKvPages) {
  FakeWorker prefill(WorkerRole::kPrefill), busy(WorkerRole::kDecode), idle(WorkerRole::kDecode);
  busy.server_info_max_running_requests = 100;
  idle.server_info_max_running_requests = 100;
  busy.reported_running = 60;  // other routers' requests
  RouterOptions options = test_router_options();
  options.workers = {prefill_spec(prefill), decode_spec(busy), decode_spec(idle)};
  Routed routed(std::move(options));
  const std::string slots_left = str_cat("dsinfer_router_decode_slots_remaining{worker=\"", busy.url(),
                                         "\",role=\"decode\"}");
  ASSERT_TRUE(wait_for([&] { return metric(routed.router.metrics_text(), slots_left) == 40; }));

  EXPECT_EQ(routed.post("/v1/completions", R"({"prompt":"a"})").status, 200);
  EXPECT_EQ(idle.received(), 1u);  // 100 free slots against 40

  // The idle one's KV cache is nearly full: 10% free against the busy one's 40% free slots.
  idle.reported_used_tokens = 90000;
  busy.reported_used_tokens = 0;
  ASSERT_TRUE(wait_for([&] {
    routed.post("/v1/completions", R"({"prompt":"b"})");
    return busy.received() > 0;
  }));
}

TEST(Router, AFullDecodePoolQueuesRequestsThenRefusesThemWith503) {
  FakeWorker prefill(WorkerRole::kPrefill), decode(WorkerRole::kDecode);
  decode.hold = true;
  RouterOptions options = test_router_options();
  options.workers = {prefill_spec(prefill), decode_spec(decode)};
  options.registry.decode_slots = 1;
  options.max_queued_requests = 1;
  options.scale_out_window = 100ms;
  Routed routed(std::move(options));

  auto first = std::make_shared<std::promise<server::HttpClientResponse>>();
  auto second = std::make_shared<std::promise<server::HttpClientResponse>>();
  server::HttpCall call = router_call(routed.router, "/v1/completions", R"({"prompt":"1"})");
  call.on_done = [first](const server::HttpClientResponse& r) { first->set_value(r); };
  routed.client.start(call);
  ASSERT_TRUE(wait_for([&] { return decode.received() == 1; }));
  call = router_call(routed.router, "/v1/completions", R"({"prompt":"2"})");
  call.on_done = [second](const server::HttpClientResponse& r) { second->set_value(r); };
  routed.client.start(call);
  ASSERT_TRUE(wait_for([&] { return metric(routed.router.metrics_text(), "dsinfer_router_queue_length") == 1; }));

  const server::HttpClientResponse refused = routed.post("/v1/completions", R"({"prompt":"3"})");
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(find_header(refused.headers, "retry-after"), "1");
  const Json error = Json::parse(refused.body);
  EXPECT_NE(error.find("error")->find("message")->as_string().find("--max-queued-requests"), std::string::npos);
  EXPECT_EQ(error.find("error")->find("type")->as_string(), "server_error");
  EXPECT_TRUE(wait_for([&] {
    return metric(routed.router.metrics_text(), "dsinfer_router_scale_out_recommended") == 1;
  })) << routed.router.metrics_text();
  EXPECT_EQ(decode.received(), 1u);

  decode.release();  // the slot frees: the queued request goes on
  EXPECT_EQ(first->get_future().get().status, 200);
  ASSERT_TRUE(wait_for([&] { return decode.received() == 2; }));
  decode.release();
  EXPECT_EQ(second->get_future().get().status, 200);
  const std::string text = routed.router.metrics_text();
  EXPECT_EQ(metric(text, "dsinfer_router_queue_length"), 0);
  EXPECT_EQ(metric(text, "dsinfer_router_scale_out_recommended"), 0);
  EXPECT_EQ(metric(text, "dsinfer_router_rejected_total"), 1);
}

TEST(Router, ManyConcurrentStreamsThroughFewSlotsAllArriveWholeAndGiveTheirSlotsBack) {
  FakeWorker prefill(WorkerRole::kPrefill), first(WorkerRole::kDecode), second(WorkerRole::kDecode);
  for (FakeWorker* decode : {&first, &second}) decode->stream_pause = 2ms;
  RouterOptions options = test_router_options();
  options.workers = {prefill_spec(prefill), decode_spec(first), decode_spec(second)};
  options.registry.decode_slots = 4;
  Routed routed(std::move(options));

  constexpr int kRequests = 64;
  std::string expected;
  for (const std::string& piece : first.stream_pieces) expected += piece;
  std::mutex mutex;
  std::vector<std::string> bodies(kRequests);
  std::vector<int> statuses;
  std::promise<void> all_done;
  for (int i = 0; i < kRequests; ++i) {
    server::HttpCall call =
        router_call(routed.router, "/v1/completions", str_cat(R"({"stream":true,"prompt":")", i, R"("})"));
    call.on_data = [&, i](std::string_view piece) {
      std::lock_guard lock(mutex);
      bodies[i] += piece;
    };
    call.on_done = [&](const server::HttpClientResponse& response) {
      std::lock_guard lock(mutex);
      statuses.push_back(response.status);
      if (statuses.size() == kRequests) all_done.set_value();
    };
    routed.client.start(call);
  }
  ASSERT_EQ(all_done.get_future().wait_for(20s), std::future_status::ready);
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 200), kRequests);
  for (const std::string& body : bodies) EXPECT_EQ(body, expected);
  EXPECT_EQ(first.received() + second.received(), size_t{kRequests});
  EXPECT_GT(first.received(), 0u);
  EXPECT_GT(second.received(), 0u);
  auto in_flight = [&](const FakeWorker& worker, std::string_view role) {
    return metric(routed.router.metrics_text(),
                  str_cat("dsinfer_router_worker_in_flight{worker=\"", worker.url(), "\",role=\"", role, "\"}"));
  };
  EXPECT_TRUE(wait_for([&] {
    return in_flight(prefill, "prefill") == 0 && in_flight(first, "decode") == 0 && in_flight(second, "decode") == 0;
  }));
}

TEST(Router, AQueuedRequestGetsA503AfterTheQueueTimeout) {
  FakeWorker prefill(WorkerRole::kPrefill), decode(WorkerRole::kDecode);
  decode.hold = true;
  RouterOptions options = test_router_options();
  options.workers = {prefill_spec(prefill), decode_spec(decode)};
  options.registry.decode_slots = 1;
  options.queue_timeout = 100ms;
  Routed routed(std::move(options));
  server::HttpCall held = router_call(routed.router, "/v1/completions", R"({"prompt":"1"})");
  routed.client.start(held);
  ASSERT_TRUE(wait_for([&] { return decode.received() == 1; }));
  const server::HttpClientResponse waited = routed.post("/v1/completions", R"({"prompt":"2"})");
  EXPECT_EQ(waited.status, 503);
  EXPECT_NE(waited.body.find("--queue-timeout"), std::string::npos);
  EXPECT_EQ(metric(routed.router.metrics_text(), "dsinfer_router_queue_timeouts_total"), 1);
  decode.release();
}

TEST(Router, HealthModelsAndMetricsAreTheRoutersOwn) {
  FakeWorker prefill(WorkerRole::kPrefill), decode(WorkerRole::kDecode);
  RouterOptions options = test_router_options();
  options.workers = {prefill_spec(prefill), decode_spec(decode)};
  Routed routed(std::move(options));
  EXPECT_EQ(routed.get("/health").status, 200);
  const server::HttpClientResponse models = routed.get("/v1/models");
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(models.body, R"({"object":"list","data":[]})");
  const server::HttpClientResponse metrics = routed.get("/metrics");
  EXPECT_EQ(metric(metrics.body, str_cat("dsinfer_router_worker_healthy{worker=\"", prefill.url(),
                                         "\",role=\"prefill\"}")),
            1);
  EXPECT_EQ(metric(metrics.body, str_cat("dsinfer_router_decode_slots{worker=\"", decode.url(), "\",role=\"decode\"}")),
            256);  // no --decode-slots, no max_running_requests: the default
  EXPECT_EQ(routed.get("/nowhere").status, 404);
  EXPECT_EQ(routed.get("/v1/completions").status, 405);
  EXPECT_EQ(routed.post("/v1/completions", "{not json").status, 400);

  decode.health_status = 503;
  EXPECT_TRUE(wait_for([&] { return routed.get("/health").status == 503; }));
  EXPECT_EQ(routed.post("/v1/completions", R"({"prompt":"x"})").status, 503);
  EXPECT_EQ(routed.get("/v1/models").status, 503);
}

}  // namespace
}  // namespace dsinfer::router
