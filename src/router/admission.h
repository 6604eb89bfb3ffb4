// Decode-slot admission (the practice of DeepSeek's serving notes): each decode instance (D) holds
// at most its slot budget of requests (worker_registry.h: --decode-slots, else its /server_info
// max_running_requests). A request that finds no D with a slot left waits here, first come first
// served, until one frees; past --max-queued-requests waiting, or after --queue-timeout, it gets a
// 503 with Retry-After.
//
// Whether to scale out. A queued request means every D is full. Slots free as answers end: a D
// that generates T output tokens a second over answers of L tokens on average frees about T / L
// slots a second, so a queue of Q requests drains in about Q * L / T seconds (summed over the D's).
// Scale-out is recommended (dsinfer_router_scale_out_recommended = 1) when requests have queued
// without a break for a whole window (--scale-out-window), or when the queue's expected drain time
// is already longer than that window: in both cases the decode pool is short of slots for longer
// than a window, and another D would take the queue.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace dsinfer::router {

using Clock = std::chrono::steady_clock;

class AdmissionQueue {
 public:
  explicit AdmissionQueue(size_t capacity) : capacity_(capacity) {}

  bool push(uint64_t id, Clock::time_point now);  // false when full
  bool remove(uint64_t id);                       // the client left; false when not queued
  std::optional<uint64_t> front() const;
  void pop_front();
  // Removes and returns the requests queued longer than `timeout`, oldest first.
  std::vector<uint64_t> expire(Clock::time_point now, Clock::duration timeout);

  size_t size() const { return entries_.size(); }
  size_t capacity() const { return capacity_; }
  // How long the queue has held requests without a break; 0 while empty.
  Clock::duration busy_for(Clock::time_point now) const;

 private:
  struct Entry {
    uint64_t id;
    Clock::time_point queued_at;
  };

  size_t capacity_;
  std::deque<Entry> entries_;
  Clock::time_point busy_since_{};
};

struct ScaleOutInputs {
  Clock::duration queue_busy_for{};  // AdmissionQueue::busy_for
  size_t queued = 0;
  double average_output_tokens = 0;   // over the healthy D's
  double output_tokens_per_second = 0;  // summed over the healthy D's (their /v1/loads)
};

struct ScaleOutAdvice {
  bool recommended = false;
  std::optional<double> drain_seconds;  // the queue's expected drain time; empty: no rate known
};

ScaleOutAdvice scale_out_advice(const ScaleOutInputs& inputs, Clock::duration window);

}  // namespace dsinfer::router
