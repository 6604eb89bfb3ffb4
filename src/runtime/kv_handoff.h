// An engine's side of prefill/decode disaggregation (disaggregation.h): its transfer agent with the
// engine's cache registered, the peers' caches by address, the rooms in flight and their timeouts.
// The engine thread alone calls it, since one thread drives an agent; destinations and announce
// answers come from other threads through a locked mailbox, which wakes the engine.
//
// Prefill side (P). A request that sends samples its first token as usual; then its pages go to the
// destination of its room (which may have come before the request, or comes later), one transfer a
// cache layer, the last with the note. A prompt of at least layerwise_threshold tokens whose
// destination is known when its last chunk is planned goes layer by layer instead: the step reports
// each decoder layer once its rows are queued (ForwardBatch::after_layer), and that layer is posted
// once the executor's mark after it is reached (the device has written it), while the next ones
// compute; once the token is sampled the rest (the MTP modules' layers) follow with the note, or the
// note alone.
//
// Decode side (D). A request that receives is admitted like a new one (pages for its whole prompt,
// its prefix-cache hits kept), then announces a destination for the pages past its hits and waits;
// its note makes it a decoding sequence.
//
// Page holds. Whatever a transfer may touch is held by the handoff itself (PagePool::retain), beside
// the request's own hold: P's source pages from the first post until every transfer has settled (a
// transfer settles only once nothing reads its source), D's destination pages from the announce until
// the note arrives or, for a request that ended without it, until no write can still land. So a
// request may end at any time (abort, failure, shutdown) and release its pages as usual, and every
// hold is released once.
//
// Timeouts (bootstrap_timeout, T). P: a sampled request waits T for its destination; a destination
// is usable T after it arrived (D gives up on it T after announcing it); a posted push must settle
// within T (its pages stay held until it does). D: a request waits T after announcing for its note;
// one that ended without it keeps its destination pages until the note comes or 2T have passed
// since the later of its end and the announce's answer (P posts nothing into a destination older
// than T, which leaves T for the last writes to land).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/disaggregation.h"
#include "runtime/executor.h"
#include "runtime/kv_page_transfer.h"
#include "runtime/page_pool.h"
#include "runtime/sequence.h"

namespace dsinfer::runtime {

// The request's kv_handoff checked against the engine's mode; throws InvalidRequest (engine.h).
void check_kv_handoff(const RequestOptions& options, DisaggregationMode mode);
inline bool sends_kv(const Sequence& s) {
  return s.options.kv_handoff && s.options.kv_handoff->role == KvHandoff::Role::kSend;
}
inline bool receives_kv(const Sequence& s) {
  return s.options.kv_handoff && s.options.kv_handoff->role == KvHandoff::Role::kReceive;
}

// What the handoff tells the engine about one request: an error fails it; otherwise a note (D: its
// prompt's KV has landed, with its first token), or neither (P: the push has landed).
struct HandoffEvent {
  RequestId id = 0;
  std::string error;
  std::optional<HandoffNote> note;
};

class KvHandoffDriver {
 public:
  // Checks the configuration against the executor (dsinfer::Error), makes the agent and registers
  // the executor's cache. `wake` tells the engine thread the mailbox has news. `pool` must outlive it.
  KvHandoffDriver(const DisaggregationConfig& config, StepExecutor& executor, PagePool& pool,
                  std::function<void()> wake);
  ~KvHandoffDriver();  // the agent goes first: its endpoints close, nothing reads or writes the cache

  KvEndpoint endpoint() const { return endpoint_; }
  // P, for any thread: takes a room's destination; still callable (and ignored) once the driver is gone.
  std::function<void(KvDestination)> destination_sink() const;

  // P, planning the step that computes the sender's last prompt chunk: true when its pages go layer
  // by layer during that step (call layer_written from its ForwardBatch::after_layer). A layer is
  // posted once the executor's mark after it is reached (StepExecutor::mark_work: at once on the CPU;
  // on a GPU when the device has run the layer, polled between layers, while the engine waits for a
  // step's tokens, and by progress()).
  bool arm_layerwise(const Sequence& sender);
  void layer_written(const std::vector<RequestId>& senders, int64_t layer);
  // P: the sender's first token is sampled; its pages go once its destination is there.
  void begin_send(const Sequence& sender, HandoffNote note);
  // D: the receiver holds pages for its prompt (hits first, num_computed of them): announce them.
  // An error (its room is taken) fails it.
  std::string begin_receive(const Sequence& receiver);
  // The request ended (any reason): nothing more is posted or reported for it; its holds go once
  // nothing can touch its pages.
  void request_ended(RequestId id);

