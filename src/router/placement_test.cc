// The placement rules alone (placement.h, prefix_record.h): prefix matches over chained block
// hashes, the cache-aware choice of a prefill instance with its two thresholds, and the choice of a
// decode instance by its scarcer resource.
#include "router/placement.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "router/prefix_record.h"

namespace dsinfer::router {
namespace {

TEST(PrefixRecord, AMatchCountsTheLeadingWholeBlocksOfAPromptSentBefore) {
  PrefixRecord record(100);
  const std::string prompt(1000, 'a');
  record.insert(prefix_block_hashes(prompt + "first question", 100));
  EXPECT_EQ(prefix_block_hashes(prompt, 100).size(), 10u);
  EXPECT_EQ(record.match(prefix_block_hashes(prompt + "second question", 100)), 10u);
  EXPECT_EQ(record.match(prefix_block_hashes("b" + prompt, 100)), 0u);  // one character differs at the start
  EXPECT_EQ(record.match(prefix_block_hashes(prompt.substr(0, 99), 100)), 0u);  // no whole block
}

TEST(PrefixRecord, TheLeastRecentlyUsedPathsAreForgottenFromTheirEnds) {
  PrefixRecord record(6);
  const std::vector<uint64_t> old_prompt = prefix_block_hashes(std::string(400, 'o'), 100);
  const std::vector<uint64_t> new_prompt = prefix_block_hashes(std::string(400, 'n'), 100);
  record.insert(old_prompt);
  record.insert(new_prompt);  // 8 blocks for 6 places: the old prompt's last two go
  EXPECT_EQ(record.size(), 6u);
  EXPECT_EQ(record.match(new_prompt), 4u);
  EXPECT_EQ(record.match(old_prompt), 2u);  // its start is kept, as a radix cache keeps a prefix
  record.clear();
  EXPECT_EQ(record.match(new_prompt), 0u);
}

TEST(Placement, TheLongestMatchWinsUntilItsLoadPassesBothThresholds) {
  const BalanceThresholds thresholds{.absolute = 4, .relative = 2.0};
  std::vector<PrefillCandidate> candidates = {{0, 3, 0}, {1, 6, 5}, {2, 5, 2}};
  EXPECT_EQ(choose_prefill(candidates, thresholds), 1u);  // 6 - 3 is within 4
  candidates[1].in_flight = 8;                            // 8 - 3 > 4 and 8 > 2 * 3: the least loaded
  EXPECT_EQ(choose_prefill(candidates, thresholds), 0u);
  candidates[0].in_flight = 4;  // 8 - 4 > 4 fails: the match stands
  EXPECT_EQ(choose_prefill(candidates, thresholds), 1u);
  candidates = {{0, 40, 0}, {1, 50, 3}};  // 10 more, but not twice as many: the match stands
  EXPECT_EQ(choose_prefill(candidates, thresholds), 1u);
}

TEST(Placement, NoMatchGoesToTheLeastLoadedPrefillAndTiesToTheFirst) {
  const BalanceThresholds thresholds;
  EXPECT_EQ(choose_prefill(std::vector<PrefillCandidate>{{0, 2, 0}, {1, 1, 0}, {2, 1, 0}}, thresholds), 1u);
  EXPECT_EQ(choose_prefill(std::vector<PrefillCandidate>{{0, 0, 0}, {1, 0, 0}}, thresholds), 0u);
  // Equal matches: the less loaded.
  EXPECT_EQ(choose_prefill(std::vector<PrefillCandidate>{{0, 3, 2}, {1, 1, 2}}, thresholds), 1u);
}

TEST(Placement, TheDecodeWithTheMostHeadroomInItsScarcerResourceWins) {
  // Free slots 0.5 and 0.9; KV free 0.9 and 0.2: the second is short of KV pages.
  const std::vector<DecodeCandidate> candidates = {{0, 50, 100, 10, 100}, {1, 10, 100, 80, 100}};
  EXPECT_DOUBLE_EQ(decode_headroom(candidates[0]), 0.5);
  EXPECT_DOUBLE_EQ(decode_headroom(candidates[1]), 0.2);
  EXPECT_EQ(choose_decode(candidates), 0u);
  // Unreported KV counts as free; then slots decide, and equal headroom goes to the fewer requests.
  EXPECT_EQ(choose_decode(std::vector<DecodeCandidate>{{0, 5, 10, 0, 0}, {1, 2, 10, 0, 0}}), 1u);
  EXPECT_EQ(choose_decode(std::vector<DecodeCandidate>{{0, 10, 20, 0, 0}, {1, 5, 10, 0, 0}}), 1u);
}

WorkerRegistry two_by_two() {
  RegistryOptions options;
  options.decode_slots = 2;
  WorkerRegistry workers({{WorkerRole::kPrefill, "http://p1:1", 8998},
                          {WorkerRole::kPrefill, "http://p2:1", 8998},
                          {WorkerRole::kDecode, "http://d1:1", std::nullopt},
                          {WorkerRole::kDecode, "http://d2:1", std::nullopt}},
                         options);
  for (size_t id = 0; id < workers.size(); ++id) workers.mark_healthy(id);
  return workers;
}

TEST(Placement, OnlyHealthyWorkersWithASlotLeftAndNotExcludedArePlaced) {
  WorkerRegistry workers = two_by_two();
  Placement placement;
  ASSERT_EQ(place(workers, {}, false, {}, {}, &placement), PlaceOutcome::kPlaced);
  EXPECT_EQ(placement.prefill, 0u);
  EXPECT_EQ(placement.decode, 2u);

  const std::vector<size_t> failed = {0, 2};
  ASSERT_EQ(place(workers, {}, false, {}, failed, &placement), PlaceOutcome::kPlaced);
  EXPECT_EQ(placement.prefill, 1u);
  EXPECT_EQ(placement.decode, 3u);

  ASSERT_EQ(place(workers, {}, /*decode_alone=*/true, {}, {}, &placement), PlaceOutcome::kPlaced);
  EXPECT_FALSE(placement.prefill.has_value());

  workers[2].in_flight = 2;
  workers[3].in_flight = 2;
  EXPECT_EQ(place(workers, {}, false, {}, {}, &placement), PlaceOutcome::kNoSlot);
  workers[3].in_flight = 0;
  workers.mark_unhealthy(3, "test");
  EXPECT_EQ(place(workers, {}, false, {}, {}, &placement), PlaceOutcome::kNoSlot);
  workers.mark_unhealthy(2, "test");
  EXPECT_EQ(place(workers, {}, false, {}, {}, &placement), PlaceOutcome::kNoDecode);
  workers.mark_unhealthy(0, "test");
  workers.mark_unhealthy(1, "test");
  EXPECT_EQ(place(workers, {}, false, {}, {}, &placement), PlaceOutcome::kNoPrefill);
}

TEST(WorkerRegistry, ADecodeLoadCountsOtherRoutersRequestsFromItsLastReport) {
  WorkerRegistry workers = two_by_two();
  Worker& decode = workers[2];
  decode.in_flight = 1;
  workers.apply_loads(2, Json::parse(R"({"loads":[{"num_running_reqs":3,"num_waiting_reqs":1,
      "num_used_tokens":640,"max_total_num_tokens":6400,"gen_throughput":50.0}]})"));
  EXPECT_EQ(decode.load(), 4);  // 3 of other routers' and ours
  decode.in_flight = 2;         // one more of ours since the report
  EXPECT_EQ(decode.load(), 5);
  EXPECT_EQ(decode.remaining_slots(), 0);
  decode.in_flight = 0;  // ours ended: the others' 3 remain
  EXPECT_EQ(decode.load(), 3);
  EXPECT_EQ(decode.reported->total_tokens, 6400);
}

