#include "router/admission.h"

#include <algorithm>

namespace dsinfer::router {

bool AdmissionQueue::push(uint64_t id, Clock::time_point now) {
  if (entries_.size() >= capacity_) return false;
  if (entries_.empty()) busy_since_ = now;
  entries_.push_back({id, now});
  return true;
}

bool AdmissionQueue::remove(uint64_t id) {
  const auto found = std::find_if(entries_.begin(), entries_.end(), [id](const Entry& e) { return e.id == id; });
  if (found == entries_.end()) return false;
  entries_.erase(found);
  return true;
}

std::optional<uint64_t> AdmissionQueue::front() const {
  if (entries_.empty()) return std::nullopt;
  return entries_.front().id;
}

void AdmissionQueue::pop_front() {
  if (!entries_.empty()) entries_.pop_front();
}

std::vector<uint64_t> AdmissionQueue::expire(Clock::time_point now, Clock::duration timeout) {
  std::vector<uint64_t> expired;
  while (!entries_.empty() && now - entries_.front().queued_at > timeout) {
    expired.push_back(entries_.front().id);
    entries_.pop_front();
  }
  return expired;
}

Clock::duration AdmissionQueue::busy_for(Clock::time_point now) const {
  return entries_.empty() ? Clock::duration::zero() : now - busy_since_;
}

ScaleOutAdvice scale_out_advice(const ScaleOutInputs& inputs, Clock::duration window) {
  ScaleOutAdvice advice;
  if (inputs.output_tokens_per_second > 0 && inputs.average_output_tokens > 0)
    advice.drain_seconds =
        static_cast<double>(inputs.queued) * inputs.average_output_tokens / inputs.output_tokens_per_second;
  const double window_seconds = std::chrono::duration<double>(window).count();
  advice.recommended = inputs.queued > 0 && (inputs.queue_busy_for >= window ||
                                             (advice.drain_seconds && *advice.drain_seconds > window_seconds));
  return advice;
}

}  // namespace dsinfer::router
