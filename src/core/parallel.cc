// parallel_for over a pool of worker threads that sleep when idle.
//
// Workers block on a condition variable rather than spinning, so an engine thread doing serial
// work between ops keeps its core (OpenMP's spin-waiting cost us milliseconds per step on small
// machines). A call from inside a worker, or while another thread is using the pool, runs inline.
#include "core/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace dsinfer {
namespace {

int default_threads() {
  if (const char* env = std::getenv("DSINFER_NUM_THREADS")) {
    int value = std::atoi(env);
    if (value > 0) return value;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

thread_local bool t_inside_pool = false;

// One parallel_for's work: its chunks are claimed from `next` by generation, so a worker that wakes
// late (after its generation has finished and the next has begun) can never take a chunk it was not
// given. It did once: a stale worker's claim from the old counter, compared with the new call's
// chunk count, ran a chunk of the new call that the new counter handed out again, and the count of
// chunks left went below zero, so the caller waited for ever (seen on a 64-core host).
struct Work {
  const std::function<void(int64_t, int64_t)>* body = nullptr;
  int64_t count = 0;
  int chunks = 0;
  uint32_t generation = 0;
};

class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }

  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
  }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs body over `chunks` equal slices of [0, count) on the workers and the caller. Returns
  // false without running anything when another thread holds the pool.
  bool try_run(int64_t count, int chunks, const std::function<void(int64_t, int64_t)>& body) {
    std::unique_lock<std::mutex> busy(busy_mutex_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    Work work;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      work = {&body, count, chunks, current_.generation + 1};
      current_ = work;
      next_.store(uint64_t{work.generation} << 32);
      remaining_ = chunks;
    }
    wake_.notify_all();
    run_chunks(work);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return remaining_ == 0; });
    current_.body = nullptr;
    return true;
  }

 private:
  // The next chunk of `work`, or -1 when its chunks are all claimed or another call's are on offer.
  int claim(const Work& work) {
    uint64_t next = next_.load();
    while (true) {
      const auto chunk = static_cast<uint32_t>(next);
      if (static_cast<uint32_t>(next >> 32) != work.generation || chunk >= static_cast<uint32_t>(work.chunks)) return -1;
      if (next_.compare_exchange_weak(next, next + 1)) return static_cast<int>(chunk);
    }
  }

  void run_chunks(const Work& work) {
    t_inside_pool = true;
    int finished = 0;
    for (int chunk = claim(work); chunk >= 0; chunk = claim(work)) {
      const int64_t begin = work.count * chunk / work.chunks;
      const int64_t end = work.count * (chunk + 1) / work.chunks;
      if (begin < end) (*work.body)(begin, end);
      ++finished;
    }
    t_inside_pool = false;
    if (finished > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      remaining_ -= finished;
      if (remaining_ == 0) done_.notify_all();
    }
  }

  void work() {
    uint32_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return stopping_ || current_.generation != seen; });
      if (stopping_) return;
      const Work work = current_;  // this generation's work, read under the lock
      seen = work.generation;
      if (work.body == nullptr) continue;
      lock.unlock();
      run_chunks(work);
      lock.lock();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex busy_mutex_;  // one parallel_for at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  Work current_;                    // the call on offer (body null once it has finished)
  std::atomic<uint64_t> next_{0};   // its generation (high 32 bits) and next unclaimed chunk
  int remaining_ = 0;               // its chunks not yet finished
  bool stopping_ = false;
};

std::mutex g_pool_mutex;
std::unique_ptr<ThreadPool> g_pool;  // created on first use, replaced by set_num_threads

ThreadPool& pool() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (!g_pool) g_pool = std::make_unique<ThreadPool>(default_threads());
  return *g_pool;
}

}  // namespace

int num_threads() { return pool().size(); }

void set_num_threads(int threads) {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  g_pool = std::make_unique<ThreadPool>(std::max(1, threads));
}

void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (count <= 0) return;
  grain = std::max<int64_t>(1, grain);
  ThreadPool& threads = pool();
  int64_t max_chunks = (count + grain - 1) / grain;
  int chunks = static_cast<int>(std::min<int64_t>(threads.size(), max_chunks));
  if (chunks <= 1 || t_inside_pool || !threads.try_run(count, chunks, body)) body(0, count);
}

}  // namespace dsinfer
