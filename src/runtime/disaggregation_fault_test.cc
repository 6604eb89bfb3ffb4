// Prefill/decode disaggregation's faults (pd_pair_testing.h): a destination that never comes, a note
// that never comes, an announce that fails, a decode peer that stalls or closes mid-push, a prefill
// agent destroyed mid-push, aborts on either side mid-handoff. Each fails or aborts the requests it
// touches with a clear error, gives every page back on both engines (a decode side keeps the pages
// a prefill side may still write until no write can land), and leaves both engines serving.
#include <gtest/gtest.h>

#include "runtime/pd_pair_testing.h"

namespace dsinfer::runtime {
namespace {

using namespace testing;

constexpr auto kTimeout = 400ms;

class DisaggregationFaultTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { models_ = new Models; }
  static void TearDownTestSuite() { delete models_; }

  static PairOptions short_timeouts() {
    PairOptions options;
    options.bootstrap_timeout = kTimeout;
    return options;
  }

  static void expect_failed(Collector& collector, const std::string& words) {
    ASSERT_TRUE(collector.wait());
    EXPECT_EQ(collector.reason, FinishReason::kError);
    EXPECT_NE(collector.error.find(words), std::string::npos) << collector.error;
  }

  // After a fault: every page back on both engines, plain requests served, and a handoff that lands.
  static void expect_recovered(PdPair& pair) {
    expect_every_page_back(pair.prefill());
    expect_every_page_back(pair.decode());
    expect_plain_requests_work(*models_, pair);
    pair.announcer->set(Announcer::Policy::kDeliver);
    pair.prefill_agent->stalled = pair.decode_agent->stalled = false;
    pair.decode_agent->deaf = false;
    const std::vector<int32_t> prompt = prompt_of(70, 9);
    const std::vector<std::shared_ptr<Collector>> expected = reference_outputs(*models_, {prompt}, {greedy(5)});
    Handed handed = pair.submit(prompt, greedy(5), "after");
    ASSERT_TRUE(handed.decode->wait());
    EXPECT_EQ(handed.decode->reason, FinishReason::kLength) << handed.decode->error;
    EXPECT_EQ(handed.decode->tokens, expected[0]->tokens);
    ASSERT_TRUE(handed.prefill->wait());
    EXPECT_EQ(handed.prefill->reason, FinishReason::kLength) << handed.prefill->error;
    expect_every_page_back(pair.prefill());
    expect_every_page_back(pair.decode());
  }

