// Counters and latency histograms of the engine, thread-safe, rendered by the server as
// Prometheus text (server/metrics_format.h) under vLLM's metric names.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace dsinfer::runtime {

// One writer (the engine thread, once per token), any number of readers taking snapshots: the
// writer updates with plain relaxed loads and stores, no read-modify-write instructions.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // upper bounds, ascending (seconds, or tokens)
  void observe(double value);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf last
    double sum = 0.0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bucket, +Inf last
  std::atomic<double> sum_{0.0};
  std::atomic<uint64_t> count_{0};
};

struct Metrics {
  Metrics();
  std::atomic<uint64_t> prompt_tokens{0};
  std::atomic<uint64_t> generation_tokens{0};
  std::atomic<uint64_t> requests_finished_stop{0};
  std::atomic<uint64_t> requests_finished_length{0};
  std::atomic<uint64_t> requests_aborted{0};
  std::atomic<uint64_t> requests_failed{0};
  Histogram time_to_first_token;  // seconds from arrival to the first token
  Histogram time_per_output_token;  // per request: (e2e - ttft) / (tokens - 1)
  Histogram inter_token_latency;  // seconds between consecutive tokens of a request
  Histogram e2e_request_latency;  // seconds from arrival to the last token
  Histogram queue_time;           // seconds from arrival to the first scheduled step

  // Per finished request and per step, under vLLM's names (issue 12). Engine thread only.
  Histogram request_prompt_tokens;      // prompt tokens per finished request
  Histogram request_generation_tokens;  // output tokens per finished request
  Histogram request_prefill_time;       // seconds from the first scheduled step to the first token
  Histogram request_decode_time;        // seconds from the first token to the last
  Histogram iteration_tokens;           // tokens per engine step (prompt chunks and decode tokens)

  // Speculative decoding (speculative.h), vLLM's spec_decode counters: drafts proposed (one per
  // sequence-step that carried any), draft tokens, accepted draft tokens, and accepted tokens by
  // draft position (1-based position p at index p - 1).
  static constexpr int kMaxDraftPositions = 3;
  std::atomic<uint64_t> spec_decode_drafts{0};
  std::atomic<uint64_t> spec_decode_draft_tokens{0};
  std::atomic<uint64_t> spec_decode_accepted_tokens{0};
  std::atomic<uint64_t> spec_decode_accepted_per_position[kMaxDraftPositions] = {};

  // A request ended: its token counts, and its prefill and decode times when it was scheduled and
  // produced a token. Times are seconds since its arrival; a negative one did not happen.
  void observe_finished_request(int64_t prompt_tokens, int64_t generation_tokens, double scheduled_seconds,
                                double first_token_seconds, double last_token_seconds);
};

}  // namespace dsinfer::runtime
