#include "parallel/local_communicator.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <thread>

#include "core/error.h"

namespace dsinfer::parallel {
namespace {

// Runs body(rank, communicator) on one thread per rank of a new group; rethrows a rank's failure.
void on_every_rank(int size, const std::function<void(int, Communicator&)>& body) {
  auto group = make_local_group(size);
  std::vector<std::exception_ptr> failures(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r, *group[r]);
      } catch (...) {
        failures[r] = std::current_exception();
      }
    });
  for (auto& thread : threads) thread.join();
  for (auto& failure : failures)
    if (failure) std::rethrow_exception(failure);
}

// Rank r's rows: row i of rank r holds values r * 1000 + i * 10 + column.
Tensor rows_of(int rank, int64_t rows, int64_t width) {
  Tensor t = Tensor::empty(DType::kF32, {rows, width});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < width; ++c) t.data<float>()[i * width + c] = static_cast<float>(rank * 1000 + i * 10 + c);
  return t;
}

TEST(LocalCommunicator, AllReduceGivesEveryRankTheSameSum) {
  const int size = 4;
  std::vector<std::vector<float>> results(size);
  on_every_rank(size, [&](int rank, Communicator& group) {
    std::mt19937 random(rank);
    std::uniform_real_distribution<float> uniform(-1, 1);
    Tensor x = Tensor::empty(DType::kF32, {3, 5});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = uniform(random);
    group.all_reduce_sum(x);
    results[rank].assign(x.data<float>(), x.data<float>() + x.numel());
  });
  std::vector<float> expected(15, 0.0f);
  for (int r = 0; r < size; ++r) {
    std::mt19937 random(r);
    std::uniform_real_distribution<float> uniform(-1, 1);
    for (float& value : expected) value += uniform(random);
  }
  for (int r = 0; r < size; ++r) EXPECT_EQ(results[r], expected) << "rank " << r;
}

TEST(LocalCommunicator, AllGatherStacksUnequalRowsInRankOrder) {
  const std::vector<int64_t> counts = {2, 0, 3};
  on_every_rank(3, [&](int rank, Communicator& group) {
    std::vector<int64_t> rows = gather_row_counts(group, counts[rank]);
    ASSERT_EQ(rows, counts);
    Tensor all = group.all_gather_rows(rows_of(rank, counts[rank], 4), rows);
    ASSERT_EQ(all.shape(), Shape({5, 4}));
    int64_t row = 0;
    for (int r = 0; r < 3; ++r)
      for (int64_t i = 0; i < counts[r]; ++i, ++row)
        for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(all.data<float>()[row * 4 + c], r * 1000 + i * 10 + c);
  });
}

TEST(LocalCommunicator, AllToAllDeliversEachRanksRowsToTheirRank) {
  // send[r][j]: rows rank r sends to rank j; rank r's rows for j follow those for j - 1.
  const std::vector<std::vector<int64_t>> send = {{1, 2, 0}, {0, 1, 3}, {2, 0, 1}};
  on_every_rank(3, [&](int rank, Communicator& group) {
    int64_t total = send[rank][0] + send[rank][1] + send[rank][2];
    std::vector<int64_t> receive = {send[0][rank], send[1][rank], send[2][rank]};
    Tensor out = group.all_to_all_rows(rows_of(rank, total, 2), send[rank], receive);
    int64_t row = 0;
    for (int r = 0; r < 3; ++r) {
      int64_t offset = 0;
      for (int j = 0; j < rank; ++j) offset += send[r][j];
      for (int64_t i = 0; i < send[r][rank]; ++i, ++row)
        EXPECT_EQ(out.data<float>()[row * 2], r * 1000 + (offset + i) * 10) << "rank " << rank << " row " << row;
    }
    EXPECT_EQ(out.dim(0), row);
  });
}

TEST(LocalCommunicator, MismatchedCountsAreRefused) {
  EXPECT_THROW(on_every_rank(2,
                             [&](int rank, Communicator& group) {
                               std::vector<int64_t> send = {1, 1}, receive = {1, rank == 0 ? 2 : 1};
                               group.all_to_all_rows(rows_of(rank, 2, 2), send, receive);
                             }),
               Error);
}

TEST(LocalCommunicator, AbortWakesARankWaitingForOthers) {
  auto group = std::make_shared<LocalGroup>(2);
  LocalCommunicator waiting(group, 0);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    group->abort();
  });
  Tensor x = rows_of(0, 1, 1);
  EXPECT_THROW(waiting.all_reduce_sum(x), Error);
  aborter.join();
  EXPECT_THROW(waiting.all_reduce_sum(x), Error);  // and stays aborted
}

}  // namespace
}  // namespace dsinfer::parallel
