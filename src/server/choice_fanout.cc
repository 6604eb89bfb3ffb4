#include "server/choice_fanout.h"

#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "model/kv_cache.h"
#include "openai/openai_errors.h"
#include "openai/openai_stream.h"
#include "server/request_log.h"

namespace dsinfer::server {
namespace {

using runtime::FinishReason;
using runtime::StreamOutput;
using Admission = std::shared_ptr<InFlightRequests::Request>;

// Where a choice is: waiting for its prompt's choice 0 (to share the prompt's pages), in the
// engine, or ended (its last output shown, or never to run).
enum class ChoicePhase : uint8_t { kPending, kRunning, kEnded };

struct Choice {
  size_t prompt_index = 0;
  int64_t sample = 0;  // its place among its prompt's choices
  ChoiceFormat format;
  Generation generation;  // a whole answer gathers the text; a stream keeps only the end
  ChoicePhase phase = ChoicePhase::kPending;
  runtime::RequestId id = 0;  // once running
};

// The state of one answer. The engine's output thread delivers every choice's outputs, the event
// loop reports a disconnect, the request thread submits: one mutex orders them. Lock order: this
// mutex, then the engine's (submit, abort) and the drain's (InFlightRequests); neither calls back
// into this class while holding its own.
class FanOut : public std::enable_shared_from_this<FanOut> {
 public:
  FanOut(FanOutRequest request, runtime::Engine& engine, std::shared_ptr<HttpResponder> responder,
         Admission admission, bool log_requests);

  void start();
  void client_gone();

 private:
  bool shares_pages(size_t prompt_index) const;
  void submit(size_t index);
  void on_output(size_t index, const StreamOutput& output);
  void end_unsubmitted(size_t index, FinishReason reason, const std::string& error);
  void release_followers(size_t prompt_index, const StreamOutput& first_output);
  void show(Choice& choice, const StreamOutput& output);
  void show_in_stream(Choice& choice, const StreamOutput& output);
  void show_in_whole(Choice& choice, const StreamOutput& output);
  void begin_stream(std::string& events);
  void fail(const ProtocolError& error);
  void stop_the_rest();
  void finish_if_done();
  void end_answer();
  Usage total_usage() const;

