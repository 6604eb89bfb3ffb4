// One step of the engine loop: plan and reserve (prepare), the device's part (run_step: the
// model call and sampling, the only calls that reach the executor), and collecting its tokens
// (complete: bookkeeping, the engine's stop decisions, this step's output events).
#include <algorithm>

#include "core/log.h"
#include "model/batch_builder.h"
#include "runtime/engine_impl.h"
#include "runtime/step_error.h"

namespace dsinfer::runtime {

using engine_internal::engine_sequence;
using engine_internal::EngineSequence;
using engine_internal::PreparedStep;
using engine_internal::SampledTokens;
using engine_internal::seconds_between;

PreparedStep Engine::Impl::prepare() {
  // Candidates: running then waiting, each in arrival order (member buffers, reused every step).
  std::vector<Sequence*>& all = step_sequences;
  std::vector<Candidate>& candidates = step_candidates;
  all.clear();
  candidates.clear();
  for (auto& s : running) all.push_back(s.get());
  for (auto& s : waiting) all.push_back(s.get());
  for (size_t i = 0; i < all.size(); ++i) {
    Sequence& s = *all[i];
    bool is_running = s.state >= RequestState::kPrefilling;
    candidates.push_back({static_cast<int64_t>(i), is_running, s.pending_tokens(), s.prompt_length, s.arrival});
  }
  MicroBatchLimits limits{config.max_num_batched_tokens, config.max_num_seqs, config.arrival_window_ms};
  CapacityResult reserved = capacity.reserve(plan_micro_batch(candidates, limits), all);

  Clock::time_point now = Clock::now();
  for (Sequence* s : reserved.preempted) {
    s->state = RequestState::kWaiting;
    ++preemptions;
  }
  // Admitted sequences move to running; preempted ones to the front of the waiting queue.
  for (const ScheduledWork& w : reserved.work) {
    Sequence& s = *w.sequence;
    if (s.state != RequestState::kWaiting) continue;
    s.state = RequestState::kPrefilling;
    if (!s.scheduled_once) {
      s.scheduled_once = true;
      s.first_scheduled = now;
      metrics.queue_time.observe(seconds_between(s.arrival, now));
    }
    auto it = std::find_if(waiting.begin(), waiting.end(), [&](const auto& p) { return p.get() == &s; });
    running.push_back(std::move(*it));
    waiting.erase(it);
  }
  if (!reserved.preempted.empty()) {
    std::vector<std::unique_ptr<EngineSequence>> still_running, back_to_waiting;
    for (auto& s : running) {
      if (s->state == RequestState::kWaiting) back_to_waiting.push_back(std::move(s));
      else still_running.push_back(std::move(s));
    }
    running = std::move(still_running);
    for (auto it = back_to_waiting.rbegin(); it != back_to_waiting.rend(); ++it) waiting.push_front(std::move(*it));
  }

  PreparedStep prepared;
  model::BatchBuilder builder;
  size_t tokens = 0, page_ids = 0;
  for (const ScheduledWork& w : reserved.work) {
    tokens += static_cast<size_t>(w.num_tokens);
    page_ids += w.sequence->pages.size();
  }
  builder.reserve(reserved.work.size(), tokens, page_ids);
  for (const ScheduledWork& w : reserved.work) {
    Sequence& s = *w.sequence;
    bool samples = s.num_computed + w.num_tokens == static_cast<int64_t>(s.tokens.size());
    builder.add(std::span(s.tokens).subspan(s.num_computed, w.num_tokens), static_cast<int32_t>(s.num_computed),
                s.pages, samples ? model::LogitRows::kLast : model::LogitRows::kNone);
    if (samples) prepared.sampling.push_back(&engine_sequence(s));
  }
  // What the device does to each sampled row's logits: the request's sampling options, its
  // penalty history, its stop tokens banned while under min_tokens, and its next seeded draw.
  for (EngineSequence* s : prepared.sampling) {
    bool under_min = s->output_length() < s->options.min_tokens;
    std::span<const int32_t> banned = under_min ? std::span<const int32_t>(s->stop_ids) : std::span<const int32_t>();
    append_sampling_row(prepared.sampling_rows, s->options.sampling, s->sampler, banned, s->sampler.uniforms.next(),
                        s->options.logprobs);
  }
  prepared.batch = builder.build();
  prepared.work = std::move(reserved.work);
  return prepared;
}

SampledTokens Engine::Impl::run_step(PreparedStep& prepared) {
  auto model_start = Clock::now();
  backend::SampledTokens device = executor->run(prepared.batch, prepared.sampling_rows);
  device_seconds = seconds_between(model_start, Clock::now());
  SampledTokens sampled;
  auto rows = static_cast<int64_t>(prepared.sampling.size());
  DSINFER_CHECK(device.tokens.numel() == rows, "the executor sampled ", device.tokens.numel(), " tokens for ", rows,
                " rows");
  sampled.tokens.assign(device.tokens.data<int32_t>(), device.tokens.data<int32_t>() + rows);
  if (device.logprobs.defined()) {
    sampled.logprobs.resize(rows);
    for (int64_t row = 0; row < rows; ++row)
      if (int top_n = prepared.sampling[row]->options.logprobs; top_n >= 0)
        sampled.logprobs[row] = row_logprobs(device, row, top_n);
  }
  return sampled;
}

void Engine::Impl::complete(PreparedStep& prepared, SampledTokens& sampled) {
  for (const ScheduledWork& w : prepared.work) {
    Sequence& s = *w.sequence;
    bool prompt_done_now = s.num_computed < s.prompt_length && s.num_computed + w.num_tokens >= s.prompt_length;
    s.num_computed += w.num_tokens;
    // The prompt's pages are offered to the prefix cache once it is computed; the rest of the
    // sequence's pages when it releases them (capacity.h), so decoding never walks the tree.
    if (prefix_cache && prompt_done_now) prefix_cache->insert(std::span(s.tokens).first(s.num_computed), s.pages);
  }
  if (prepared.sampling.empty()) return;
  Clock::time_point now = Clock::now();
  metrics.generation_tokens += prepared.sampling.size();
  for (size_t row = 0; row < prepared.sampling.size(); ++row) {
    EngineSequence& s = *prepared.sampling[row];
    int32_t token = sampled.tokens[row];
    s.tokens.push_back(token);
    record_token(s.sampler, s.options.sampling, token);
    s.state = RequestState::kDecoding;
    if (s.output_length() == 1) {
      s.ttft_seconds = seconds_between(s.arrival, now);
      metrics.time_to_first_token.observe(s.ttft_seconds);
    } else {
      metrics.inter_token_latency.observe(seconds_between(s.last_token_time, now));
    }
    s.last_token_time = now;
    OutputEvent& event = emit(s);
    event.token = token;
    if (s.options.logprobs >= 0) detail_of(event).logprob = std::move(sampled.logprobs[row]);
    if (s.output_length() == 1) detail_of(event).cached_tokens = s.cached_tokens;
    bool at_limit = static_cast<int64_t>(s.tokens.size()) >= s.max_length;
    FinishReason reason = token_finish(s.stop_ids, s.options.min_tokens, token, s.output_length(), at_limit);
    if (reason != FinishReason::kNone) finish(s, reason, event);
  }
}

OutputEvent& Engine::Impl::emit(EngineSequence& sequence) {
  OutputEvent& event = outputs.events.emplace_back();
  event.stream = sequence.stream.get();
  return event;
}

OutputDetail& Engine::Impl::detail_of(OutputEvent& newest) {
  if (!newest.has_detail) {
    newest.has_detail = true;
    outputs.details.emplace_back();
  }
  return outputs.details.back();
}

bool Engine::Impl::step() {
  auto start = Clock::now();
  PreparedStep prepared = prepare();
  if (prepared.work.empty()) {
    flush_outputs();  // aborts taken from the inbox
    publish_stats();
    return false;
  }
  // The device's part. What it throws fails this step's requests, or all of them if the device
  // is lost; the engine's own bookkeeping stays outside, so that the call site stays one line.
  device_seconds = 0.0;
  SampledTokens sampled;
  bool ran = false;
  try {
    sampled = run_step(prepared);
    ran = true;
  } catch (const FatalDeviceError& error) {
    fail_engine(str_cat("the device failed and cannot run another step: ", error.what()));
  } catch (const std::exception& error) {
    fail_step(prepared, error.what());
  }
  if (ran) complete(prepared, sampled);
  drop_finished();
  flush_outputs();
  ++steps;
  publish_stats();
  double total = seconds_between(start, Clock::now());
  std::lock_guard<std::mutex> lock(stats_mutex);
  overhead_us_total += (total - device_seconds) * 1e6;
  ++overhead_steps;
  return true;
}

}  // namespace dsinfer::runtime
