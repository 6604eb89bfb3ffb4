// One step of the engine loop: plan and reserve (prepare), the device's part (launch_step and
// collect_step, the only calls that reach the executor), and completing a collected step (complete:
// its tokens, the engine's stop decisions, its output events).
//
// The overlap scheduler (DESIGN.md, "The device step", item 5). With an executor that overlaps, a
// step is launched and left running while the next one is planned and launched; only then is the
// first collected. So at most two steps are in flight, and planning step N + 1 happens before step
// N's tokens are known:
//   - launching a step does its bookkeeping at once: the cache holds its tokens' rows
//     (num_computed), and each sequence that samples gets a placeholder -(row + 1) as its next
//     token, which step N + 1 takes as input and the executor resolves on the device;
//   - collecting step N puts the real tokens in place of the placeholders, then decides stops (one
//     step late): a sequence that stopped at step N has a row in step N + 1 whose token is dropped;
//   - a sequence that ends (finished, aborted, failed) stays allocated while a launched step refers
//     to it (steps_in_flight), so that collecting that step finds it and skips it;
//   - a sequence whose next row needs its history on the host (penalties, or a grammar whose
//     matcher must accept the token before it fills the next mask: output_constraint.h) makes the
//     engine collect before planning: the step after it is not overlapped.
#include <algorithm>

#include "core/log.h"
#include "model/batch_builder.h"
#include "runtime/engine_impl.h"
#include "runtime/output_constraint.h"
#include "runtime/step_error.h"

namespace dsinfer::runtime {

using engine_internal::engine_sequence;
using engine_internal::EngineSequence;
using engine_internal::PreparedStep;
using engine_internal::SampledTokens;
using engine_internal::seconds_between;
using engine_internal::thread_cpu_seconds;

PreparedStep Engine::Impl::prepare() {
  // Candidates: running then waiting, each in arrival order (member buffers, reused every step).
  std::vector<Sequence*>& all = step_sequences;
  std::vector<Candidate>& candidates = step_candidates;
  all.clear();
  candidates.clear();
  // Ended sequences wait for their launched steps to be collected; a sequence whose placeholder is
  // its last token has nothing left to run.
  auto schedulable = [](const Sequence& s) { return s.state < RequestState::kFinished && !s.awaiting_last_token(); };
  for (auto& s : running)
    if (schedulable(*s)) all.push_back(s.get());
  for (auto& s : waiting)
    if (schedulable(*s)) all.push_back(s.get());
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
    log_warning("request ", s->id, " preempted for lack of KV pages (it will be recomputed); ", preemptions,
                " preemptions so far");
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
    if (s.scoring_prompt()) add_scored_rows(w, builder, prepared);
  }
  // What the device does to each sampled row's logits: the request's sampling options, its
  // penalty history, its logit_bias, its stop tokens banned while under min_tokens, the tokens its
  // grammar allows, and its next seeded draw.
  backend::SamplingBatch& rows = prepared.sampling_rows;
  for (size_t row = 0; row < prepared.sampling.size(); ++row) {
    EngineSequence* s = prepared.sampling[row];
    bool under_min = s->output_length() < s->options.min_tokens;
    std::span<const int32_t> banned = under_min ? std::span<const int32_t>(s->stop_ids) : std::span<const int32_t>();
    if (s->matcher) {
      // The matcher has seen every earlier token: the step that sampled the last one was collected
      // before this one was planned (next_needs_tokens).
      DSINFER_CHECK(s->unresolved == 0, "request ", s->id, ": a constrained row was planned before its last token was known");
      if (rows.bitmask_row.empty()) {
        rows.bitmask_row.assign(prepared.sampling.size(), -1);
        if (!spare_bitmasks.empty()) {
          rows.bitmask = std::move(spare_bitmasks.back());
          spare_bitmasks.pop_back();
          rows.bitmask.clear();
        }
      }
      add_bitmask_row(*s->matcher, rows, static_cast<int>(row), banned);
      prepared.next_needs_tokens = true;
    }
    append_sampling_row(rows, s->options.sampling, s->sampler, s->options.logit_bias, banned,
                        s->sampler.uniforms.next(), s->options.logprobs);
    const SamplingOptions& o = s->options.sampling;
    if (o.repetition_penalty != 1.0f || o.frequency_penalty != 0.0f || o.presence_penalty != 0.0f)
      prepared.next_needs_tokens = true;
  }
  prepared.batch = builder.build();
  prepared.work = std::move(reserved.work);
  return prepared;
}