  std::mutex mutex_;
  const FanOutRequest request_;
  runtime::Engine& engine_;
  const std::shared_ptr<HttpResponder> responder_;
  const Admission admission_;
  const bool log_requests_;
  const bool prefix_caching_;
  const ChunkEnvelope envelope_;
  std::vector<Choice> choices_;
  size_t ended_ = 0;
  bool stream_started_ = false;
  bool answered_ = false;  // nothing more goes to the client: its answer or error is out, or it left
  bool done_ = false;      // every choice has ended and the admission is finished
};

FanOut::FanOut(FanOutRequest request, runtime::Engine& engine, std::shared_ptr<HttpResponder> responder,
               Admission admission, bool log_requests)
    : request_(std::move(request)),
      engine_(engine),
      responder_(std::move(responder)),
      admission_(std::move(admission)),
      log_requests_(log_requests),
      prefix_caching_(engine.config().enable_prefix_caching),
      envelope_(request_.meta, request_.chunk_object, request_.include_usage) {
  DSINFER_CHECK(request_.n >= 1 && !request_.prompts.empty(), "an answer needs at least one choice");
  choices_.reserve(request_.prompts.size() * static_cast<size_t>(request_.n));
  for (size_t p = 0; p < request_.prompts.size(); ++p) {
    for (int64_t i = 0; i < request_.n; ++i) {
      Choice& choice = choices_.emplace_back();
      choice.prompt_index = p;
      choice.sample = i;
      choice.format = request_.format(p, static_cast<int64_t>(choices_.size() - 1));
    }
  }
}

// Whether the prompt's later choices wait for its first: only when there are later choices and the
// prefix cache can hand them a full page (never the one holding the last prompt token, whose
// logits each choice computes itself).
bool FanOut::shares_pages(size_t prompt_index) const {
  return prefix_caching_ && request_.n > 1 &&
         static_cast<int64_t>(request_.prompts[prompt_index].tokens.size()) > model::kPageSize;
}

void FanOut::start() {
  if (admission_->cut_short()) throw cut_short_by_shutdown();  // prepared after the drain's deadline
  {
    // Held while submitting: a first output waits until every choice is in, so that a prompt the
    // engine refuses is still a plain 4xx with nothing sent before it.
    std::lock_guard lock(mutex_);
    try {
      for (size_t index = 0; index < choices_.size(); ++index)
        if (choices_[index].sample == 0 || !shares_pages(choices_[index].prompt_index)) submit(index);
    } catch (...) {
      answered_ = true;  // the request thread answers with the error
      stop_the_rest();
      finish_if_done();
      throw;
    }
  }
  // The responder holds the callback, and this object holds the responder: a weak reference
  // keeps them from holding each other forever.
  std::weak_ptr<FanOut> weak = weak_from_this();
  responder_->on_disconnect([weak] {
    if (std::shared_ptr<FanOut> self = weak.lock()) self->client_gone();
  });
}

void FanOut::client_gone() {
  std::lock_guard lock(mutex_);
  answered_ = true;
  stop_the_rest();
  finish_if_done();
}

void FanOut::submit(size_t index) {
  Choice& choice = choices_[index];
  const ChoicePrompt& prompt = request_.prompts[choice.prompt_index];
  runtime::StreamSink sink = [self = shared_from_this(), index](const StreamOutput& output) {
    self->on_output(index, output);
  };
  if (log_requests_)
    sink = with_request_log(std::move(sink),
                            choices_.size() == 1 ? request_.meta.id : str_cat(request_.meta.id, "-", index));
  choice.id = engine_.submit(prompt.tokens, choice_options(prompt.options, choice.sample), std::move(sink));
  choice.phase = ChoicePhase::kRunning;
  admission_->running_as(engine_, choice.id);
}

void FanOut::on_output(size_t index, const StreamOutput& output) {
  std::lock_guard lock(mutex_);
  Choice& choice = choices_[index];
  if (choice.phase == ChoicePhase::kEnded) return;
  if (output.finished) {
    choice.phase = ChoicePhase::kEnded;
    ++ended_;
  }
  show(choice, output);
  if (choice.sample == 0) release_followers(choice.prompt_index, output);
  finish_if_done();
}

// A choice that never reached the engine ends as its prompt's first choice did (an abort) or with
// the engine's refusal (an error).
void FanOut::end_unsubmitted(size_t index, FinishReason reason, const std::string& error) {
  Choice& choice = choices_[index];
  choice.phase = ChoicePhase::kEnded;
  ++ended_;
  StreamOutput last;
  last.finished = true;
  last.finish_reason = reason;
  last.error = error;
  last.prompt_tokens = static_cast<int64_t>(request_.prompts[choice.prompt_index].tokens.size());
  show(choice, last);
}

// The prompt's first choice has delivered: its prompt is computed and its full pages are in the
// prefix cache, so the other choices go now (a first choice that ended at its first token counts too).
void FanOut::release_followers(size_t prompt_index, const StreamOutput& first_output) {
  const bool first_lost = first_output.finished && (first_output.finish_reason == FinishReason::kAbort ||
                                                    first_output.finish_reason == FinishReason::kError);
  const size_t begin = prompt_index * static_cast<size_t>(request_.n);
  for (size_t index = begin + 1; index < begin + static_cast<size_t>(request_.n); ++index) {
    if (choices_[index].phase != ChoicePhase::kPending) continue;  // submitted with it, or already ended
    if (first_lost) {
      end_unsubmitted(index, first_output.finish_reason, first_output.error);
      continue;
    }
    try {
      submit(index);
    } catch (const std::exception& error) {  // the engine failed or is stopping meanwhile
      end_unsubmitted(index, FinishReason::kError, error.what());
    }
  }
}

void FanOut::show(Choice& choice, const StreamOutput& output) {
  if (answered_) return;
  if (request_.stream) {
    show_in_stream(choice, output);
  } else {
    show_in_whole(choice, output);
  }
}

void FanOut::begin_stream(std::string& events) {
  if (stream_started_) return;
  stream_started_ = true;
  responder_->start_stream(200, std::string(kSseContentType), {{"Cache-Control", "no-cache"}});
  for (Choice& choice : choices_)
    if (choice.format.stream_head) events += choice.format.stream_head();
}

void FanOut::show_in_stream(Choice& choice, const StreamOutput& output) {
  // An abort the drain asked for (not the client's) ends the stream with an error.
  const bool cut = output.finished && output.finish_reason == FinishReason::kAbort && admission_->cut_short();
  if (cut && !stream_started_) return fail(cut_short_by_shutdown());
  std::string events;
  begin_stream(events);
  std::optional<StreamOutput> replaced;
  if (cut) {
    replaced = output;
    replaced->finish_reason = FinishReason::kError;
    replaced->error = cut_short_by_shutdown().what();
  }
  const StreamOutput& shown = replaced ? *replaced : output;
  events += choice.format.stream_next(shown);
  if (shown.finished) {
    choice.generation.finish_reason = shown.finish_reason;
    choice.generation.usage = usage_of(shown);
  }
  if (shown.finish_reason == FinishReason::kError) {  // the choice's error event is out; the stream ends
    responder_->send_chunk(events + envelope_.close(std::nullopt));
    responder_->finish_stream();
    answered_ = true;
    return stop_the_rest();
  }
  if (!events.empty()) responder_->send_chunk(std::move(events));
}

void FanOut::show_in_whole(Choice& choice, const StreamOutput& output) {
  choice.generation.add(output);
  if (!output.finished) return;
  if (output.finish_reason == FinishReason::kError) return fail(internal_error(output.error));
  if (output.finish_reason == FinishReason::kAbort && admission_->cut_short()) return fail(cut_short_by_shutdown());
}

// The answer is an error: it goes out instead of the answer, and the other choices stop.
void FanOut::fail(const ProtocolError& error) {
  responder_->respond(error.status(), "application/json", error_body(error));
  answered_ = true;
  stop_the_rest();
}

// Once the answer has failed or the client has left: the running choices are aborted (each still
// delivers its last output, which ends it) and those not yet submitted never will be.
void FanOut::stop_the_rest() {
  for (Choice& choice : choices_) {
    if (choice.phase == ChoicePhase::kRunning) {
      engine_.abort(choice.id);
    } else if (choice.phase == ChoicePhase::kPending) {
      choice.phase = ChoicePhase::kEnded;
      ++ended_;
    }
  }
}

void FanOut::finish_if_done() {
  if (done_ || ended_ < choices_.size()) return;
  done_ = true;
  if (!answered_) end_answer();
  admission_->finish();
}

void FanOut::end_answer() {
  answered_ = true;
  if (request_.stream) {
    std::string events;
    begin_stream(events);
    responder_->send_chunk(events + envelope_.close(total_usage()));
    responder_->finish_stream();
    return;
  }
  // A choice aborted without the client leaving (the engine stopping) leaves nobody to answer, as
  // for a single choice.
  for (const Choice& choice : choices_)
    if (choice.generation.finish_reason == FinishReason::kAbort) return;
  Json::Array answer_choices;
  answer_choices.reserve(choices_.size());
  for (Choice& choice : choices_) {
    // prompt_logprobs came with the prompt's first choice alone (choice_options).
    if (choice.sample > 0)
      choice.generation.prompt_logprobs =
          choices_[choice.prompt_index * static_cast<size_t>(request_.n)].generation.prompt_logprobs;
    answer_choices.push_back(choice.format.answer_choice(choice.generation));
  }
  Json answer = response_envelope(request_.meta, request_.object, std::move(answer_choices), total_usage());
  if (request_.finish_answer) request_.finish_answer(answer, choices_.front().generation);
  responder_->respond(200, "application/json", answer.dump());
}

// Each prompt once (its cached tokens as its first choice found them), every choice's completion.
Usage FanOut::total_usage() const {
  Usage usage;
  for (size_t p = 0; p < request_.prompts.size(); ++p) {
    usage.prompt_tokens += static_cast<int64_t>(request_.prompts[p].tokens.size());
    usage.cached_tokens += choices_[p * static_cast<size_t>(request_.n)].generation.usage.cached_tokens;
  }
  for (const Choice& choice : choices_) usage.completion_tokens += choice.generation.usage.completion_tokens;
  return usage;
}

}  // namespace

runtime::RequestOptions choice_options(runtime::RequestOptions options, int64_t i) {
  // Wraps past 2^64, as a seed's bits may.
  if (options.sampling.seed) options.sampling.seed = *options.sampling.seed + static_cast<uint64_t>(i);
  if (i > 0) options.prompt_logprobs = -1;
  return options;
}

void answer_choices(FanOutRequest request, runtime::Engine& engine, std::shared_ptr<HttpResponder> responder,
                    std::shared_ptr<InFlightRequests::Request> admission, bool log_requests) {
  auto fan_out =
      std::make_shared<FanOut>(std::move(request), engine, std::move(responder), std::move(admission), log_requests);
  fan_out->start();
}

}  // namespace dsinfer::server