  // Progresses the agent: the mailbox, in-flight transfers, notes, deadlines.
  std::vector<HandoffEvent> progress();
  // Progresses the agent's transport alone, reporting nothing (the next progress() does): between the
  // layers of a step, so that pushes and receives keep moving through a long prefill (over TCP they
  // move only while the agent progresses; a surviving prefill instance that took every prompt starved
  // its pushes past their timeout between steps of seconds on a CPU).
  void progress_transport();
  // Transfers or rooms are pending: the engine polls (progress) instead of sleeping.
  bool busy() const { return !sends_.empty() || !receives_.empty(); }
  // P: pushes that landed, and of them those sent layer by layer.
  int64_t pushes() const { return pushes_; }
  int64_t layerwise_pushes() const { return layerwise_pushes_; }

 private:
  class Mailbox;
  struct Send {
    RequestId id = 0;
    std::string room;
    int64_t prompt_length = 0;
    std::vector<int32_t> pages;        // the request's, from page 0
    transfer::Blob address;            // the destination's agent
    std::optional<RemoteCache> remote;  // once the push is prepared
    std::vector<int32_t> from, to;     // the pages sent and where they go; `from` held while `held`
    bool held = false;
    bool layerwise = false;
    int64_t next_layer = 0;            // layers [0, next_layer) are posted
    std::vector<uint64_t> transfers;   // posted, not settled
    std::optional<HandoffNote> note;   // once the first token is sampled
    bool note_posted = false;
    bool closed = false;               // the request ended or heard how its push ended: no more posts or events
    std::string error;
    Clock::time_point deadline;        // for the destination, then for the push
  };
  struct Receive {
    RequestId id = 0;
    std::string room;
    uint64_t serial = 0;                        // of its announce
    std::vector<int32_t> pages;                 // the destination's, held
    Clock::time_point deadline;                 // for the note
    std::optional<Clock::time_point> answered;  // when the announce's done came
    std::optional<Clock::time_point> ended;     // when the request ended without its note
    bool reported = false;                      // an event went out for it
  };
  struct Arrived {
    KvDestination destination;
    Clock::time_point at;
  };

  // A layer that a step has queued for layer-wise senders, posted once its mark is reached.
  struct Written {
    std::vector<RequestId> senders;
    int64_t layer = 0;
    std::unique_ptr<backend::WorkMark> mark;
  };

  static Send new_send(const Sequence& sender);
  void post_layer(const std::vector<RequestId>& senders, int64_t layer);
  void post_written_layers();  // those whose marks are reached, in the order they were queued
  std::string prepare_push(Send& send, const KvDestination& destination, Clock::time_point arrived);
  void post_layers(Send& send, int64_t first, int64_t last, const transfer::Blob& note);
  void finish_posting(Send& send);  // the rest of the layers with the note
  void take_destination(KvDestination destination, Clock::time_point now);
  void poll_sends(Clock::time_point now, std::vector<HandoffEvent>& events);
  void take_notes(std::vector<HandoffEvent>& events);
  void check_receives(Clock::time_point now, std::vector<HandoffEvent>& events);
  void drop_receive(std::map<RequestId, Receive>::iterator it);
  void hold(const std::vector<int32_t>& pages);
  void release(const std::vector<int32_t>& pages);

  DisaggregationConfig config_;
  StepExecutor& executor_;
  PagePool& pool_;
  std::deque<Written> written_;
  int64_t reported_layers_;
  bool drafts_;
  std::unique_ptr<transfer::KvTransfer> agent_;
  std::unique_ptr<CacheRegions> regions_;
  KvEndpoint endpoint_;
  std::shared_ptr<Mailbox> mailbox_;

  struct Peer {
    transfer::Blob description;
    int index = -1;  // the agent's peer
    std::optional<RemoteCache> cache;
  };
  std::map<transfer::Blob, Peer> peers_;  // P: by agent address; dropped when a transfer to it fails
  std::unordered_map<std::string, Arrived> destinations_;  // P: not yet taken, by room
  std::map<RequestId, Send> sends_;
  std::unordered_map<std::string, RequestId> send_rooms_;  // of sends whose request is live
  std::map<RequestId, Receive> receives_;
  std::unordered_map<std::string, RequestId> receive_rooms_;
  std::unordered_map<uint64_t, RequestId> announced_;  // D: announce serial -> receiver
  uint64_t next_serial_ = 1;
  int64_t pushes_ = 0;
  int64_t layerwise_pushes_ = 0;
};

}  // namespace dsinfer::runtime