// Rows at prompt positions [num_computed, num_computed + tokens) below the last prompt position
// (whose row samples the first token) and not scored before a preemption, each against the prompt
// token after it. Every chunk scores its own rows, so a prompt's rows come back once each, in order.
void Engine::Impl::add_scored_rows(const ScheduledWork& work, model::BatchBuilder& builder, PreparedStep& prepared) {
  EngineSequence& s = engine_sequence(*work.sequence);
  // The cache never hands a sequence rows it has yet to score (capacity.cc), so none is skipped.
  DSINFER_CHECK(s.prompt_scored >= std::min(s.num_computed, s.prompt_length - 1), "request ", s.id,
                ": prompt rows from ", s.prompt_scored, " to ", s.num_computed, " would never be scored");
  const int64_t begin = std::max(s.num_computed, s.prompt_scored);
  const int64_t end = std::min(s.num_computed + work.num_tokens, s.prompt_length - 1);
  if (begin >= end) return;
  builder.score(static_cast<int32_t>(begin - s.num_computed), std::span(s.tokens).subspan(begin + 1, end - begin),
                s.options.prompt_logprobs);
  prepared.scored.push_back({&s, end - begin, end});
}

bool Engine::Impl::launch_step(PreparedStep& prepared) {
  const double start = thread_cpu_seconds();
  try {
    executor->launch(prepared.batch, prepared.sampling_rows);
  } catch (const FatalDeviceError& error) {
    device_cpu_seconds += thread_cpu_seconds() - start;
    fail_engine(str_cat("the device failed and cannot run another step: ", error.what()));
    return false;
  } catch (const std::exception& error) {
    device_cpu_seconds += thread_cpu_seconds() - start;
    // The step in flight ran: its tokens are delivered before this step's requests fail.
    if (in_flight) collect_in_flight();
    fail_step(prepared, error.what());
    return false;
  }
  device_cpu_seconds += thread_cpu_seconds() - start;
  for (const ScheduledWork& w : prepared.work) {
    EngineSequence& s = engine_sequence(*w.sequence);
    bool prompt_done_now = s.num_computed < s.prompt_length && s.num_computed + w.num_tokens >= s.prompt_length;
    s.num_computed += w.num_tokens;
    ++s.steps_in_flight;
    // The prompt's pages are offered to the prefix cache once it is computed (a later step that
    // reads them runs after this one on the device); the rest of the sequence's pages when it
    // releases them (capacity.h), so decoding never walks the tree.
    if (prefix_cache && prompt_done_now) prefix_cache->insert(std::span(s.tokens).first(s.num_computed), s.pages);
  }
  for (const PreparedStep::ScoredPiece& piece : prepared.scored) piece.sequence->prompt_scored = piece.scored_after;
  prepared.token_index.resize(prepared.sampling.size());
  for (size_t row = 0; row < prepared.sampling.size(); ++row) {
    EngineSequence& s = *prepared.sampling[row];
    prepared.token_index[row] = static_cast<int64_t>(s.tokens.size());
    s.tokens.push_back(-static_cast<int32_t>(row) - 1);
    ++s.unresolved;
  }
  return true;
}

SampledTokens Engine::Impl::take_tokens(PreparedStep& prepared) {
  const double start = thread_cpu_seconds();
  backend::SampledTokens device = executor->collect();
  device_cpu_seconds += thread_cpu_seconds() - start;
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
  sampled.scores = executor->take_scores();
  DSINFER_CHECK(sampled.scores.size() == prepared.batch.scored_rows.size(), "prompt_logprobs: the executor scored ",
                sampled.scores.size(), " of the step's ", prepared.batch.scored_rows.size(), " prompt rows");
  return sampled;
}

bool Engine::Impl::collect_step(PreparedStep& prepared) {
  SampledTokens sampled;
  bool collected = false;
  try {
    sampled = take_tokens(prepared);
    collected = true;
  } catch (const FatalDeviceError& error) {
    fail_engine(str_cat("the device failed and cannot run another step: ", error.what()));
  } catch (const std::exception& error) {
    fail_step(prepared, error.what());
  }
  for (const ScheduledWork& w : prepared.work) --engine_sequence(*w.sequence).steps_in_flight;
  if (collected) complete(prepared, sampled);
  std::vector<int32_t>& bitmask = prepared.sampling_rows.bitmask;
  if (bitmask.capacity() > 0 && spare_bitmasks.size() < kMaxLaunchedSteps) spare_bitmasks.push_back(std::move(bitmask));
  return collected;
}

void Engine::Impl::collect_in_flight() {
  PreparedStep step = std::move(*in_flight);
  in_flight.reset();
  collect_step(step);
}

