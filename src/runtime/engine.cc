// The engine loop. One thread owns every Sequence; callers reach it through a locked inbox.
// This file: the engine's lifecycle, the inbox, the loop, finishing and failing requests; one step
// is in engine_step.cc, prefill/decode disaggregation's hooks in engine_handoff.cc.
//
// A step: plan (micro_batch.h) -> reserve pages (capacity.h) -> build the batch -> launch the model
// and sampling (the device's part) -> collect the tokens -> the engine's stop decisions (stop
// tokens, length) -> hand compact per-request events to the output thread (output_processor.h),
// which detokenizes, matches stop strings and calls the sinks. On a GPU the next step is planned
// and launched before the previous one is collected (the overlap scheduler, engine_step.cc).
//
// Failures (step_error.h): what the device's part of a step throws fails that step's requests; a
// FatalDeviceError, or an exception out of the engine's own bookkeeping, fails every request and
// leaves the engine unhealthy. Nothing thrown on the engine thread ends the process.
#include "runtime/engine.h"

#include <algorithm>

#include "core/log.h"
#include "runtime/sharded_executor.h"
#include "runtime/engine_impl.h"
#include "runtime/output_constraint.h"
#include "runtime/step_error.h"

namespace dsinfer::runtime {

using engine_internal::engine_sequence;
using engine_internal::EngineSequence;
using engine_internal::PreparedStep;
using engine_internal::SampledTokens;
using engine_internal::seconds_between;

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: return "";
  }
  return "";
}

Engine::Impl::Impl(std::unique_ptr<StepExecutor> executor_in, const tokenizer::Tokenizer& tokenizer_in,
                   EngineConfig config_in)
    : executor(std::move(executor_in)),
      tokenizer(tokenizer_in),
      config(std::move(config_in)),
      max_model_len(served_context(config.max_model_len, executor->max_model_len())),
      pool(static_cast<int32_t>(executor->num_pages()), static_cast<int32_t>(executor->page_groups())),
      prefix_cache(config.enable_prefix_caching ? std::make_unique<PrefixCache>(pool, model::kPageSize) : nullptr),
      capacity(pool, prefix_cache.get(), model::kPageSize,
               static_cast<int32_t>(config.watermark * pool.group_size())),
      seed_source(config.seed) {
  host_kv = make_host_kv_tier(config.host_kv_cache, *executor, pool, prefix_cache.get(), capacity);  // issue 14
  // A speculative step is waited for (its drafts depend on what it accepts: speculative.h); the steps
  // adaptive drafting runs without drafts overlap as any other.
  overlap = config.overlap_schedule && executor->overlaps();
  if (config.speculative.enabled()) {
    // A prefill instance's module cache rows go to the decode instance, which drafts from them: it
    // runs the MTP pass over every step, whatever the load.
    if (config.disaggregation.mode == DisaggregationMode::kPrefill) config.speculative.disable_by_batch_size = 0;
    config.speculative.validate();
    DSINFER_CHECK(executor->can_draft(), "speculative decoding (", config.speculative.describe(),
                  ") needs the model's MTP modules on one rank: a model without them, or a sharded one, "
                  "cannot draft yet");
  }
  if (auto id = tokenizer.token_to_id("<think>")) think_start = *id;
  if (auto id = tokenizer.token_to_id("</think>")) think_end = *id;
  eos_ids = executor->eos_token_ids();
  if (auto eos = tokenizer.eos_id()) eos_ids.push_back(*eos);
  publish_stats();
  output = std::make_unique<OutputProcessor>(
      metrics, [this](RequestId id, FinishReason reason, int64_t completion_tokens) {
        {
          std::lock_guard<std::mutex> lock(inbox_mutex);
          ended_requests.push_back({id, reason, completion_tokens});
        }
        inbox_ready.notify_one();
      });
  // With disaggregation the transfer agent is made, driven and destroyed on the engine thread, the
  // one thread that may drive it (KvTransfer); what its configuration refuses fails the constructor.
  auto started = std::make_shared<std::promise<void>>();
  std::future<void> ready = started->get_future();
  thread = std::thread([this, started] {
    try {
      if (config.disaggregation.mode != DisaggregationMode::kNone) start_handoff();
    } catch (...) {
      started->set_exception(std::current_exception());
      return;
    }
    started->set_value();
    loop();
    handoff.reset();
  });
  try {
    ready.get();
  } catch (...) {
    thread.join();
    output.reset();
    throw;
  }
}