  static Models* models_;
};

Models* DisaggregationFaultTest::models_ = nullptr;

TEST_F(DisaggregationFaultTest, DestinationThatNeverComesFailsBothSides) {
  PdPair pair(*models_, short_timeouts());
  pair.announcer->set(Announcer::Policy::kDrop);
  Handed handed = pair.submit(prompt_of(100, 3), greedy(5), "lost");
  expect_failed(*handed.prefill, "no destination for room 'lost'");
  expect_failed(*handed.decode, "no KV for room 'lost'");
  EXPECT_EQ(handed.prefill->tokens.size(), 1u);  // it sampled; only the push never went
  expect_recovered(pair);
}

TEST_F(DisaggregationFaultTest, NoteThatNeverComesFailsTheDecodeSide) {
  PdPair pair(*models_, short_timeouts());
  pair.decode_agent->deaf = true;
  Handed handed = pair.submit(prompt_of(130, 4), greedy(5), "deaf");
  ASSERT_TRUE(handed.prefill->wait());
  EXPECT_EQ(handed.prefill->reason, FinishReason::kLength) << "the push itself landed";
  expect_failed(*handed.decode, "no KV for room 'deaf'");
  expect_recovered(pair);
}

TEST_F(DisaggregationFaultTest, FailedAnnounceFailsTheDecodeSideAtOnce) {
  PdPair pair(*models_, short_timeouts());
  pair.announcer->set(Announcer::Policy::kFail);
  const auto start = std::chrono::steady_clock::now();
  Handed handed = pair.submit(prompt_of(20, 5), greedy(5), "unannounced");
  expect_failed(*handed.decode, "the bootstrap server is unreachable");
  EXPECT_LT(std::chrono::steady_clock::now() - start, kTimeout);
  expect_failed(*handed.prefill, "no destination for room 'unannounced'");
  expect_recovered(pair);
}

TEST_F(DisaggregationFaultTest, StalledDecodePeerFailsThePushAndTheDecodeSideTimesOut) {
  PairOptions options = short_timeouts();
  options.bootstrap_timeout = 800ms;
  options.transfer_timeout = 200ms;  // the prefill agent's: a stalled peer fails its transfers
  PdPair pair(*models_, options);
  pair.decode_agent->stalled = true;
  Handed handed = pair.submit(prompt_of(180, 6), greedy(5), "stalled");
  expect_failed(*handed.prefill, "the KV push of room 'stalled' failed");
  expect_failed(*handed.decode, "no KV for room 'stalled'");
  pair.decode_agent->stalled = false;
  expect_recovered(pair);  // the prefill agent connects to the decode agent again
}

TEST_F(DisaggregationFaultTest, PrefillAgentDestroyedMidPushLeavesTheDecodeSideToTimeOut) {
  PdPair pair(*models_, short_timeouts());
  pair.decode_agent->stalled = true;  // the push stays in flight
  Handed handed = pair.submit(prompt_of(180, 7), greedy(5), "orphan");
  ASSERT_TRUE(handed.prefill->wait_for_tokens(1));
  std::this_thread::sleep_for(50ms);
  pair.destroy_prefill(/*restart=*/true);
  ASSERT_TRUE(handed.prefill->wait());
  EXPECT_EQ(handed.prefill->reason, FinishReason::kAbort);
  expect_failed(*handed.decode, "no KV for room 'orphan'");
  pair.decode_agent->stalled = false;
  expect_recovered(pair);
}

TEST_F(DisaggregationFaultTest, DecodeAgentDestroyedMidPushFailsThePush) {
  PairOptions options = short_timeouts();
  options.transfer_timeout = 10s;  // the closed peer, not the timeout, must end the transfer
  PdPair pair(*models_, options);
  pair.decode_agent->stalled = true;
  Handed handed = pair.submit(prompt_of(180, 11), greedy(5), "closed");
  ASSERT_TRUE(handed.prefill->wait_for_tokens(1));
  std::this_thread::sleep_for(50ms);
  const auto start = std::chrono::steady_clock::now();
  pair.destroy_decode();
  ASSERT_TRUE(handed.decode->wait());
  EXPECT_EQ(handed.decode->reason, FinishReason::kAbort);
  expect_failed(*handed.prefill, "the KV push of room 'closed' failed");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "the transfer timeout ended it, not the closed peer";
  expect_every_page_back(pair.prefill());
}

TEST_F(DisaggregationFaultTest, PrefillAbortWhileWaitingForItsDestination) {
  PdPair pair(*models_, short_timeouts());
  pair.announcer->set(Announcer::Policy::kHold);
  Handed handed = pair.submit(prompt_of(100, 8), greedy(5), "abandoned");
  ASSERT_TRUE(handed.prefill->wait_for_tokens(1));
  pair.prefill().abort(handed.prefill_id);
  ASSERT_TRUE(handed.prefill->wait());
  EXPECT_EQ(handed.prefill->reason, FinishReason::kAbort);
  pair.announcer->deliver_held();  // too late: no request takes it, and it expires
  expect_failed(*handed.decode, "no KV for room 'abandoned'");
  expect_recovered(pair);
}

TEST_F(DisaggregationFaultTest, DecodeAbortWhileWaitingForItsNote) {
  PairOptions options = short_timeouts();
  options.bootstrap_timeout = 2s;  // the note, not the quarantine's end, gives the pages back
  PdPair pair(*models_, options);
  pair.announcer->set(Announcer::Policy::kHold);
  Handed handed = pair.submit(prompt_of(100, 9), greedy(5), "gone");
  for (int i = 0; i < 2000 && pair.announcer->count() == 0; ++i) std::this_thread::sleep_for(1ms);
  pair.decode().abort(handed.decode_id);
  ASSERT_TRUE(handed.decode->wait());
  EXPECT_EQ(handed.decode->reason, FinishReason::kAbort);
  pair.announcer->deliver_held();  // the prefill side still writes the pages, which the decode side kept
  ASSERT_TRUE(handed.prefill->wait());
  EXPECT_EQ(handed.prefill->reason, FinishReason::kLength) << handed.prefill->error;
  expect_every_page_back(pair.decode(), 1s);
  expect_recovered(pair);
}

TEST_F(DisaggregationFaultTest, PrefillAbortMidPushFreesItsPagesOnceTheTransferSettles) {
  PairOptions options = short_timeouts();
  options.transfer_timeout = 200ms;
  PdPair pair(*models_, options);
  pair.decode_agent->stalled = true;
  Handed handed = pair.submit(prompt_of(180, 10), greedy(5), "cut");
  ASSERT_TRUE(handed.prefill->wait_for_tokens(1));
  pair.prefill().abort(handed.prefill_id);
  ASSERT_TRUE(handed.prefill->wait());
  EXPECT_EQ(handed.prefill->reason, FinishReason::kAbort);
  expect_every_page_back(pair.prefill());  // once the stalled transfer has failed
  expect_failed(*handed.decode, "no KV for room 'cut'");
  pair.decode_agent->stalled = false;
  expect_recovered(pair);
}

}  // namespace
}  // namespace dsinfer::runtime
