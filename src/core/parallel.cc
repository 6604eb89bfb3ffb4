#include "core/parallel.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

namespace dsinfer {
namespace {

int default_threads() {
  if (const char* env = std::getenv("DSINFER_NUM_THREADS")) {
    int value = std::atoi(env);
    if (value > 0) return value;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

std::atomic<int> g_threads{0};  // 0: not chosen yet

}  // namespace

int num_threads() {
  int threads = g_threads.load(std::memory_order_relaxed);
  if (threads == 0) {
    threads = default_threads();
    g_threads.store(threads, std::memory_order_relaxed);
  }
  return threads;
}

void set_num_threads(int threads) { g_threads.store(std::max(1, threads), std::memory_order_relaxed); }

void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (count <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t max_chunks = (count + grain - 1) / grain;
  int threads = static_cast<int>(std::min<int64_t>(num_threads(), max_chunks));
  if (threads <= 1 || omp_in_parallel()) {
    body(0, count);
    return;
  }
  // One contiguous chunk per thread: the work items of our ops cost about the same.
#pragma omp parallel num_threads(threads)
  {
    int64_t id = omp_get_thread_num();
    int64_t team = omp_get_num_threads();
    int64_t begin = count * id / team;
    int64_t end = count * (id + 1) / team;
    if (begin < end) body(begin, end);
  }
}

}  // namespace dsinfer