Engine::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(inbox_mutex);
    stopping = true;
  }
  inbox_ready.notify_all();
  thread.join();
  output.reset();  // delivers the last outputs while everything they refer to is alive
}

RequestId Engine::Impl::submit(std::vector<int32_t> prompt, RequestOptions options, StreamSink sink) {
  auto length = static_cast<int64_t>(prompt.size());
  if (length == 0) throw InvalidRequest("the prompt is empty", RequestPart::kPrompt);
  int64_t vocab = executor->vocab_size();
  for (int32_t id : prompt)
    if (id < 0 || id >= vocab)
      throw InvalidRequest(str_cat("token id ", id, " is outside the vocabulary of ", vocab), RequestPart::kPrompt);
  if (length >= max_model_len)
    throw InvalidRequest(str_cat("This model's maximum context length is ", max_model_len, " tokens. However, you ",
                                 "requested ", length, " tokens in the prompt, leaving no room for output."),
                         RequestPart::kPrompt);
  int64_t pages_needed = length / model::kPageSize + 1;
  if (pages_needed > pool.group_size())  // a sequence's pages lie in one group
    throw InvalidRequest(str_cat("the prompt (", length, " tokens) does not fit the KV cache of ", pool.group_size(),
                                 " pages", pool.groups() > 1 ? " a DP group" : ""), RequestPart::kPrompt);
  if (options.max_tokens < 0) throw InvalidRequest("the token budget must not be negative", RequestPart::kTokenBudget);
  if (options.logprobs > 20) throw InvalidRequest("at most 20 top logprobs", RequestPart::kLogprobs);
  if (options.prompt_logprobs < -1 || options.prompt_logprobs > 20)
    throw InvalidRequest(str_cat("prompt logprobs: -1 (none) or 0 to 20 top tokens, got ", options.prompt_logprobs),
                         RequestPart::kPromptLogprobs);
  check_logit_bias(options.logit_bias, vocab);
  check_kv_handoff(options, config.disaggregation.mode);

  auto sequence = std::make_unique<EngineSequence>();
  sequence->prompt_length = length;
  // The context, the KV cache and max_tokens all bound the length.
  // Speculative decoding writes the MTP module's cache up to N - 1 slots past a step's tokens.
  sequence->reserve_ahead = std::max(config.speculative.num_tokens - 1, 0);
  int64_t cache_tokens = static_cast<int64_t>(pool.group_size()) * model::kPageSize - sequence->reserve_ahead;
  sequence->max_length = std::min({max_model_len, length + options.max_tokens, cache_tokens});
  if (options.kv_handoff) {
    // A sender ends with its first token, once pushed; its stop strings are the receiver's to apply.
    // A receiver waits for pages and its prompt's KV outside the scheduler (kv_handoff.h).
    const bool sends = options.kv_handoff->role == KvHandoff::Role::kSend;
    if (sends) sequence->max_length = std::min(sequence->max_length, length + 1);
    if (sends) options.stop.clear();
    sequence->handing_off = !sends;
  }
  sequence->tokens = std::move(prompt);
  for (int32_t token : sequence->tokens) {  // a reasoning section the prompt opens (R1's template does)
    if (token == think_start) sequence->thinking = true;
    if (token == think_end) sequence->thinking = false;
  }
  sequence->arrival = Clock::now();
  sequence->stop_ids = options.ignore_eos ? std::vector<int32_t>{} : eos_ids;
  sequence->stop_ids.insert(sequence->stop_ids.end(), options.stop_token_ids.begin(), options.stop_token_ids.end());
  // Structured output: the matcher is made here, on the caller's thread, not the engine's.
  if (options.constraint) sequence->matcher = make_matcher(*options.constraint, vocab);
  sequence->stream = std::make_unique<RequestStream>(tokenizer, options, std::move(sink), length);
  sequence->options = std::move(options);
  {
    std::lock_guard<std::mutex> lock(inbox_mutex);
    if (!fatal_error.empty() || !healthy.load())
      throw EngineUnavailable(fatal_error.empty() ? "the engine has failed" : fatal_error);
    DSINFER_CHECK(!stopping, "the engine is shutting down");
    sequence->id = next_id++;
    sequence->stream->id = sequence->id;
    uint64_t seed = sequence->options.sampling.seed.value_or(seed_source());
    sequence->sampler = SamplerState(seed);
    init_sampler(sequence->sampler, sequence->options.sampling, sequence->tokens);
    RequestId id = sequence->id;
    inbox.push_back(std::move(sequence));
    inbox_ready.notify_one();
    return id;
  }
}

