// The engine's inside, shared by engine.cc (lifecycle, inbox, loop, failures, finishing
// requests) and engine_step.cc (one step: plan, run, collect). Nothing outside those two files
// includes it; the rest of the code sees engine.h.
#pragma once

#include <atomic>
#include <time.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "model/batch_builder.h"
#include "model/forward_batch.h"
#include "runtime/capacity.h"
#include "runtime/engine.h"
#include "runtime/kv_handoff.h"
#include "runtime/micro_batch.h"
#include "runtime/output_processor.h"
#include "runtime/sequence.h"

namespace dsinfer::runtime {
namespace engine_internal {

// A sequence as the engine keeps it: what the scheduler sees, plus what only the loop uses.
struct EngineSequence : Sequence {
  std::vector<int32_t> stop_ids;          // EOS (unless ignore_eos) and stop_token_ids
  // prompt_logprobs: the scores collected so far, in prompt order; handed over with the first token.
  std::vector<PromptLogprob> prompt_logprobs;
  std::unique_ptr<RequestStream> stream;  // handed to the output thread with the last event
};

// The scheduler works on Sequence pointers; every one the engine gives it is an EngineSequence.
inline EngineSequence& engine_sequence(Sequence& sequence) { return static_cast<EngineSequence&>(sequence); }

inline double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// CPU time the calling thread has used, in seconds: the engine's overhead is its thread's CPU work,
// which neither a descheduled thread nor a blocking wait inflates.
inline double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// A step ready to run: the batch, and which sequences sample from which logits row.
struct PreparedStep {
  model::ForwardBatch batch;
  std::vector<ScheduledWork> work;
  std::vector<EngineSequence*> sampling;  // in logits-row order
  // The rows of each entry of `sampling`: one, or 1 + its drafts under speculative decoding.
  std::vector<int32_t> first_row;          // [sampling.size() + 1]
  backend::SamplingBatch sampling_rows;   // first_row.back() rows, in the same order
  // Once launched: where each sampled sequence's first token goes in its tokens (a placeholder
  // until the step is collected).
  std::vector<int64_t> token_index;
  // Speculative decoding: what the executor is told (prepare) and what it answered (launch).
  std::optional<SpeculativeStep> speculative;
  std::optional<SpeculativeResult> speculated;
  // A row whose next step needs this step's token on the host (its penalties' history): the next
  // step is planned only after this one is collected.
  bool next_needs_tokens = false;
  // prompt_logprobs: each sequence's run of batch.scored_rows, in their order, and the sequence's
  // prompt_scored once the step is launched.
  struct ScoredPiece {
    EngineSequence* sequence = nullptr;
    int64_t rows = 0;
    int64_t scored_after = 0;
  };
  std::vector<ScoredPiece> scored;
};

// What the device's part of a step gives back.
struct SampledTokens {
  std::vector<int32_t> tokens;         // one per sampling row
  std::vector<Acceptance> accepted;    // speculative decoding: per sampled sequence
  std::vector<TokenLogprob> logprobs;  // per sampling row when any row asked for them, else empty
  std::vector<PromptLogprob> scores;   // one per scored row of the batch (prompt_logprobs)
};

// A request the output thread ended (a stop string) while the engine still ran it.
struct EndedRequest {
  RequestId id;
  FinishReason reason;
  int64_t completion_tokens;
};

}  // namespace engine_internal

struct Engine::Impl {
  using EngineSequence = engine_internal::EngineSequence;
  using PreparedStep = engine_internal::PreparedStep;
  using SampledTokens = engine_internal::SampledTokens;
  using EndedRequest = engine_internal::EndedRequest;

  Impl(std::unique_ptr<StepExecutor> executor_in, const tokenizer::Tokenizer& tokenizer_in, EngineConfig config_in);
  ~Impl();  // stops the loop (in-flight requests end as aborted), then delivers the last outputs

  RequestId submit(std::vector<int32_t> prompt, RequestOptions options, StreamSink sink);
  void loop();
  void take_inbox();
  EngineSequence* find_live(RequestId id);
  bool step();
  // Whether the next step drafts (speculative decoding, adaptive: SpeculativeConfig::disable_by_batch_size).
  bool drafting_step();
  PreparedStep prepare(bool drafting);
  // The device's part of a step, in two calls (the overlap scheduler): launch queues it and does its
  // bookkeeping (computed tokens, placeholders); collect waits for its tokens and completes it. A
  // failure fails the step's requests (or the engine); both return whether they succeeded.
  bool launch_step(PreparedStep& prepared);
  bool collect_step(PreparedStep& prepared);
  void collect_in_flight();
  SampledTokens take_tokens(PreparedStep& prepared);
  void complete(PreparedStep& prepared, SampledTokens& sampled);
  // prompt_logprobs: the chunk of `work` adds the rows it computes at prompt positions not yet scored.
  void add_scored_rows(const ScheduledWork& work, model::BatchBuilder& builder, PreparedStep& prepared);

