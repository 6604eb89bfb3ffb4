// The engine loop. One thread owns every Sequence; callers reach it through a locked inbox.
//
// A step: plan (micro_batch.h) -> reserve pages (capacity.h) -> build the batch -> run the model
// -> sample -> stop checks -> deliver. Building the batch (CPU) and running it are separate calls
// so that the next step's preparation can later overlap the device's work.
#include "runtime/engine.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "core/log.h"
#include "model/batch_builder.h"
#include "runtime/capacity.h"
#include "runtime/micro_batch.h"
#include "runtime/sequence.h"

namespace dsinfer::runtime {
namespace {

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// A step ready to run: the batch, and which sequences sample from which logits row.
struct PreparedStep {
  model::ForwardBatch batch;
  std::vector<ScheduledWork> work;
  std::vector<Sequence*> sampling;  // in logits-row order
};

}  // namespace

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

struct Engine::Impl {
  Impl(std::unique_ptr<StepExecutor> executor_in, const tokenizer::Tokenizer& tokenizer_in, EngineConfig config_in)
      : executor(std::move(executor_in)),
        tokenizer(tokenizer_in),
        config(std::move(config_in)),
        max_model_len(config.max_model_len > 0 ? std::min(config.max_model_len, executor->max_model_len())
                                               : executor->max_model_len()),
        pool(static_cast<int32_t>(executor->num_pages())),
        prefix_cache(config.enable_prefix_caching ? std::make_unique<PrefixCache>(pool, model::kPageSize) : nullptr),
        capacity(pool, prefix_cache.get(), model::kPageSize,
                 static_cast<int32_t>(config.watermark * pool.total())),
        seed_source(config.seed) {
    eos_ids = executor->eos_token_ids();
    if (auto eos = tokenizer.eos_id()) eos_ids.push_back(*eos);
    publish_stats();
    thread = std::thread([this] { loop(); });
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(inbox_mutex);
      stopping = true;
    }
    inbox_ready.notify_all();
    thread.join();
  }

  RequestId submit(std::vector<int32_t> prompt, RequestOptions options, StreamSink sink);
  void loop();
  void take_inbox(std::unique_lock<std::mutex>& lock);
  bool step();
  PreparedStep prepare();
  void complete(PreparedStep& prepared, const Tensor& logits);
  void deliver(Sequence& sequence, const StreamOutput& output);
  // The output handed to sinks, cleared for reuse: a step allocates nothing per token for it.
  StreamOutput& fresh_output();
  // Ends a request; `output` (tokens and text of this step, if any) goes out as the final one.
  void finish(Sequence& sequence, FinishReason reason, StreamOutput& output);
  void abort_sequence(Sequence& sequence) {
    StreamOutput& last = fresh_output();
    sequence.stop->flush(last.text);  // text held back for a possible stop string
    finish(sequence, FinishReason::kAbort, last);
  }
  void drop_finished();
  void publish_stats();

  std::unique_ptr<StepExecutor> executor;
  const tokenizer::Tokenizer& tokenizer;
  EngineConfig config;
  int64_t max_model_len;
  std::vector<int32_t> eos_ids;
  PagePool pool;
  std::unique_ptr<PrefixCache> prefix_cache;
  CapacityScheduler capacity;
  Metrics metrics;

  // Shared with callers.
  std::mutex inbox_mutex;
  std::condition_variable inbox_ready;
  std::vector<std::unique_ptr<Sequence>> inbox;
  std::vector<RequestId> abort_requests;
  bool stopping = false;
  std::atomic<RequestId> next_id{1};
  std::mt19937_64 seed_source;  // guarded by inbox_mutex

  mutable std::mutex stats_mutex;
  EngineStats published;
  double overhead_us_total = 0.0;
  int64_t overhead_steps = 0;

  // Engine thread only.
  std::deque<std::unique_ptr<Sequence>> waiting;
  std::vector<std::unique_ptr<Sequence>> running;
  int64_t steps = 0;
  int64_t preemptions = 0;
  double device_seconds = 0.0;  // this step's model call and sampling
  StreamOutput scratch;
  std::vector<Sequence*> step_sequences;
  std::vector<Candidate> step_candidates;
  std::thread thread;
};