EngineSequence* Engine::Impl::find_live(RequestId id) {
  auto matches = [&](const std::unique_ptr<EngineSequence>& s) { return s->id == id; };
  auto in_running = std::find_if(running.begin(), running.end(), matches);
  auto in_waiting = std::find_if(waiting.begin(), waiting.end(), matches);
  EngineSequence* sequence = in_running != running.end() ? in_running->get()
                             : in_waiting != waiting.end() ? in_waiting->get() : nullptr;
  return sequence && sequence->state < RequestState::kFinished ? sequence : nullptr;
}

void Engine::Impl::take_inbox() {
  std::vector<RequestId> aborts;
  std::vector<EndedRequest> ended;
  std::vector<std::promise<bool>> flushes;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex);
    for (auto& sequence : inbox) waiting.push_back(std::move(sequence));
    inbox.clear();
    aborts.swap(abort_requests);
    ended.swap(ended_requests);
    flushes.swap(flush_requests);
  }
  for (RequestId id : aborts)
    if (EngineSequence* sequence = find_live(id)) abort_sequence(*sequence);
  for (const EndedRequest& request : ended)
    if (EngineSequence* sequence = find_live(request.id))
      finish(*sequence, request.reason, emit(*sequence), request.completion_tokens);
  drop_finished();
  for (std::promise<bool>& flush : flushes) flush.set_value(flush_prefix_cache_if_idle());  // issue 12
}

// Issue 12 (/flush_cache). Idle, every cached page is held by the tree alone, so clearing it (no
// page spilled to the host tier) empties it.
bool Engine::Impl::flush_prefix_cache_if_idle() {
  if (!running.empty() || !waiting.empty() || in_flight) return false;
  if (prefix_cache) prefix_cache->clear();
  if (host_kv) host_kv->clear();  // issue 14: SGLang's flush empties its host cache too
  publish_stats();
  return true;
}

void Engine::Impl::loop() {
  std::unique_lock<std::mutex> lock(inbox_mutex);
  while (true) {
    auto has_work = [&] {
      return stopping || !inbox.empty() || !abort_requests.empty() || !ended_requests.empty() ||
             !flush_requests.empty() || handoff_woken || in_flight.has_value() || has_schedulable();
    };
    // Transfers and rooms in flight are polled, not waited for (kv_handoff.h).
    if (handoff && handoff->busy()) {
      inbox_ready.wait_for(lock, std::chrono::microseconds(500), has_work);
    } else {
      inbox_ready.wait(lock, has_work);
    }
    handoff_woken = false;
    if (stopping) break;
    lock.unlock();
    try {
      output->wait_until_caught_up();  // not counted in the step's time: the engine idles meanwhile
      take_inbox();
      bool progressed = healthy.load() && step();
      lock.lock();
      // Handed-off sequences wait for the handoff, whose holds on pages may be what keeps the rest out.
      auto stuck = [](const auto& s) { return !s->handing_off && s->state < RequestState::kFinished; };
      if (!progressed && inbox.empty() && abort_requests.empty() && ended_requests.empty() &&
          std::any_of(waiting.begin(), waiting.end(), stuck) && !(handoff && handoff->busy())) {
        // Nothing could be scheduled (should not happen with a sane configuration): fail what waits
        // rather than spinning.
        lock.unlock();
        for (auto& sequence : waiting)
          if (stuck(sequence)) fail(*sequence, "the request could not be scheduled");
        drop_finished();
        flush_outputs();
        publish_stats();
        lock.lock();
      }
    } catch (const std::exception& error) {
      // Out of the engine's own bookkeeping, not the device's: its state is not to be trusted.
      if (lock.owns_lock()) lock.unlock();
      try {
        fail_engine(str_cat("internal engine error: ", error.what()));
      } catch (...) {
        healthy.store(false);  // no memory left even to fail the requests: at least say so
      }
      lock.lock();
    }
  }
  // Shutting down: what is still in flight or queued ends as aborted.
  for (auto& sequence : inbox) waiting.push_back(std::move(sequence));
  inbox.clear();
  for (std::promise<bool>& flush : flush_requests) flush.set_value(false);  // issue 12
  flush_requests.clear();
  lock.unlock();
  if (in_flight) {  // its tokens are not wanted, but the device must be done with its pages
    try {
      (void)executor->collect();
    } catch (const std::exception& error) {
      log_warning("shutting down: the last step failed: ", error.what());
    }
    for (const ScheduledWork& w : in_flight->work) --engine_sequence(*w.sequence).steps_in_flight;
    in_flight.reset();
  }
  for (auto& sequence : running)
    if (sequence->state < RequestState::kFinished) abort_sequence(*sequence);
  for (auto& sequence : waiting)
    if (sequence->state < RequestState::kFinished) abort_sequence(*sequence);
  drop_finished();
  flush_outputs();
}

