#include "runtime/output_processor.h"

#include <exception>

#include "core/log.h"

namespace dsinfer::runtime {
namespace {

constexpr size_t kMaxSpareBuffers = 8;

}  // namespace

std::atomic<uint64_t>& finished_counter(Metrics& metrics, FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return metrics.requests_finished_stop;
    case FinishReason::kLength: return metrics.requests_finished_length;
    case FinishReason::kAbort: return metrics.requests_aborted;
    default: return metrics.requests_failed;
  }
}

OutputProcessor::OutputProcessor(Metrics& metrics, RequestEnded ended)
    : metrics_(metrics), ended_(std::move(ended)), thread_([this] { loop(); }) {}

OutputProcessor::~OutputProcessor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_one();
  thread_.join();
}

void OutputProcessor::push(OutputBatch& step) {
  if (step.empty()) return;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(step));
    queued_steps_.store(queue_.size(), std::memory_order_relaxed);
    step.clear();  // a moved-from vector is valid but unspecified
    if (!spare_.empty()) {
      std::swap(step, spare_.back());
      spare_.pop_back();
    }
    wake = idle_;
  }
  // Only a waiting thread needs the (system call) wake-up; a busy one finds the queue itself.
  if (wake) ready_.notify_one();
}

void OutputProcessor::wait_until_caught_up() {
  if (queued_steps_.load(std::memory_order_relaxed) <= kMaxQueuedSteps) return;
  std::unique_lock<std::mutex> lock(mutex_);
  engine_waiting_ = true;
  drained_.wait(lock, [&] { return queue_.size() <= kMaxQueuedSteps; });
  engine_waiting_ = false;
}

void OutputProcessor::loop() {
  std::deque<OutputBatch> steps;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    idle_ = true;
    ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    idle_ = false;
    if (queue_.empty()) break;  // stopping, and everything delivered
    steps.swap(queue_);
    queued_steps_.store(0, std::memory_order_relaxed);
    if (engine_waiting_) drained_.notify_one();
    lock.unlock();
    for (OutputBatch& step : steps) {
      size_t next_detail = 0;
      for (const OutputEvent& event : step.events)
        deliver(event, event.has_detail ? &step.details.at(next_detail++) : nullptr);
      step.clear();  // destroys the streams of requests that ended (their sinks with them)
    }
    lock.lock();
    while (!steps.empty() && spare_.size() < kMaxSpareBuffers) {
      spare_.push_back(std::move(steps.back()));
      steps.pop_back();
    }
    lock.unlock();
    steps.clear();  // frees the buffers beyond the spares, outside the lock the engine takes
    lock.lock();
  }
}

StreamOutput& OutputProcessor::fresh_output() {
  StreamOutput& out = scratch_;
  out.token_ids.clear();
  out.text.clear();
  out.logprobs.clear();
  out.prompt_logprobs.clear();
  out.finished = false;
  out.finish_reason = FinishReason::kNone;
  out.stop_reason.clear();
  out.error.clear();
  out.prompt_tokens = out.completion_tokens = out.cached_tokens = 0;
  return out;
}

void OutputProcessor::deliver(const OutputEvent& event, OutputDetail* detail) {
  RequestStream& stream = *event.stream;
  if (detail && detail->cached_tokens >= 0) stream.cached_tokens = detail->cached_tokens;
  bool closing = detail && detail->closing;
  if (!stream.ended) {
    StreamOutput& out = fresh_output();
    try {
      if (event.token >= 0) {
        ++stream.completion_tokens;
        if (detail && detail->logprob) out.logprobs.push_back(std::move(*detail->logprob));
        if (detail) out.prompt_logprobs = std::move(detail->prompt_logprobs);
        StopChecker::Step step = stream.stop.push(event.token, stream.completion_tokens, event.finish, out.text);
        out.token_ids.push_back(event.token);
        out.finish_reason = step.finish;
        out.stop_reason = std::move(step.stop_reason);
      } else {
        if (event.finish == FinishReason::kAbort) stream.stop.flush(out.text);  // text held back for a stop string
        out.finish_reason = event.finish;
        if (detail) out.error = std::move(detail->error);
      }
    } catch (const std::exception& error) {
      out.text.clear();
      out.finish_reason = FinishReason::kError;
      out.error = str_cat("the output could not be made: ", error.what());
    }
    if (closing && out.finish_reason == FinishReason::kNone) out.finish_reason = event.finish;  // never left open
    if (out.finish_reason != FinishReason::kNone) {
      out.finished = true;
      out.prompt_tokens = stream.prompt_tokens;
      out.completion_tokens = stream.completion_tokens;
      out.cached_tokens = stream.cached_tokens;
      stream.ended = true;
      stream.reported = out.finish_reason;
      // Ended here while the engine still runs it: the engine frees its pages when told.
      if (!closing) ended_(stream.id, out.finish_reason, stream.completion_tokens);
    }
    if (closing) reconcile_count(event.finish, stream.reported);  // before the client hears of the end
    if (stream.sink) {
      try {
        stream.sink(out);
      } catch (const std::exception& error) {
        log_warning("request ", stream.id, ": its output sink failed (", error.what(), "); it gets no more outputs");
        stream.sink = nullptr;
      }
    }
    if (stream.ended) stream.sink = nullptr;  // lets go of the client's side now
  } else if (closing) {
    reconcile_count(event.finish, stream.reported);
  }
}

void OutputProcessor::reconcile_count(FinishReason counted, FinishReason reported) {
  // The engine counted the request under its own finish; the client saw another (a stop string
  // found after the engine had ended it for length, say): the metrics follow the client.
  if (counted == reported) return;
  --finished_counter(metrics_, counted);
  ++finished_counter(metrics_, reported);
}

}  // namespace dsinfer::runtime