  // The sequence's next output token, already at tokens[index]: reasoning markers, the grammar, the
  // penalties' history, latencies, its output event (with `logprob` when asked for), the engine's
  // stop decision, and a sender's handoff after its first token. False when the sequence ended
  // with it or was handed off. first_of_step: the first token a step gives it.
  bool take_token(EngineSequence& s, int32_t token, int64_t index, bool first_of_step, TokenLogprob* logprob,
                  Clock::time_point now);
  void mark_scheduled(Sequence& s, Clock::time_point now);  // its first admission, for the metrics

  // Prefill/decode disaggregation (engine_handoff.cc): what the handoff reports, and receivers
  // admitted with pages for their prompts.
  void start_handoff();
  void drive_handoffs();
  void admit_receivers();
  void receive_first_token(EngineSequence& s, HandoffNote& note);
  // Sequences the scheduler may plan (not handed off), for the loop's wait.
  bool has_schedulable() const;

  // A new event for the sequence's stream in this step's outputs (valid until the next emit), and
  // the detail of the newest event.
  OutputEvent& emit(EngineSequence& sequence);
  OutputDetail& detail_of(OutputEvent& newest);
  // Ends a request: `last` (its event of this step) hands its stream to the output thread; its
  // pages go back; the metrics count it (`output_tokens`, when the output side decided the end).
  void finish(EngineSequence& sequence, FinishReason reason, OutputEvent& last, int64_t output_tokens = -1);
  void abort_sequence(EngineSequence& sequence) { finish(sequence, FinishReason::kAbort, emit(sequence)); }
  void fail(EngineSequence& sequence, const std::string& message);
  void fail_step(const PreparedStep& prepared, const std::string& what);
  // The engine cannot go on: every request fails, new ones are refused, healthy() turns false.
  void fail_engine(const std::string& message);
  void flush_outputs() { output->push(outputs); }
  void drop_finished();
  void publish_stats();
  bool flush_prefix_cache_if_idle();  // issue 12: Engine::flush_prefix_cache on the engine thread

  std::unique_ptr<StepExecutor> executor;
  const tokenizer::Tokenizer& tokenizer;
  EngineConfig config;
  int64_t max_model_len;
  std::vector<int32_t> eos_ids;
  PagePool pool;
  std::unique_ptr<PrefixCache> prefix_cache;
  CapacityScheduler capacity;
  std::unique_ptr<HostKvTier> host_kv;  // issue 14: below the prefix cache (host_kv_tier.h); null when off
  Metrics metrics;

  // Shared with callers and the output thread.
  std::mutex inbox_mutex;
  std::condition_variable inbox_ready;
  std::vector<std::unique_ptr<EngineSequence>> inbox;
  std::vector<RequestId> abort_requests;
  std::vector<EndedRequest> ended_requests;
  std::vector<std::promise<bool>> flush_requests;  // Engine::flush_prefix_cache, answered by the loop
  bool stopping = false;
  std::string fatal_error;  // set once, when the engine fails for good
  std::atomic<bool> healthy{true};
  std::atomic<RequestId> next_id{1};
  std::mt19937_64 seed_source;  // guarded by inbox_mutex

  mutable std::mutex stats_mutex;
  EngineStats published;
  double overhead_us_total = 0.0;
  int64_t overhead_steps = 0;

  // Engine thread only.
  bool overlap = false;  // config.overlap_schedule and an executor that can overlap
  bool drafting = true;  // speculative decoding: whether the last step drafted (for the log)
  // The tokenizer's reasoning markers (relaxed acceptance applies between them), or -1.
  int32_t think_start = -1;
  int32_t think_end = -1;
  std::optional<PreparedStep> in_flight;  // launched, not yet collected
  std::deque<std::unique_ptr<EngineSequence>> waiting;
  std::vector<std::unique_ptr<EngineSequence>> running;
  int64_t steps = 0;
  int64_t preemptions = 0;
  double device_cpu_seconds = 0.0;  // the engine thread's CPU time in this step's executor calls
  OutputBatch outputs;  // this step's outputs, handed over at its end
  std::vector<Sequence*> step_sequences;
  std::vector<Candidate> step_candidates;
  // Bitmask buffers of collected steps, reused by later steps (structured output): filling a
  // step's masks allocates nothing once the buffers have grown to the largest step's.
  std::vector<std::vector<int32_t>> spare_bitmasks;

  // Prefill/decode disaggregation: the handoff driver (the engine thread's: it makes, drives and
  // destroys it), whether its mailbox has news (guarded by inbox_mutex), and what callers reach of it
  // (set before the constructor returns; the sink outlives the driver).
  std::unique_ptr<KvHandoffDriver> handoff;
  bool handoff_woken = false;
  KvEndpoint kv_endpoint;
  std::function<void(KvDestination)> kv_destinations;

  std::unique_ptr<OutputProcessor> output;
  std::thread thread;
};

}  // namespace dsinfer::runtime
