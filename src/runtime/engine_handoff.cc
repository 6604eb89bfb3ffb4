// The engine's hooks for prefill/decode disaggregation (disaggregation.h, kv_handoff.h): what the
// handoff driver reports becomes the requests' outcomes, and requests that receive are admitted
// with pages for their whole prompt before the step is planned.
#include <algorithm>

#include "runtime/engine_impl.h"

namespace dsinfer::runtime {

using engine_internal::EngineSequence;

void Engine::Impl::start_handoff() {
  handoff = std::make_unique<KvHandoffDriver>(config.disaggregation, *executor, pool, [this] {
    {
      std::lock_guard<std::mutex> lock(inbox_mutex);
      handoff_woken = true;
    }
    inbox_ready.notify_one();
  });
  kv_endpoint = handoff->endpoint();
  kv_destinations = handoff->destination_sink();
}

bool Engine::Impl::has_schedulable() const {
  auto schedulable = [&](const std::unique_ptr<EngineSequence>& s) {
    return !handoff || (!s->handing_off && s->state < RequestState::kFinished);
  };
  return std::any_of(running.begin(), running.end(), schedulable) ||
         std::any_of(waiting.begin(), waiting.end(), schedulable);
}

void Engine::Impl::drive_handoffs() {
  for (HandoffEvent& event : handoff->progress()) {
    EngineSequence* s = find_live(event.id);
    if (!s) continue;
    if (!event.error.empty()) {
      fail(*s, event.error);
    } else if (event.note) {
      receive_first_token(*s, *event.note);
    } else {  // a sender's push has landed: its one token was its output
      finish(*s, FinishReason::kLength, emit(*s), 1);
    }
  }
  admit_receivers();
}

// Receivers in arrival order, each with pages for its whole prompt (its prefix-cache hits kept) as
// the capacity step gives a new sequence, watermark included; the first that does not fit waits,
// and those after it with it.
void Engine::Impl::admit_receivers() {
  const Clock::time_point now = Clock::now();
  for (auto it = waiting.begin(); it != waiting.end();) {
    EngineSequence& s = **it;
    if (!receives_kv(s) || !s.handing_off || s.state != RequestState::kWaiting) {
      ++it;
      continue;
    }
    std::vector<Sequence*> one = {&s};
    CapacityResult admitted = capacity.reserve({PlannedWork{0, s.pending_tokens()}}, one);
    if (admitted.work.empty()) {
      // Nothing else holds pages or will give any back: it never fits.
      const bool hopeless = !handoff->busy() && std::none_of(running.begin(), running.end(), [](const auto& r) {
        return !r->pages.empty();
      });
      if (hopeless) fail(s, "the request could not be scheduled: its prompt's pages do not fit the KV cache");
      break;
    }
    s.state = RequestState::kPrefilling;
    mark_scheduled(s, now);
    running.push_back(std::move(*it));
    it = waiting.erase(it);
    if (std::string error = handoff->begin_receive(s); !error.empty()) fail(s, error);
  }
}

// The prompt's KV has landed in the receiver's pages: it is computed, and P's first token is its
// first output, which goes through the same checks as a sampled one.
void Engine::Impl::receive_first_token(EngineSequence& s, HandoffNote& note) {
  const std::string& room = s.options.kv_handoff->room;
  if (note.token < 0 || note.token >= executor->vocab_size()) {
    fail(s, str_cat("room '", room, "': the prefill instance's first token ", note.token,
                    " is outside the vocabulary"));
    return;
  }
  if (s.options.logprobs >= 0 && !note.logprob) {
    fail(s, str_cat("room '", room, "': the prefill instance sent no logprobs with the first token (its request did "
                    "not ask for them)"));
    return;
  }
  DSINFER_CHECK(static_cast<int64_t>(s.tokens.size()) == s.prompt_length && s.unresolved == 0,
                "KV handoff: room '", room, "' received a first token after ", s.output_length(), " others");
  s.handing_off = false;
  s.num_computed = s.prompt_length;
  if (prefix_cache) prefix_cache->insert(std::span(s.tokens).first(s.num_computed), s.pages);
  s.sampler.uniforms.skip(1);  // P drew the first token's sample
  s.tokens.push_back(note.token);
  take_token(s, note.token, s.prompt_length, true, note.logprob ? &*note.logprob : nullptr, Clock::now());
}

}  // namespace dsinfer::runtime