void Engine::Impl::finish(EngineSequence& sequence, FinishReason reason, OutputEvent& last, int64_t output_tokens) {
  // The stream is handed over first, so that the client hears of the end even if releasing fails.
  last.finish = reason;
  OutputDetail& detail = detail_of(last);
  detail.closing = std::move(sequence.stream);
  detail.cached_tokens = sequence.cached_tokens;
  sequence.state = reason == FinishReason::kAbort ? RequestState::kAborted : RequestState::kFinished;
  if (handoff && sequence.options.kv_handoff) handoff->request_ended(sequence.id);
  capacity.release(sequence);
  metrics.prompt_tokens += sequence.prompt_length;
  ++finished_counter(metrics, reason);
  int64_t tokens = output_tokens >= 0 ? output_tokens : sequence.known_output_length();
  // Issue 12: vLLM's per-request histograms (prompt and output tokens, prefill and decode time).
  metrics.observe_finished_request(
      sequence.prompt_length, tokens,
      sequence.scheduled_once ? seconds_between(sequence.arrival, sequence.first_scheduled) : -1.0,
      sequence.ttft_seconds, seconds_between(sequence.arrival, sequence.last_token_time));
  if (tokens > 0) {
    double e2e = seconds_between(sequence.arrival, Clock::now());
    metrics.e2e_request_latency.observe(e2e);
    if (tokens > 1) metrics.time_per_output_token.observe((e2e - sequence.ttft_seconds) / (tokens - 1));
  }
}

void Engine::Impl::fail(EngineSequence& sequence, const std::string& message) {
  OutputEvent& last = emit(sequence);
  detail_of(last).error = message;
  finish(sequence, FinishReason::kError, last);
}

void Engine::Impl::fail_step(const PreparedStep& prepared, const std::string& what) {
  std::string message = str_cat("the model step failed: ", what);
  log_warning("step ", steps, ": ", message, " (failing its ", prepared.work.size(), " requests)");
  for (const ScheduledWork& w : prepared.work) {
    EngineSequence& sequence = engine_sequence(*w.sequence);
    if (sequence.state < RequestState::kFinished) fail(sequence, message);
  }
}

void Engine::Impl::fail_engine(const std::string& message) {
  log_line(LogLevel::kError, str_cat(message, "; failing every request and refusing new ones"));
  {
    std::lock_guard<std::mutex> lock(inbox_mutex);
    if (fatal_error.empty()) fatal_error = message;
    for (auto& sequence : inbox) waiting.push_back(std::move(sequence));
    inbox.clear();
  }
  healthy.store(false);
  auto fail_all = [&](auto& sequences) {
    for (auto& sequence : sequences) {
      if (sequence->state >= RequestState::kFinished) continue;
      try {
        fail(*sequence, message);
      } catch (const std::exception& error) {
        // Its pages may be lost; the engine serves nothing more anyway.
        log_warning("request ", sequence->id, ": ", error.what());
        sequence->state = RequestState::kFinished;
      }
    }
  };
  fail_all(running);
  fail_all(waiting);
  drop_finished();
  flush_outputs();
  publish_stats();
}

void Engine::Impl::drop_finished() {
  // A launched step still refers to a sequence until it is collected.
  auto done = [](const std::unique_ptr<EngineSequence>& s) {
    return s->state >= RequestState::kFinished && s->steps_in_flight == 0;
  };
  std::erase_if(running, done);
  std::erase_if(waiting, done);
}

void Engine::Impl::publish_stats() {
  EngineStats stats;
  auto live = [](const auto& sequences) {
    return static_cast<int64_t>(std::count_if(sequences.begin(), sequences.end(), [](const auto& s) {
      return s->state < RequestState::kFinished;
    }));
  };
  stats.running = live(running);
  stats.waiting = live(waiting);
  stats.total_pages = pool.total();
  stats.page_groups = pool.groups();
  stats.cached_pages = prefix_cache ? prefix_cache->cached() : 0;
  stats.free_pages = pool.free_count() + (prefix_cache ? prefix_cache->evictable() : 0);
  stats.prefix_queries = prefix_cache ? prefix_cache->queried_tokens() : 0;
  stats.prefix_hits = prefix_cache ? prefix_cache->hit_tokens() : 0;
  stats.preemptions = preemptions;
  stats.steps = steps;
  stats.graph_steps = executor->graph_steps();
  stats.kv_pushes = handoff ? handoff->pushes() : 0;
  stats.kv_layerwise_pushes = handoff ? handoff->layerwise_pushes() : 0;
  if (host_kv) stats.host_kv = host_kv->stats();  // issue 14: restored tokens are prefix hits too
  stats.prefix_hits += stats.host_kv.hit_tokens;
  std::lock_guard<std::mutex> lock(stats_mutex);
  published = stats;
}

