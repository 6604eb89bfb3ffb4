#include "structured/compile_workers.h"

#include <utility>

#include "core/error.h"

namespace dsinfer::structured {

CompileWorkers::CompileWorkers(int threads) {
  DSINFER_CHECK(threads >= 1, "grammar compile threads must be at least 1, got ", threads);
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

CompileWorkers::~CompileWorkers() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  wake_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void CompileWorkers::submit(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    DSINFER_CHECK(!stopping_, "the grammar compiler is shutting down");
    queue_.push_back(std::move(task));
  }
  wake_.notify_one();
}

void CompileWorkers::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // tasks catch their own errors: they fulfil a promise either way
  }
}

}  // namespace dsinfer::structured
