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

bool Engine::Impl::drafting_step() {
  if (!config.speculative.enabled()) return false;
  int64_t live = 0;
  bool gaps = false;  // a live sequence has module cache rows missing: it ran a step without drafting
  auto count = [&](const Sequence& s) {
    if (s.state >= RequestState::kFinished) return;
    ++live;
    gaps = gaps || !s.mtp_cache_current;
  };
  for (const auto& s : running) count(*s);
  for (const auto& s : waiting) count(*s);
  const int64_t limit = config.speculative.disable_by_batch_size;
  const bool now = !gaps && (limit == 0 || live <= limit);
  if (now != drafting && now) log_info("speculative decoding: drafting resumes (", live, " requests live)");
  if (now != drafting && !now)
    log_info("speculative decoding: drafting stops with ", live, " requests live (disable_by_batch_size ", limit,
             "); it resumes once every request that ran a step without drafts has left");
  drafting = now;
  return now;
}

PreparedStep Engine::Impl::prepare(bool drafting_now) {
  // Candidates: running then waiting, each in arrival order (member buffers, reused every step).
  std::vector<Sequence*>& all = step_sequences;
  std::vector<Candidate>& candidates = step_candidates;
  all.clear();
  candidates.clear();
  const bool without_drafts = config.speculative.enabled() && !drafting_now;
  // Ended sequences wait for their launched steps to be collected; a sequence whose placeholder is
  // its last token has nothing left to run.
  auto schedulable = [](const Sequence& s) {
    return s.state < RequestState::kFinished && !s.awaiting_last_token() && !s.handing_off;
  };
  for (auto& s : running)
    if (schedulable(*s)) all.push_back(s.get());
  for (auto& s : waiting)
    if (schedulable(*s)) all.push_back(s.get());
  if (without_drafts)  // the drafts a sequence carries go unverified
    for (Sequence* s : all) s->drafts.clear();
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
    s->drafts.clear();  // the recomputed prompt drafts again
    s->mtp_cache_current = true;  // its rows are computed again, by the step that recomputes them
    ++preemptions;
    log_warning("request ", s->id, " preempted for lack of KV pages (it will be recomputed); ", preemptions,
                " preemptions so far");
  }
  // Admitted sequences move to running; preempted ones to the front of the waiting queue.
  for (const ScheduledWork& w : reserved.work) {
    Sequence& s = *w.sequence;
    if (s.state != RequestState::kWaiting) continue;
    s.state = RequestState::kPrefilling;
    mark_scheduled(s, now);
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
  const bool speculative = drafting_now;
  if (speculative) prepared.speculative.emplace();
  std::vector<int32_t> piece;
  std::vector<RequestId> layerwise;  // senders whose pages go layer by layer during this step
  for (const ScheduledWork& w : reserved.work) {
    Sequence& s = *w.sequence;
    const auto known = static_cast<int64_t>(s.tokens.size());
    // Drafts past the tokens the plan gave the sequence are dropped.
    s.drafts.resize(std::min<size_t>(s.drafts.size(), std::max<int64_t>(0, s.num_computed + w.num_tokens - known)));
    const bool samples = s.num_computed + w.num_tokens == known + static_cast<int64_t>(s.drafts.size());
    // The piece: its tokens from the cache on, then its drafts.
    std::span<const int32_t> input =
        std::span(s.tokens).subspan(s.num_computed, w.num_tokens - static_cast<int64_t>(s.drafts.size()));
    if (!s.drafts.empty()) {
      piece.assign(input.begin(), input.end());
      piece.insert(piece.end(), s.drafts.begin(), s.drafts.end());
      input = piece;
    }
    builder.add(input, static_cast<int32_t>(s.num_computed), s.pages,
                !samples ? model::LogitRows::kNone : s.drafts.empty() ? model::LogitRows::kLast : model::LogitRows::kAll);
    if (samples) prepared.sampling.push_back(&engine_sequence(s));
    if (without_drafts) s.mtp_cache_current = false;  // no MTP pass over this step's rows
    if (samples && handoff && sends_kv(s) && s.output_length() == 0 && handoff->arm_layerwise(s))
      layerwise.push_back(s.id);
    if (s.scoring_prompt()) add_scored_rows(w, builder, prepared);
    if (speculative) {
      // The token after each row, where the host knows it: the prompt's next token.
      for (int64_t i = 0; i < w.num_tokens; ++i) {
        const int64_t next = s.num_computed + i + 1;
        prepared.speculative->follow.push_back(next < known && s.drafts.empty() ? s.tokens[next]
                                                                               : SpeculativeStep::kFollowsSample);
      }
    }
  }
  // What the device does to each sampled row's logits: the request's sampling options, its
  // penalty history, its logit_bias, its stop tokens banned while under min_tokens, the tokens its
  // grammar allows, and its next seeded draw.
  backend::SamplingBatch& rows = prepared.sampling_rows;
  prepared.first_row.assign(1, 0);
  size_t total_rows = 0;
  for (const EngineSequence* s : prepared.sampling) total_rows += 1 + s->drafts.size();
  for (size_t entry = 0; entry < prepared.sampling.size(); ++entry) {
    EngineSequence* s = prepared.sampling[entry];
    const auto row = static_cast<size_t>(prepared.first_row.back());
    bool under_min = s->output_length() < s->options.min_tokens;
    std::span<const int32_t> banned = under_min ? std::span<const int32_t>(s->stop_ids) : std::span<const int32_t>();
    if (s->matcher) {
      // The matcher has seen every earlier token: the step that sampled the last one was collected
      // before this one was planned (next_needs_tokens).
      DSINFER_CHECK(s->unresolved == 0, "request ", s->id, ": a constrained row was planned before its last token was known");
      if (rows.bitmask_row.empty()) {
        rows.bitmask_row.assign(total_rows, -1);
        if (!spare_bitmasks.empty()) {
          rows.bitmask = std::move(spare_bitmasks.back());
          spare_bitmasks.pop_back();
          rows.bitmask.clear();
        }
      }
      add_bitmask_row(*s->matcher, rows, static_cast<int>(row), banned);
      prepared.next_needs_tokens = true;
    }
    const SamplingOptions& o = s->options.sampling;
    const bool penalties = o.repetition_penalty != 1.0f || o.frequency_penalty != 0.0f || o.presence_penalty != 0.0f;
    if (penalties) prepared.next_needs_tokens = true;
    if (!speculative) {
      append_sampling_row(rows, o, s->sampler, s->options.logit_bias, banned, s->sampler.uniforms.next(),
                          s->options.logprobs);
      prepared.first_row.push_back(static_cast<int32_t>(row + 1));
      continue;
    }
    // Row j samples output position n + j with that position's draw (taken for good when the step
    // emits it, in complete()); relaxed acceptance wants the target's top tokens inside reasoning.
    SpeculativeStep::Sequence& verify = prepared.speculative->sequences.emplace_back();
    verify.first_row = static_cast<int32_t>(row);
    verify.drafts = s->drafts;
    UniformSource draws = s->sampler.uniforms;
    bool thinking = s->thinking;
    for (size_t j = 0; j <= s->drafts.size(); ++j) {
      const bool relaxed = j < s->drafts.size() && config.speculative.relaxed && thinking;
      if (j < s->drafts.size()) {
        verify.relaxed.push_back(relaxed);
        if (s->drafts[j] == think_end) thinking = false;
        if (s->drafts[j] == think_start) thinking = true;
      }
      append_sampling_row(rows, o, s->sampler, s->options.logit_bias, banned, draws.next(),
                          relaxed ? std::max(s->options.logprobs, config.speculative.relaxed_topk) : s->options.logprobs);
    }
    prepared.first_row.push_back(static_cast<int32_t>(row + 1 + s->drafts.size()));
    // Drafts for the next step only where its rows would be sampled as this one's: no history that
    // changes between them (penalties, a grammar), no stop token banned (min_tokens).
    const bool draftable =
        !penalties && !s->matcher && (s->stop_ids.empty() || s->output_length() + 1 >= s->options.min_tokens);
    verify.room = draftable ? s->max_length - static_cast<int64_t>(s->tokens.size()) : 0;
  }
  std::vector<int32_t> row_order;
  prepared.batch = builder.build(model::AttentionMode::kAuto, speculative ? &row_order : nullptr);
  if (speculative) {
    // A short piece moved ahead of the prompts takes its rows' following tokens with it.
    std::vector<int32_t>& follow = prepared.speculative->follow;
    std::vector<int32_t> in_batch_order(follow.size());
    for (size_t row = 0; row < follow.size(); ++row) in_batch_order[row_order[row]] = follow[row];
    follow = std::move(in_batch_order);
  }
  prepared.work = std::move(reserved.work);
  if (handoff) {
    // Op by op where layers go as they are written, so that every layer reports itself (a graph
    // would not); every step that runs its ops as they come moves the transfers along between layers.
    if (!layerwise.empty()) prepared.batch.eager = true;
    prepared.batch.after_layer = [driver = handoff.get(), senders = std::move(layerwise)](int64_t layer) {
      if (!senders.empty()) driver->layer_written(senders, layer);
      driver->progress_transport();
    };
  }
  return prepared;
}

