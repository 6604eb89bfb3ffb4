// parallel_for over a pool of worker threads that sleep when idle.
//
// Workers block on a condition variable rather than spinning, so an engine thread doing serial
// work between ops keeps its core (OpenMP's spin-waiting cost us milliseconds per step on small
// machines). A call from inside a worker, or while another thread is using the pool, runs inline.
#include "core/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
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
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = &body;
      count_ = count;
      chunks_ = chunks;
      next_chunk_.store(0);
      remaining_ = chunks;
      ++generation_;
    }
    wake_.notify_all();
    run_chunks();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return remaining_ == 0; });
    body_ = nullptr;
    return true;
  }

 private:
  void run_chunks() {
    t_inside_pool = true;
    int finished = 0;
    for (int chunk = next_chunk_.fetch_add(1); chunk < chunks_; chunk = next_chunk_.fetch_add(1)) {
      int64_t begin = count_ * chunk / chunks_;
      int64_t end = count_ * (chunk + 1) / chunks_;
      if (begin < end) (*body_)(begin, end);
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
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      if (body_ == nullptr) continue;
      lock.unlock();
      run_chunks();
      lock.lock();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex busy_mutex_;  // one parallel_for at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  int64_t count_ = 0;
  int chunks_ = 0;
  std::atomic<int> next_chunk_{0};
  int remaining_ = 0;
  uint64_t generation_ = 0;
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
