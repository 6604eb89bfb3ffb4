// Dispatch and combine against the whole expert stack on one rank, through the all-to-all
// (ExpertDispatch) and through the low-latency peer buffers (PeerExchange): ranks as threads on the
// CPU, skewed routing (every token to the first rank's experts, one rank receiving nothing, one
// sending nothing), and EPLB-style slot ids.
#include "parallel/expert_dispatch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "backend/backend.h"
#include "parallel/local_communicator.h"
#include "parallel/peer_exchange.h"

namespace dsinfer::parallel {
namespace {

constexpr int64_t kHidden = 16, kInter = 8, kTopK = 3;

Tensor random_tensor(Shape shape, uint32_t seed) {
  Tensor t = Tensor::empty(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = uniform(rng);
  return t;
}

// The stack of `count` experts from `first` of a layer whose expert e's weights are seeded by e.
backend::ExpertStack experts(int64_t first, int64_t count) {
  Tensor gate_up = Tensor::empty(DType::kF32, {count, 2 * kInter, kHidden});
  Tensor down = Tensor::empty(DType::kF32, {count, kHidden, kInter});
  for (int64_t e = 0; e < count; ++e) {
    Tensor a = random_tensor({2 * kInter, kHidden}, static_cast<uint32_t>(100 + first + e));
    Tensor b = random_tensor({kHidden, kInter}, static_cast<uint32_t>(200 + first + e));
    std::copy_n(a.data<float>(), a.numel(), gate_up.data<float>() + e * a.numel());
    std::copy_n(b.data<float>(), b.numel(), down.data<float>() + e * b.numel());
  }
  backend::ExpertStack stack;
  stack.gate_up.data = gate_up;
  stack.down.data = down;
  stack.first_expert = first;
  return stack;
}

// Rank r's routing: T tokens, each choosing kTopK distinct ids by `pick`.
backend::Routing routing(int64_t T, const std::function<int32_t(int64_t, int64_t)>& pick, uint32_t seed) {
  backend::Routing r{Tensor::empty(DType::kI32, {T, kTopK}), random_tensor({T, kTopK}, seed)};
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < kTopK; ++j) r.expert_ids.data<int32_t>()[t * kTopK + j] = pick(t, j);
  return r;
}

void expect_close(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-5f) << what << ", element " << i;
}

// How the tokens travel: NCCL-style all-to-all (ExpertDispatch), or the low-latency peer buffers
// (PeerExchange, sized for `capacity` tokens a rank).
struct Path {
  bool peer = false;
  int64_t capacity = 0;
};

// Each rank dispatches its tokens, runs its two experts on what came and combines; its result must
// equal moe_experts over all of the layer's experts on its own tokens. `layers` exchanges in a row
// (the peer buffers and their signals are reused), each with its own tokens, routing and experts.
void check_against_the_whole_stack(const std::vector<int64_t>& tokens,
                                   const std::function<int32_t(int, int64_t, int64_t)>& pick, Path path = {},
                                   int layers = 1) {
  const int ranks = static_cast<int>(tokens.size());
  const int64_t per_rank = 2;
  auto group = make_local_group(ranks);
  auto peers = path.peer ? make_peer_exchanges(ranks, path.capacity, make_cpu_peer_device())
                         : std::vector<std::unique_ptr<PeerExchange>>{};
  std::vector<std::string> failures(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto backend = backend::make_cpu_backend();
        for (int layer = 0; layer < layers; ++layer) {
          const int64_t T = (tokens[r] + layer) % (path.peer ? path.capacity + 1 : tokens[r] + layer + 1);
          const auto seed = static_cast<uint32_t>(r + 10 * layer);
          Tensor x = random_tensor({T, kHidden}, seed);
          backend::Routing route = routing(T, [&](int64_t t, int64_t j) { return pick(r, t + layer, j); }, 50 + seed);
          const int64_t first = r * per_rank + 100 * layer;  // each layer's experts differ
          backend::ExpertStack mine = experts(first, per_rank);
          mine.first_expert = r * per_rank;
          Tensor out;
          if (path.peer) {
            PeerExchange::Received received = peers[r]->dispatch(*backend, x, route, per_rank);
            out = peers[r]->combine(*backend, backend->moe_experts(received.tokens, received.routing, mine));
          } else {
            ExpertDispatch dispatch(*backend, *group[r], x, route, per_rank);
            out = dispatch.combine(backend->moe_experts(dispatch.tokens(), dispatch.routing(), mine));
          }
          backend::ExpertStack all = experts(100 * layer, per_rank * ranks);
          all.first_expert = 0;
          Tensor whole = backend->moe_experts(x, route, all);
          expect_close(out, whole, "rank " + std::to_string(r) + ", layer " + std::to_string(layer));
        }
      } catch (const std::exception& error) {
        failures[r] = error.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
}

int32_t spread(int r, int64_t t, int64_t j) { return static_cast<int32_t>((r * 7 + t * 5 + j * 2) % 6); }

// Every token picks experts 0 and 1 (rank 0) and 4 or 5 (rank 2): rank 1 receives no row.
int32_t skewed(int, int64_t t, int64_t j) { return j < 2 ? static_cast<int32_t>(j) : static_cast<int32_t>(4 + t % 2); }

TEST(ExpertDispatch, CombinedResultsEqualTheWholeStackOnEachRanksTokens) {
  check_against_the_whole_stack({5, 3, 4}, spread);  // ids spread over all 6 experts of 3 ranks
}

TEST(ExpertDispatch, SkewedRoutingLeavesARankWithNothingToComputeOrNothingToSend) {
  check_against_the_whole_stack({6, 2, 0}, skewed);  // rank 2 has no token of its own
}

// The low-latency path gives the same sums, layer after layer through the same buffers, with a
// rank at the buffers' capacity, ranks with fewer tokens, and ranks with none.
TEST(PeerExchange, CombinedResultsEqualTheWholeStackLayerAfterLayer) {
  check_against_the_whole_stack({5, 3, 6}, spread, {.peer = true, .capacity = 6}, 5);
}

TEST(PeerExchange, SkewedRoutingAndEmptyRanksLayerAfterLayer) {
  check_against_the_whole_stack({6, 2, 0}, skewed, {.peer = true, .capacity = 6}, 4);
}

TEST(PeerExchange, AStepLargerThanTheBuffersIsRefusedAndTheExecutorsCountDecides) {
  auto peers = make_peer_exchanges(1, 4, make_cpu_peer_device());
  EXPECT_FALSE(peers[0]->fits_step());  // no step announced: the all-to-all
  peers[0]->set_step_tokens(4);
  EXPECT_TRUE(peers[0]->fits_step());
  peers[0]->set_step_tokens(5);
  EXPECT_FALSE(peers[0]->fits_step());
  auto backend = backend::make_cpu_backend();
  Tensor x = random_tensor({5, kHidden}, 1);
  EXPECT_THROW(peers[0]->dispatch(*backend, x, routing(5, [](int64_t, int64_t j) { return int32_t(j); }, 2), 3), Error);
}

// The halves (send, receive, send back, receive back) go in that order only: a receive without its
// send would wait for rows nobody sends.
TEST(PeerExchange, HalvesOutOfOrderAreRefused) {
  auto peers = make_peer_exchanges(1, 4, make_cpu_peer_device());
  auto backend = backend::make_cpu_backend();
  EXPECT_THROW(peers[0]->receive(*backend), Error);
  Tensor x = random_tensor({2, kHidden}, 1);
  peers[0]->send(*backend, x, routing(2, [](int64_t, int64_t j) { return int32_t(j); }, 2), 3);
  EXPECT_THROW(peers[0]->send(*backend, x, routing(2, [](int64_t, int64_t j) { return int32_t(j); }, 2), 3), Error);
  EXPECT_THROW(peers[0]->receive_back(*backend), Error);
  PeerExchange::Received received = peers[0]->receive(*backend);
  peers[0]->send_back(*backend, received.tokens);
  EXPECT_EQ(peers[0]->receive_back(*backend).dim(0), 2);
}

// A rank that fails before its dispatch leaves the others waiting for its rows: aborting the group
// wakes them with an error instead.
TEST(PeerExchange, AbortWakesARankWaitingForASenderThatNeverComes) {
  auto peers = make_peer_exchanges(2, 4, make_cpu_peer_device());
  std::string error;
  std::thread waiting([&] {
    try {
      auto backend = backend::make_cpu_backend();
      Tensor x = random_tensor({2, kHidden}, 1);
      peers[0]->dispatch(*backend, x, routing(2, [](int64_t, int64_t j) { return int32_t(j); }, 2), 2);
    } catch (const Error& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  peers[1]->abort();
  waiting.join();
  EXPECT_NE(error.find("aborted"), std::string::npos) << error;
}

TEST(ExpertDispatch, AnIdNoRankHoldsIsRefused) {
  auto group = make_local_group(1);
  auto backend = backend::make_cpu_backend();
  Tensor x = random_tensor({1, kHidden}, 1);
  backend::Routing bad = routing(1, [](int64_t, int64_t j) { return static_cast<int32_t>(j == 0 ? 9 : j); }, 2);
  EXPECT_THROW(ExpertDispatch(*backend, *group[0], x, bad, 2), Error);
}

}  // namespace
}  // namespace dsinfer::parallel