void Engine::Impl::mark_scheduled(Sequence& s, Clock::time_point now) {
  if (s.scheduled_once) return;
  s.scheduled_once = true;
  s.first_scheduled = now;
  metrics.queue_time.observe(seconds_between(s.arrival, now));
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
    if (prepared.speculative) {
      prepared.speculated = executor->run_speculative(prepared.batch, prepared.sampling_rows, *prepared.speculative);
    } else {
      executor->launch(prepared.batch, prepared.sampling_rows);
    }
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
  for (size_t entry = 0; entry < prepared.sampling.size(); ++entry) {
    EngineSequence& s = *prepared.sampling[entry];
    prepared.token_index[entry] = static_cast<int64_t>(s.tokens.size());
    s.tokens.push_back(-prepared.first_row[entry] - 1);
    ++s.unresolved;
  }
  return true;
}

SampledTokens Engine::Impl::take_tokens(PreparedStep& prepared) {
  const double start = thread_cpu_seconds();
  SampledTokens sampled;
  backend::SampledTokens device;
  if (prepared.speculated) {
    device = std::move(prepared.speculated->sampled);
    sampled.accepted = std::move(prepared.speculated->accepted);
  } else {
    device = executor->collect();
  }
  device_cpu_seconds += thread_cpu_seconds() - start;
  const int64_t rows = prepared.first_row.back();
  DSINFER_CHECK(device.tokens.numel() == rows, "the executor sampled ", device.tokens.numel(), " tokens for ", rows,
                " rows");
  sampled.tokens.assign(device.tokens.data<int32_t>(), device.tokens.data<int32_t>() + rows);
  if (device.logprobs.defined()) {
    sampled.logprobs.resize(rows);
    for (size_t entry = 0; entry < prepared.sampling.size(); ++entry)
      if (int top_n = prepared.sampling[entry]->options.logprobs; top_n >= 0)
        for (int64_t row = prepared.first_row[entry]; row < prepared.first_row[entry + 1]; ++row)
          sampled.logprobs[row] = row_logprobs(device, row, top_n);
    // A draft taken by relaxed acceptance is not its row's sample: its logprob is among the row's
    // top tokens (the row asked for the top relaxed_topk, and the draft was one of them).
    for (size_t entry = 0; entry < sampled.accepted.size(); ++entry) {
      const std::vector<int32_t>& tokens = sampled.accepted[entry].tokens;
      for (size_t j = 0; j < tokens.size(); ++j) {
        TokenLogprob& logprob = sampled.logprobs[prepared.first_row[entry] + j];
        if (prepared.sampling[entry]->options.logprobs < 0 || logprob.token_id == tokens[j]) continue;
        const int64_t row = prepared.first_row[entry] + static_cast<int64_t>(j);
        const int64_t width = device.top_ids.dim(1);
        for (int64_t i = 0; i < width; ++i)
          if (device.top_ids.data<int32_t>()[row * width + i] == tokens[j]) {
            logprob.token_id = tokens[j];
            logprob.logprob = device.top_logprobs.data<float>()[row * width + i];
          }
      }
    }
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
  for (size_t entry = 0; entry < prepared.sampling.size(); ++entry) {
    EngineSequence& s = *prepared.sampling[entry];
    if (s.state >= RequestState::kFinished) continue;  // ended while the step ran: its tokens are dropped
    const int32_t first_row = prepared.first_row[entry];
    // Speculative decoding: the drafts it kept and the token after them; the cache rows of the
    // others are rolled back (launch_step counted them computed), and the next drafts wait.
    std::span<const int32_t> tokens(&sampled.tokens[first_row], 1);
    if (!sampled.accepted.empty()) {
      const Acceptance& accepted = sampled.accepted[entry];
      const auto drafts = static_cast<int64_t>(s.drafts.size());
      tokens = accepted.tokens;
      s.num_computed -= drafts - accepted.accepted;
      s.sampler.uniforms.skip(tokens.size());
      if (drafts > 0) {
        ++metrics.spec_decode_drafts;
        metrics.spec_decode_draft_tokens += drafts;
        metrics.spec_decode_accepted_tokens += accepted.accepted;
        for (int p = 0; p < accepted.accepted && p < Metrics::kMaxDraftPositions; ++p)
          ++metrics.spec_decode_accepted_per_position[p];
      }
      s.drafts = std::move(prepared.speculated->drafts[entry]);
    }
    for (size_t j = 0; j < tokens.size(); ++j) {
      const int32_t token = tokens[j];
      const int64_t row = first_row + static_cast<int64_t>(j);
      const int64_t index = prepared.token_index[entry] + static_cast<int64_t>(j);
      if (j == 0) {
        s.tokens[index] = token;
        --s.unresolved;
      } else {
        s.tokens.push_back(token);
      }
      TokenLogprob* logprob = s.options.logprobs >= 0 ? &sampled.logprobs[row] : nullptr;
      if (!take_token(s, token, index, j == 0, logprob, now)) break;
    }
  }
}

bool Engine::Impl::take_token(EngineSequence& s, int32_t token, int64_t index, bool first_of_step,
                              TokenLogprob* logprob, Clock::time_point now) {
  if (token == think_start) s.thinking = true;
  if (token == think_end) s.thinking = false;
  if (s.matcher && !s.matcher->accept(token)) {
    fail(s, str_cat("structured output: the sampled token ", token, " is not allowed by the grammar (",
                    s.options.constraint->grammar->description(), ")"));
    return false;
  }
  const int64_t produced = index + 1 - s.prompt_length;  // output tokens up to this one
  // Every prompt row scored exactly once by now; anything else is a bug, which fails the request
  // rather than showing the client shifted or missing rows.
  if (produced == 1 && s.options.prompt_logprobs >= 0 &&
      static_cast<int64_t>(s.prompt_logprobs.size()) != s.prompt_length - 1) {
    fail(s, str_cat("prompt_logprobs: ", s.prompt_logprobs.size(), " rows were scored for a prompt of ",
                    s.prompt_length, " tokens"));
    return false;
  }
  ++metrics.generation_tokens;
  record_token(s.sampler, s.options.sampling, token);
  if (s.state == RequestState::kPrefilling) s.state = RequestState::kDecoding;  // not if preempted since
  if (produced == 1) {
    s.ttft_seconds = seconds_between(s.arrival, now);
    metrics.time_to_first_token.observe(s.ttft_seconds);
  } else if (first_of_step) {  // a step's tokens arrive together: one latency per step, as vLLM counts it
    metrics.inter_token_latency.observe(seconds_between(s.last_token_time, now));
  }
  s.last_token_time = now;
  // A sender's first token goes to the decode instance in its note, its logprob with it.
  const bool hands_off = produced == 1 && handoff && sends_kv(s);
  HandoffNote note;
  if (hands_off) {
    note.room = s.options.kv_handoff->room;
    note.token = token;
    if (logprob) note.logprob = *logprob;
  }
  OutputEvent& event = emit(s);
  event.token = token;
  if (logprob) detail_of(event).logprob = std::move(*logprob);
  if (produced == 1) detail_of(event).cached_tokens = s.cached_tokens;
  if (produced == 1 && s.options.prompt_logprobs >= 0) detail_of(event).prompt_logprobs = std::move(s.prompt_logprobs);
  if (hands_off) {
    s.handing_off = true;  // the handoff ends it once the push has landed (engine_handoff.cc)
    handoff->begin_send(s, std::move(note));
    return false;
  }
  bool at_limit = index + 1 >= s.max_length;
  FinishReason reason = token_finish(s.stop_ids, s.options.min_tokens, token, produced, at_limit);
  // A grammar that has ended (a stop token where it may end) ends the request, whatever else.
  if (s.matcher && s.matcher->is_terminated()) reason = FinishReason::kStop;
  if (reason != FinishReason::kNone) {
    finish(s, reason, event, produced);
    return false;
  }
  return true;
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
  if (handoff) drive_handoffs();  // notes, landed pushes, timeouts; receivers admitted
  bool progressed = false;
  // Planning needs the step in flight's tokens when the executor does not overlap, when a row's
  // penalties need its history, or when the next step drafts (a speculative step runs alone).
  const bool drafting_now = drafting_step();
  if (in_flight && (!overlap || in_flight->next_needs_tokens || drafting_now)) {
    collect_in_flight();
    progressed = true;
  }
  PreparedStep prepared = prepare(drafting_now);
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
    if (!overlap || in_flight->speculative) collect_in_flight();  // a speculative step has run to its end
  }
  if (handoff) admit_receivers();  // into the pages this step gave back
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