RequestId Engine::Impl::submit(std::vector<int32_t> prompt, RequestOptions options, StreamSink sink) {
  auto length = static_cast<int64_t>(prompt.size());
  if (length == 0) throw InvalidRequest("the prompt is empty", "prompt");
  int64_t vocab = executor->vocab_size();
  for (int32_t id : prompt)
    if (id < 0 || id >= vocab)
      throw InvalidRequest(str_cat("token id ", id, " is outside the vocabulary of ", vocab), "prompt");
  if (length >= max_model_len)
    throw InvalidRequest(str_cat("This model's maximum context length is ", max_model_len, " tokens. However, you ",
                                 "requested ", length, " tokens in the prompt, leaving no room for output."),
                         "messages");
  int64_t pages_needed = length / model::kPageSize + 1;
  if (pages_needed > pool.total())
    throw InvalidRequest(str_cat("the prompt (", length, " tokens) does not fit the KV cache of ", pool.total(),
                                 " pages"), "messages");
  if (options.max_tokens < 0) throw InvalidRequest("max_tokens must not be negative", "max_tokens");
  if (options.logprobs > 20) throw InvalidRequest("at most 20 top logprobs", "top_logprobs");

  auto sequence = std::make_unique<Sequence>();
  sequence->prompt_length = length;
  // The context, the KV cache and max_tokens all bound the length.
  int64_t cache_tokens = static_cast<int64_t>(pool.total()) * model::kPageSize;
  sequence->max_length = std::min({max_model_len, length + options.max_tokens, cache_tokens});
  sequence->tokens = std::move(prompt);
  sequence->arrival = Clock::now();
  std::vector<int32_t> stop_ids = options.ignore_eos ? std::vector<int32_t>{} : eos_ids;
  stop_ids.insert(stop_ids.end(), options.stop_token_ids.begin(), options.stop_token_ids.end());
  sequence->options = std::move(options);
  sequence->sink = std::move(sink);
  sequence->stop = std::make_unique<StopChecker>(tokenizer, sequence->options, std::move(stop_ids));
  {
    std::lock_guard<std::mutex> lock(inbox_mutex);
    DSINFER_CHECK(!stopping, "the engine is shutting down");
    sequence->id = next_id++;
    uint64_t seed = sequence->options.sampling.seed.value_or(seed_source());
    sequence->sampler = SamplerState(seed);
    init_sampler(sequence->sampler, sequence->options.sampling, sequence->tokens);
    RequestId id = sequence->id;
    inbox.push_back(std::move(sequence));
    inbox_ready.notify_one();
    return id;
  }
}

void Engine::Impl::take_inbox(std::unique_lock<std::mutex>& lock) {
  for (auto& sequence : inbox) waiting.push_back(std::move(sequence));
  inbox.clear();
  std::vector<RequestId> aborts;
  aborts.swap(abort_requests);
  lock.unlock();
  for (RequestId id : aborts) {
    auto matches = [&](const std::unique_ptr<Sequence>& s) { return s->id == id; };
    auto in_running = std::find_if(running.begin(), running.end(), matches);
    auto in_waiting = std::find_if(waiting.begin(), waiting.end(), matches);
    Sequence* sequence = in_running != running.end() ? in_running->get()
                         : in_waiting != waiting.end() ? in_waiting->get() : nullptr;
    if (sequence && sequence->state < RequestState::kFinished) abort_sequence(*sequence);
  }
  drop_finished();
  lock.lock();
}

