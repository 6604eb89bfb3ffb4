// A one-line progress bar on stderr for a run of requests:
//   [==============>               ]  29/64 requests  45%  12.3 s  1 failed
// redrawn in place at most ten times a second (and once at the end), so that thousands of quick
// requests cost no terminal time. Not thread-safe: the caller serialises update().
#pragma once

#include <chrono>
#include <cstdint>

namespace dsinfer::loadgen {

class ProgressBar {
 public:
  ProgressBar(int64_t total, bool enabled);
  void update(int64_t finished, int64_t failed);
  void finish();  // the last redraw and the newline

 private:
  void draw(std::chrono::steady_clock::time_point now);

  int64_t total_;
  bool enabled_;
  int64_t finished_ = 0;
  int64_t failed_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace dsinfer::loadgen
