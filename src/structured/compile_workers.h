// CompileWorkers: a few threads that compile grammars off the engine's and the server's threads.
//
// Compiling a JSON schema against a 129k-token vocabulary takes tens to hundreds of milliseconds,
// far longer than a decode step, so it never runs where a step waits. Tasks run in submission
// order. The destructor finishes the tasks already running and drops the queued ones (their
// promises break, which PendingGrammar reports as an error).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dsinfer::structured {

class CompileWorkers {
 public:
  explicit CompileWorkers(int threads);
  ~CompileWorkers();
  CompileWorkers(const CompileWorkers&) = delete;
  CompileWorkers& operator=(const CompileWorkers&) = delete;

  void submit(std::function<void()> task);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace dsinfer::structured