TEST(WorkerRegistry, ServerInfoIsCheckedAgainstTheRole) {
  RegistryOptions options;
  options.default_decode_slots = 5;
  WorkerRegistry workers({{WorkerRole::kPrefill, "http://p:1", std::nullopt}, {WorkerRole::kDecode, "http://d:1", {}}},
                         options);
  EXPECT_NE(workers.apply_server_info(0, Json::parse(R"({"disaggregation_mode":"null"})")).find("both phases"),
            std::string::npos);
  EXPECT_NE(workers.apply_server_info(0, Json::parse(R"({"disaggregation_mode":"decode"})")).find("--decode"),
            std::string::npos);
  EXPECT_NE(workers.apply_server_info(0, Json::parse(R"({"disaggregation_mode":"prefill"})")).find("bootstrap port"),
            std::string::npos);
  EXPECT_EQ(workers.apply_server_info(0, Json::parse(R"({"disaggregation_mode":"prefill",
      "disaggregation_bootstrap_port":9000})")), "");
  EXPECT_EQ(workers[0].bootstrap_port, 9000);
  EXPECT_EQ(workers.apply_server_info(1, Json()), "");  // no /server_info: the defaults
  EXPECT_EQ(workers[1].slots, 5);
  EXPECT_EQ(workers.apply_server_info(1, Json::parse(R"({"max_running_requests":64})")), "");
  EXPECT_EQ(workers[1].slots, 64);
}

TEST(WorkerRegistry, BadWorkerListsAreRefused) {
  EXPECT_THROW(WorkerRegistry({{WorkerRole::kDecode, "d:1", {}}}, {}), dsinfer::Error);
  EXPECT_THROW(WorkerRegistry({{WorkerRole::kDecode, "http://d:1/v1", {}}}, {}), dsinfer::Error);
  EXPECT_THROW(WorkerRegistry({{WorkerRole::kDecode, "http://d:1", {}}, {WorkerRole::kPrefill, "http://d:1/", {}}}, {}),
               dsinfer::Error);
}

}  // namespace
}  // namespace dsinfer::router
