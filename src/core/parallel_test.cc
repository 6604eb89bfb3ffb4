#include "core/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>
#include <vector>

namespace dsinfer {
namespace {

// Keeps the pool's size for the test and gives the old one back afterwards.
class PoolOf {
 public:
  explicit PoolOf(int threads) : old_(num_threads()) { set_num_threads(threads); }
  ~PoolOf() { set_num_threads(old_); }

 private:
  int old_;
};

TEST(ParallelFor, CoversEveryIndexOnceInDisjointChunks) {
  PoolOf pool(4);
  for (int64_t count : {1, 2, 3, 7, 64, 1000}) {
    std::vector<std::atomic<int>> visits(count);
    parallel_for(count, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) visits[i].fetch_add(1);
    });
    for (int64_t i = 0; i < count; ++i) EXPECT_EQ(visits[i].load(), 1) << "count " << count << ", index " << i;
  }
}

// Calls of few chunks and of many, back to back, on more workers than cores, so that workers wake
// late: a worker still holding one call's work when the next begins must not take a chunk of the
// next. When one did, a chunk ran twice and the call never returned (its count of chunks left went
// below zero). Run on a thread of its own so that a hang fails the test instead of stalling ctest.
TEST(ParallelFor, LateWorkersNeverTakeAChunkOfTheNextCall) {
  PoolOf pool(64);
  std::atomic<int64_t> doubled{0}, missed{0};
  auto calls = std::async(std::launch::async, [&] {
    std::vector<std::atomic<int>> visits(48);
    for (int call = 0; call < 60000; ++call) {
      const int64_t count = call % 2 == 0 ? 2 : 48;
      for (int64_t i = 0; i < count; ++i) visits[i].store(0);
      parallel_for(count, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) visits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < count; ++i) {
        const int n = visits[i].load();
        if (n > 1) doubled.fetch_add(1);
        if (n == 0) missed.fetch_add(1);
      }
    }
  });
  if (calls.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
    std::fprintf(stderr, "parallel_for did not return within 120 s: a call is waiting for chunks nobody runs\n");
    std::fflush(stderr);
    std::_Exit(1);  // the hung thread cannot be joined
  }
  calls.get();
  EXPECT_EQ(doubled.load(), 0) << "indices visited more than once";
  EXPECT_EQ(missed.load(), 0) << "indices never visited";
}

TEST(ParallelFor, NestedCallsRunInline) {
  PoolOf pool(4);
  std::atomic<int64_t> sum{0};
  parallel_for(8, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      parallel_for(10, 1, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
  });
  EXPECT_EQ(sum.load(), 80);
}

}  // namespace
}  // namespace dsinfer