namespace {

// The cache pages config asks for, or that its sequences and byte budget give.
int64_t configured_pages(const model::DeepseekModel& model, const EngineConfig& config) {
  int64_t context = served_context(config.max_model_len, model.max_positions());
  return config.num_pages > 0 ? config.num_pages
                              : pages_for(model, config.max_num_seqs, context, config.kv_cache_bytes);
}

ExecutorOptions executor_options(const EngineConfig& config) {
  ExecutorOptions options;
  options.cuda_graph_max_batch = static_cast<int>(std::min(config.cuda_graph_max_batch, config.max_num_seqs));
  options.speculative = config.speculative;
  return options;
}

}  // namespace

Engine::Engine(const model::DeepseekModel& model, const tokenizer::Tokenizer& tokenizer, EngineConfig config)
    : Engine(make_model_executor(model, configured_pages(model, config), executor_options(config)), tokenizer,
             std::move(config)) {}

Engine::Engine(ShardedModel& model, const tokenizer::Tokenizer& tokenizer, EngineConfig config)
    : Engine(make_sharded_executor(model, configured_pages(model.rank(0), config), executor_options(config)),
             tokenizer, std::move(config)) {}

Engine::Engine(std::unique_ptr<StepExecutor> executor, const tokenizer::Tokenizer& tokenizer, EngineConfig config)
    : impl_(std::make_unique<Impl>(std::move(executor), tokenizer, std::move(config))) {}

Engine::~Engine() = default;

RequestId Engine::submit(std::vector<int32_t> prompt, RequestOptions options, StreamSink sink) {
  return impl_->submit(std::move(prompt), std::move(options), std::move(sink));
}

void Engine::abort(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(impl_->inbox_mutex);
    impl_->abort_requests.push_back(id);
  }
  impl_->inbox_ready.notify_one();
}

void Engine::add_kv_destination(KvDestination destination) {
  DSINFER_CHECK(impl_->config.disaggregation.mode == DisaggregationMode::kPrefill,
                "KV destination for room '", destination.room, "': this engine is not a prefill instance");
  impl_->kv_destinations(std::move(destination));
}

KvEndpoint Engine::kv_endpoint() const {
  DSINFER_CHECK(impl_->config.disaggregation.mode != DisaggregationMode::kNone,
                "this engine does not disaggregate prefill and decode: it has no KV endpoint");
  return impl_->kv_endpoint;
}

// Issue 12 (/flush_cache): answered by the engine thread at its next look at the inbox.
bool Engine::flush_prefix_cache() {
  std::future<bool> flushed;
  {
    std::lock_guard<std::mutex> lock(impl_->inbox_mutex);
    if (impl_->stopping) return false;
    flushed = impl_->flush_requests.emplace_back().get_future();
  }
  impl_->inbox_ready.notify_one();
  return flushed.get();
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(impl_->stats_mutex);
  return impl_->published;
}

double Engine::take_overhead_us() {
  std::lock_guard<std::mutex> lock(impl_->stats_mutex);
  double mean = impl_->overhead_steps ? impl_->overhead_us_total / impl_->overhead_steps : 0.0;
  impl_->overhead_us_total = 0.0;
  impl_->overhead_steps = 0;
  return mean;
}

bool Engine::healthy() const { return impl_->healthy.load(); }

std::string Engine::fatal_error() const {
  std::lock_guard<std::mutex> lock(impl_->inbox_mutex);
  return impl_->fatal_error;
}

Metrics& Engine::metrics() { return impl_->metrics; }
int64_t Engine::vocab_size() const { return impl_->executor->vocab_size(); }
const std::vector<int32_t>& Engine::eos_token_ids() const { return impl_->eos_ids; }
int64_t Engine::max_model_len() const { return impl_->max_model_len; }
const EngineConfig& Engine::config() const { return impl_->config; }

}  // namespace dsinfer::runtime