void Engine::Impl::loop() {
  std::unique_lock<std::mutex> lock(inbox_mutex);
  while (true) {
    inbox_ready.wait(lock, [&] {
      return stopping || !inbox.empty() || !abort_requests.empty() || !running.empty() || !waiting.empty();
    });
    if (stopping) break;
    take_inbox(lock);
    lock.unlock();
    bool progressed = step();
    lock.lock();
    if (!progressed && inbox.empty() && abort_requests.empty()) {
      // Nothing could be scheduled (should not happen with a sane configuration): fail what waits
      // rather than spinning.
      lock.unlock();
      for (auto& sequence : waiting) {
        StreamOutput& failure = fresh_output();
        failure.error = "the request could not be scheduled";
        finish(*sequence, FinishReason::kError, failure);
      }
      drop_finished();
      lock.lock();
    }
  }
  lock.unlock();
  for (auto& sequence : running) abort_sequence(*sequence);
  for (auto& sequence : waiting) abort_sequence(*sequence);
  lock.lock();
  for (auto& sequence : inbox) {
    StreamOutput& output = fresh_output();
    output.finished = true;
    output.finish_reason = FinishReason::kAbort;
    sequence->sink(output);
  }
  inbox.clear();
  lock.unlock();
  drop_finished();
}

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
    std::vector<std::unique_ptr<Sequence>> still_running, back_to_waiting;
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
    if (samples) prepared.sampling.push_back(&s);
  }
  prepared.batch = builder.build();
  prepared.work = std::move(reserved.work);
  return prepared;
}

void Engine::Impl::complete(PreparedStep& prepared, const Tensor& logits) {
  for (const ScheduledWork& w : prepared.work) {
    Sequence& s = *w.sequence;
    bool prompt_done_now = s.num_computed < s.prompt_length && s.num_computed + w.num_tokens >= s.prompt_length;
    s.num_computed += w.num_tokens;
    // The prompt's pages are offered to the prefix cache once it is computed; the rest of the
    // sequence's pages when it releases them (capacity.h), so decoding never walks the tree.
    if (prefix_cache && prompt_done_now) prefix_cache->insert(std::span(s.tokens).first(s.num_computed), s.pages);
  }
  if (prepared.sampling.empty()) return;
  int64_t vocab = logits.dim(1);
  std::vector<backend::SamplingParams> params;
  std::vector<float> uniforms;
  // Logprobs are of the raw model output: rows that want them keep a copy before processing.
  std::vector<std::vector<float>> raw_logits;
  for (size_t row = 0; row < prepared.sampling.size(); ++row) {
    Sequence& s = *prepared.sampling[row];
    float* row_logits = logits.data<float>() + row * vocab;
    if (s.options.logprobs >= 0) {
      raw_logits.resize(prepared.sampling.size());
      raw_logits[row].assign(row_logits, row_logits + vocab);
    }
    bool under_min = s.output_length() < s.options.min_tokens;
    static const std::vector<int32_t> kNone;
    process_logits(row_logits, vocab, s.options.sampling, s.sampler, under_min ? s.stop->stop_ids() : kNone);
    params.push_back(to_sampling_params(s.options.sampling));
    uniforms.push_back(s.sampler.uniforms.next());
  }
  auto sample_start = Clock::now();
  std::vector<int32_t> tokens = executor->sample(logits, params, uniforms);
  device_seconds += seconds_between(sample_start, Clock::now());

  Clock::time_point now = Clock::now();
  metrics.generation_tokens += prepared.sampling.size();
  for (size_t row = 0; row < prepared.sampling.size(); ++row) {
    Sequence& s = *prepared.sampling[row];
    int32_t token = tokens[row];
    StreamOutput& output = fresh_output();
    if (s.options.logprobs >= 0)
      output.logprobs.push_back(token_logprobs(raw_logits[row].data(), vocab, token, s.options.logprobs));
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
    bool at_limit = static_cast<int64_t>(s.tokens.size()) >= s.max_length;
    StopChecker::Step step = s.stop->push(token, s.output_length(), at_limit, output.text);
    output.token_ids.push_back(token);
    if (step.finish != FinishReason::kNone) {
      output.stop_reason = std::move(step.stop_reason);
      finish(s, step.finish, output);
      continue;
    }
    deliver(s, output);
  }
}

void Engine::Impl::deliver(Sequence& sequence, const StreamOutput& output) {
  if (sequence.sink) sequence.sink(output);
}

