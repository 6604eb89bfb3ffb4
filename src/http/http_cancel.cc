// HttpCancel: the switch a caller keeps to end one of its HttpClient calls from any thread (a
// router closes the decode worker's connection when the prefill worker fails, and both when its
// own client leaves). The client arms it with a hook that posts the call's end onto its loop.
#include <utility>

#include "http/http.h"

namespace dsinfer::server {

void HttpCancel::cancel() {
  std::lock_guard lock(mutex_);
  if (cancelled_) return;
  cancelled_ = true;
  if (hook_) std::exchange(hook_, nullptr)();
}

bool HttpCancel::cancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

void HttpCancel::arm(std::function<void()> hook) {
  std::lock_guard lock(mutex_);
  if (cancelled_) {
    hook();
    return;
  }
  hook_ = std::move(hook);
}

void HttpCancel::disarm() {
  std::lock_guard lock(mutex_);
  hook_ = nullptr;
}

}  // namespace dsinfer::server