void Engine::Impl::complete(PreparedStep& prepared, SampledTokens& sampled) {
  // Scores first: a step that samples a prompt's first token also scores that prompt's last rows.
  size_t next_score = 0;
  for (const PreparedStep::ScoredPiece& piece : prepared.scored) {
    EngineSequence& s = *piece.sequence;
    if (s.state < RequestState::kFinished)
      for (int64_t i = 0; i < piece.rows; ++i) s.prompt_logprobs.push_back(std::move(sampled.scores[next_score + i]));
    next_score += static_cast<size_t>(piece.rows);
  }
  if (prepared.sampling.empty()) return;
  Clock::time_point now = Clock::now();
  for (size_t row = 0; row < prepared.sampling.size(); ++row) {
    EngineSequence& s = *prepared.sampling[row];
    if (s.state >= RequestState::kFinished) continue;  // ended while the step ran: its token is dropped
    int32_t token = sampled.tokens[row];
    const int64_t index = prepared.token_index[row];
    s.tokens[index] = token;
    --s.unresolved;
    if (s.matcher && !s.matcher->accept(token)) {
      fail(s, str_cat("structured output: the sampled token ", token, " is not allowed by the grammar (",
                      s.options.constraint->grammar->description(), ")"));
      continue;
    }
    const int64_t produced = index + 1 - s.prompt_length;  // output tokens up to this one
    // Every prompt row scored exactly once by now; anything else is a bug, which fails the request
    // rather than showing the client shifted or missing rows.
    if (produced == 1 && s.options.prompt_logprobs >= 0 &&
        static_cast<int64_t>(s.prompt_logprobs.size()) != s.prompt_length - 1) {
      fail(s, str_cat("prompt_logprobs: ", s.prompt_logprobs.size(), " rows were scored for a prompt of ",
                      s.prompt_length, " tokens"));
      continue;
    }
    ++metrics.generation_tokens;
    record_token(s.sampler, s.options.sampling, token);
    if (s.state == RequestState::kPrefilling) s.state = RequestState::kDecoding;  // not if preempted since
    if (produced == 1) {
      s.ttft_seconds = seconds_between(s.arrival, now);
      metrics.time_to_first_token.observe(s.ttft_seconds);
    } else {
      metrics.inter_token_latency.observe(seconds_between(s.last_token_time, now));
    }
    s.last_token_time = now;
    OutputEvent& event = emit(s);
    event.token = token;
    if (s.options.logprobs >= 0) detail_of(event).logprob = std::move(sampled.logprobs[row]);
    if (produced == 1) detail_of(event).cached_tokens = s.cached_tokens;
    if (produced == 1 && s.options.prompt_logprobs >= 0)
      detail_of(event).prompt_logprobs = std::move(s.prompt_logprobs);
    bool at_limit = index + 1 >= s.max_length;
    FinishReason reason = token_finish(s.stop_ids, s.options.min_tokens, token, produced, at_limit);
    // A grammar that has ended (a stop token where it may end) ends the request, whatever else.
    if (s.matcher && s.matcher->is_terminated()) reason = FinishReason::kStop;
    if (reason != FinishReason::kNone) finish(s, reason, event, produced);
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
  const double start = thread_cpu_seconds();
  device_cpu_seconds = 0.0;
  bool progressed = false;
  // Planning needs the step in flight's tokens when the executor does not overlap, or when a row's
  // penalties need its history.
  if (in_flight && (!overlap || in_flight->next_needs_tokens)) {
    collect_in_flight();
    progressed = true;
  }
  PreparedStep prepared = prepare();
  if (prepared.work.empty() && !in_flight && !progressed) {
    flush_outputs();  // aborts taken from the inbox
    publish_stats();
    return false;
  }
  // The device's part. What it throws fails this step's requests, or all of them if the device
  // is lost (launch_step, collect_step); the engine's own bookkeeping stays outside.
  const bool tried = !prepared.work.empty();
  bool launched = tried && launch_step(prepared);
  if (in_flight) collect_in_flight();  // the older step, while the new one runs
  if (launched) {
    metrics.iteration_tokens.observe(static_cast<double>(prepared.batch.num_tokens()));
    in_flight = std::move(prepared);
    if (!overlap) collect_in_flight();
  }
  drop_finished();
  flush_outputs();
  if (tried) ++steps;  // model steps tried (a collect-only pass is not one)
  publish_stats();
  const double total = thread_cpu_seconds() - start;
  std::lock_guard<std::mutex> lock(stats_mutex);
  overhead_us_total += (total - device_cpu_seconds) * 1e6;
  ++overhead_steps;
  return true;
}

}  // namespace dsinfer::runtime