StreamOutput& Engine::Impl::fresh_output() {
  StreamOutput& out = scratch;
  out.token_ids.clear();
  out.text.clear();
  out.logprobs.clear();
  out.finished = false;
  out.finish_reason = FinishReason::kNone;
  out.stop_reason.clear();
  out.error.clear();
  out.prompt_tokens = out.completion_tokens = out.cached_tokens = 0;
  return out;
}

void Engine::Impl::finish(Sequence& sequence, FinishReason reason, StreamOutput& output) {
  Clock::time_point now = Clock::now();
  capacity.release(sequence);
  sequence.state = reason == FinishReason::kAbort ? RequestState::kAborted : RequestState::kFinished;
  output.finished = true;
  output.finish_reason = reason;
  output.prompt_tokens = sequence.prompt_length;
  output.completion_tokens = sequence.output_length();
  output.cached_tokens = sequence.cached_tokens;
  metrics.prompt_tokens += sequence.prompt_length;
  switch (reason) {
    case FinishReason::kStop: ++metrics.requests_finished_stop; break;
    case FinishReason::kLength: ++metrics.requests_finished_length; break;
    case FinishReason::kAbort: ++metrics.requests_aborted; break;
    default: ++metrics.requests_failed; break;
  }
  if (sequence.output_length() > 0) {
    double e2e = seconds_between(sequence.arrival, now);
    metrics.e2e_request_latency.observe(e2e);
    if (sequence.output_length() > 1)
      metrics.time_per_output_token.observe((e2e - sequence.ttft_seconds) / (sequence.output_length() - 1));
  }
  deliver(sequence, output);
}

void Engine::Impl::drop_finished() {
  auto done = [](const std::unique_ptr<Sequence>& s) { return s->state >= RequestState::kFinished; };
  std::erase_if(running, done);
  std::erase_if(waiting, done);
}

void Engine::Impl::publish_stats() {
  EngineStats stats;
  stats.running = static_cast<int64_t>(running.size());
  stats.waiting = static_cast<int64_t>(waiting.size());
  stats.total_pages = pool.total();
  stats.cached_pages = prefix_cache ? prefix_cache->cached() : 0;
  stats.free_pages = pool.free_count() + (prefix_cache ? prefix_cache->evictable() : 0);
  stats.prefix_queries = prefix_cache ? prefix_cache->queried_tokens() : 0;
  stats.prefix_hits = prefix_cache ? prefix_cache->hit_tokens() : 0;
  stats.preemptions = preemptions;
  stats.steps = steps;
  std::lock_guard<std::mutex> lock(stats_mutex);
  published = stats;
}

bool Engine::Impl::step() {
  auto start = Clock::now();
  PreparedStep prepared = prepare();
  if (prepared.work.empty()) {
    publish_stats();
    return false;
  }
  auto model_start = Clock::now();
  Tensor logits = executor->run(prepared.batch);
  device_seconds = seconds_between(model_start, Clock::now());
  complete(prepared, logits);
  drop_finished();
  ++steps;
  publish_stats();
  double total = seconds_between(start, Clock::now());
  std::lock_guard<std::mutex> lock(stats_mutex);
  overhead_us_total += (total - device_seconds) * 1e6;
  ++overhead_steps;
  return true;
}

Engine::Engine(const model::DeepseekModel& model, const tokenizer::Tokenizer& tokenizer, EngineConfig config) {
  int64_t context = config.max_model_len > 0 ? std::min(config.max_model_len, model.max_positions())
                                             : model.max_positions();
  int64_t pages = config.num_pages > 0 ? config.num_pages
                                       : pages_for(model, config.max_num_seqs, context, config.kv_cache_bytes);
  impl_ = std::make_unique<Impl>(make_model_executor(model, pages), tokenizer, std::move(config));
}

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

Metrics& Engine::metrics() { return impl_->metrics; }
int64_t Engine::max_model_len() const { return impl_->max_model_len; }
const EngineConfig& Engine::config() const { return impl_->config; }

}  // namespace dsinfer::runtime
