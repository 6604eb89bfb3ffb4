// The engine's output side, on a thread of its own: the engine thread hands over compact
// per-step events (a token id, its logprobs, the finish the engine decided), and this thread
// turns them into StreamOutputs: incremental detokenization, stop strings with hold-back, usage,
// and the call to each request's sink (where the server builds SSE chunks and JSON). So the
// engine thread's time per step does not grow with the cost of text and formatting.
//
// A stop string is found here, after the engine has already moved on: the request's last output
// goes out at once and nothing after it reaches the client; the engine is told to end the
// request (RequestEnded), which frees its pages and counts it as stopped.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/metrics.h"
#include "runtime/request.h"
#include "runtime/stop_checker.h"

namespace dsinfer::runtime {

// One request's output state. Made by submit(); the engine thread only passes pointers to it;
// the output thread alone reads and writes it, and destroys it after the request's last event.
struct RequestStream {
  RequestStream(const tokenizer::Tokenizer& tokenizer, const RequestOptions& options, StreamSink sink_in,
                int64_t prompt_tokens_in)
      : stop(tokenizer, options), sink(std::move(sink_in)), prompt_tokens(prompt_tokens_in) {}

  RequestId id = 0;
  StopChecker stop;
  StreamSink sink;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;                // tokens received so far
  int64_t cached_tokens = 0;                    // prompt tokens served from the prefix cache
  bool ended = false;                           // the client has had its last output
  FinishReason reported = FinishReason::kNone;  // the finish reason the client saw
};

// What the engine thread says about one request in one step. Kept to 16 bytes: hundreds are
// written per step and read on another core, and each cache line that crosses costs the engine
// thread time. The rare extras go into an OutputDetail.
struct OutputEvent {
  RequestStream* stream = nullptr;
  int32_t token = -1;                         // the sampled token; -1 for none (abort, error)
  FinishReason finish = FinishReason::kNone;  // the engine's: stop token, length, abort, error
  bool has_detail = false;                    // the step's next OutputDetail belongs to this event
};
static_assert(sizeof(OutputEvent) == 16);

struct OutputDetail {
  // Set on the request's last event from the engine: the stream is the output thread's from then on.
  std::unique_ptr<RequestStream> closing;
  std::optional<TokenLogprob> logprob;  // when the request asked for logprobs
  std::vector<PromptLogprob> prompt_logprobs;  // with the first token, when the request asked for them
  int64_t cached_tokens = -1;           // with the first token and the last event; -1: unchanged
  std::string error;                    // with FinishReason::kError
};

// One step's outputs, as the engine thread hands them over.
struct OutputBatch {
  std::vector<OutputEvent> events;
  std::vector<OutputDetail> details;  // in the order of the events that have one

  bool empty() const { return events.empty(); }
  void clear() {
    events.clear();
    details.clear();
  }
};

// The counter of Metrics that requests ending with `reason` go to.
std::atomic<uint64_t>& finished_counter(Metrics& metrics, FinishReason reason);

class OutputProcessor {
 public:
  // Called on the output thread when this side ends a request the engine still runs (a stop string
  // matched, or its text could not be made): the engine must end it with `reason`, counting
  // `completion_tokens` output tokens.
  using RequestEnded = std::function<void(RequestId id, FinishReason reason, int64_t completion_tokens)>;

  // metrics: requests_finished_* are moved when the client saw another finish than the engine counted.
  OutputProcessor(Metrics& metrics, RequestEnded ended);
  ~OutputProcessor();  // delivers everything handed over, then stops the thread
  OutputProcessor(const OutputProcessor&) = delete;
  OutputProcessor& operator=(const OutputProcessor&) = delete;

  // Engine thread: one step's outputs. `step` comes back empty (a recycled buffer).
  void push(OutputBatch& step);
  // Engine thread: blocks while more than kMaxQueuedSteps steps wait for delivery, so that an
  // output thread starved of CPU bounds the memory and latency of what waits, rather than letting
  // them grow. Returns at once in the common case (one relaxed load).
  void wait_until_caught_up();

  static constexpr size_t kMaxQueuedSteps = 128;

 private:
  void loop();
  void deliver(const OutputEvent& event, OutputDetail* detail);
  void reconcile_count(FinishReason counted, FinishReason reported);
  StreamOutput& fresh_output();

  Metrics& metrics_;
  RequestEnded ended_;

  std::mutex mutex_;
  std::condition_variable ready_;
  std::condition_variable drained_;             // the engine waits on it in wait_until_caught_up
  std::deque<OutputBatch> queue_;               // steps handed over, oldest first
  std::atomic<size_t> queued_steps_{0};         // queue_.size(), readable without the lock
  bool engine_waiting_ = false;
  std::vector<OutputBatch> spare_;  // delivered buffers, for the engine to refill
  bool idle_ = false;                            // the thread waits for work (a push must wake it)
  bool stopping_ = false;

  StreamOutput scratch_;  // output thread only: the output handed to sinks, reused
  std::thread thread_;
};

}  // namespace dsinfer::runtime
