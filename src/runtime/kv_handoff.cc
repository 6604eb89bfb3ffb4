#include "runtime/kv_handoff.h"

#include <algorithm>
#include <mutex>
#include <utility>

#include "core/log.h"
#include "runtime/engine.h"
#include "transfer/ucx_transfer.h"

namespace dsinfer::runtime {

// What other threads hand the engine thread: destinations (P) and the announce's answers (D). It
// outlives the driver (a late `done` finds it closed), and wakes the engine under its own lock, so
// never after close().
class KvHandoffDriver::Mailbox {
 public:
  explicit Mailbox(std::function<void()> wake) : wake_(std::move(wake)) {}

  void add(KvDestination destination) {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    mail_.destinations.push_back(std::move(destination));
    wake_();
  }
  void answer(uint64_t serial, std::string error) {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    mail_.answers.emplace_back(serial, std::move(error));
    wake_();
  }
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    wake_ = nullptr;
  }

  struct Mail {
    std::vector<KvDestination> destinations;
    std::vector<std::pair<uint64_t, std::string>> answers;
  };
  Mail take() {
    std::lock_guard lock(mutex_);
    return std::exchange(mail_, {});
  }

 private:
  std::mutex mutex_;
  bool closed_ = false;
  std::function<void()> wake_;
  Mail mail_;
};

namespace {

int64_t milliseconds(Clock::duration duration) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
}

}  // namespace

void check_kv_handoff(const RequestOptions& options, DisaggregationMode mode) {
  if (!options.kv_handoff) return;
  const KvHandoff& handoff = *options.kv_handoff;
  const bool sends = handoff.role == KvHandoff::Role::kSend;
  if (mode == DisaggregationMode::kNone)
    throw InvalidRequest("this engine does not disaggregate prefill and decode, so it takes no KV handoff (bootstrap "
                         "room): serve it as a prefill or a decode instance",
                         RequestPart::kKvHandoff);
  if (sends != (mode == DisaggregationMode::kPrefill))
    throw InvalidRequest(
        sends ? "a decode instance does not send a prompt's KV; send the request to a prefill instance"
              : "a prefill instance does not receive a prompt's KV; send the request to a decode instance",
        RequestPart::kKvHandoff);
  if (handoff.room.empty() || handoff.room.size() > kMaxRoomBytes)
    throw InvalidRequest(str_cat("a bootstrap room of 1 to ", kMaxRoomBytes, " bytes, got ", handoff.room.size()),
                         RequestPart::kKvHandoff);
  if (options.max_tokens < 1)
    throw InvalidRequest("a disaggregated request needs max_tokens of at least 1 (the prefill instance samples the "
                         "first token)",
                         RequestPart::kTokenBudget);
  if (!sends && options.prompt_logprobs >= 0)
    throw InvalidRequest("prompt_logprobs are computed where the prompt is: the decode instance receives its KV, so "
                         "ask the prefill instance's request for them",
                         RequestPart::kPromptLogprobs);
}

KvHandoffDriver::KvHandoffDriver(const DisaggregationConfig& config, StepExecutor& executor, PagePool& pool,
                                 std::function<void()> wake)
    : config_(config),
      executor_(executor),
      pool_(pool),
      reported_layers_(executor.reported_layers()),
      drafts_(executor.can_draft()) {
  DSINFER_CHECK(config_.mode != DisaggregationMode::kNone, "KV handoff: the engine does not disaggregate");
  model::LatentCache* cache = executor.kv_cache();
  DSINFER_CHECK(cache != nullptr, "prefill/decode disaggregation moves the KV cache of a model on one rank; this "
                "engine's executor has none to register (a sharded model's ranks each hold a cache of their own, "
                "which the handoff does not move yet)");
  DSINFER_CHECK(config_.bootstrap_timeout.count() > 0, "disaggregation: bootstrap_timeout must be positive, got ",
                config_.bootstrap_timeout.count(), " ms");
  DSINFER_CHECK(config_.layerwise_threshold >= 0, "disaggregation: layerwise_threshold must not be negative, got ",
                config_.layerwise_threshold);
  if (config_.mode == DisaggregationMode::kPrefill)
    DSINFER_CHECK(config_.layerwise_threshold == 0 || reported_layers_ > 0, "layer-wise KV sends (layerwise_threshold ",
                  config_.layerwise_threshold, ") post each layer once the step has written it, which this "
                  "executor does not report (a sharded model's ranks); set layerwise_threshold to 0 (whole-request "
                  "sends)");
  if (config_.mode == DisaggregationMode::kDecode)
    DSINFER_CHECK(static_cast<bool>(config_.announce), "a decode instance needs an announce callback, which hands "
                  "each request's destination to its prefill instance");
  agent_ = config_.make_transfer ? config_.make_transfer() : transfer::make_ucx_transfer();
  DSINFER_CHECK(agent_ != nullptr, "disaggregation: make_transfer gave no agent");
  regions_ = std::make_unique<CacheRegions>(*agent_, *cache);
  endpoint_ = {agent_->address(), regions_->describe()};
  mailbox_ = std::make_shared<Mailbox>(std::move(wake));
  // While the engine waits for a step's tokens, the layers the device has run go out (and the
  // transport moves); with no layer left to post the wait blocks (transfers in flight progress
  // between steps, as whole sends always have).
  if (config_.mode == DisaggregationMode::kPrefill && config_.layerwise_threshold > 0)
    executor_.set_wait_poll([this] {
      post_written_layers();
      progress_transport();
      return !written_.empty();
    });
}

KvHandoffDriver::~KvHandoffDriver() {
  executor_.set_wait_poll({});  // the engine's executor outlives its handoff
  mailbox_->close();
  regions_.reset();
  agent_.reset();
}

std::function<void(KvDestination)> KvHandoffDriver::destination_sink() const {
  return [mailbox = mailbox_](KvDestination destination) { mailbox->add(std::move(destination)); };
}

void KvHandoffDriver::hold(const std::vector<int32_t>& pages) {
  for (int32_t page : pages) pool_.retain(page);
}

void KvHandoffDriver::release(const std::vector<int32_t>& pages) {
  for (int32_t page : pages) pool_.release(page);
}

// --- Prefill side ---

KvHandoffDriver::Send KvHandoffDriver::new_send(const Sequence& sender) {
  Send send;
  send.id = sender.id;
  send.room = sender.options.kv_handoff->room;
  send.prompt_length = sender.prompt_length;
  send.pages = sender.pages;
  return send;
}

std::string KvHandoffDriver::prepare_push(Send& send, const KvDestination& destination, Clock::time_point arrived) {
  const std::string& room = send.room;
  const Clock::duration age = Clock::now() - arrived;
  if (age > config_.bootstrap_timeout)
    return str_cat("the destination of room '", room, "' arrived ", milliseconds(age),
                   " ms ago, past bootstrap_timeout (", config_.bootstrap_timeout.count(),
                   " ms): the decode instance has given up on it");
  if (destination.drafts && !drafts_)
    return str_cat("room '", room, "': the decode instance drafts with the model's MTP modules, which read the "
                   "prompt's rows of their cache layers; this prefill instance does not draft, so it has not written "
                   "them (run it with speculative decoding too)");
  const int64_t page = model::kPageSize;
  const int64_t first = destination.first_token;
  if (first < 0 || first % page != 0 || first >= send.prompt_length)
    return str_cat("the destination of room '", room, "' starts at token ", first,
                   ", not a page boundary inside the prompt of ", send.prompt_length, " tokens");
  const auto first_page = static_cast<size_t>(first / page);
  const auto end_page = static_cast<size_t>((send.prompt_length + page - 1) / page);
  if (destination.pages.size() != end_page - first_page)
    return str_cat("the destination of room '", room, "' gives ", destination.pages.size(),
                   " pages for prompt tokens [", first, ", ", send.prompt_length, "), which fill ",
                   end_page - first_page);
  DSINFER_CHECK(end_page <= send.pages.size(), "KV handoff: room '", room, "' holds ", send.pages.size(),
                " pages for a prompt of ", send.prompt_length, " tokens");
  try {
    Peer& peer = peers_[destination.agent_address];
    if (peer.index < 0) peer.index = agent_->connect(destination.agent_address);
    if (!peer.cache || peer.description != destination.cache_description) {
      peer.cache.reset();
      peer.cache.emplace(*agent_, peer.index, destination.cache_description);
      peer.description = destination.cache_description;
    }
    send.remote = *peer.cache;
  } catch (const std::exception& error) {
    peers_.erase(destination.agent_address);
    return str_cat("room '", room, "': reaching the decode instance's cache failed: ", error.what());
  }
  if (send.remote->num_layers() != regions_->num_layers() || send.remote->page_bytes() != regions_->page_bytes()) {
    const std::string error = str_cat("room '", room, "': the decode instance's cache has ", send.remote->num_layers(),
                                      " layers of ", send.remote->page_bytes(), "-byte pages, this one ",
                                      regions_->num_layers(), " of ", regions_->page_bytes(),
                                      " (serve the same model with the same KV cache dtype on both)");
    send.remote.reset();
    return error;
  }
  send.address = destination.agent_address;
  send.from.assign(send.pages.begin() + static_cast<std::ptrdiff_t>(first_page),
                   send.pages.begin() + static_cast<std::ptrdiff_t>(end_page));
  send.to = destination.pages;
  hold(send.from);
  send.held = true;
  return "";
}

// One transfer a layer, each tracked as soon as it is posted: a failure part-way leaves nothing
// untracked that may still read the pages.
void KvHandoffDriver::post_layers(Send& send, int64_t first, int64_t last, const transfer::Blob& note) {
  for (int64_t layer = first; layer < last && send.error.empty(); ++layer) {
    try {
      const std::vector<uint64_t> posted = post_pages(*agent_, *regions_, *send.remote, send.from, send.to, layer,
                                                      layer + 1, layer + 1 == last ? note : transfer::Blob());
      send.transfers.insert(send.transfers.end(), posted.begin(), posted.end());
      send.next_layer = layer + 1;
    } catch (const std::exception& error) {
      send.error = str_cat("pushing layer ", layer, " of room '", send.room, "' failed: ", error.what());
    }
  }
}

void KvHandoffDriver::finish_posting(Send& send) {
  if (send.closed || !send.error.empty()) return;
  transfer::Blob note;
  try {
    note = send.note->encode();
  } catch (const std::exception& error) {
    send.error = error.what();
    return;
  }
  const int64_t layers = regions_->num_layers();
  if (send.next_layer < layers) {
    post_layers(send, send.next_layer, layers, note);
  } else {
    try {
      send.transfers.push_back(post_note(*agent_, *regions_, *send.remote, note));
    } catch (const std::exception& error) {
      send.error = str_cat("sending the note of room '", send.room, "' failed: ", error.what());
    }
  }
  if (!send.error.empty()) return;
  send.note_posted = true;
  send.deadline = Clock::now() + config_.bootstrap_timeout;
}

bool KvHandoffDriver::arm_layerwise(const Sequence& sender) {
  if (config_.layerwise_threshold == 0 || sender.prompt_length < config_.layerwise_threshold) return false;
  const std::string& room = sender.options.kv_handoff->room;
  auto arrived = destinations_.find(room);
  if (arrived == destinations_.end() || send_rooms_.contains(room) || sends_.contains(sender.id)) return false;
  Send send = new_send(sender);
  // A destination it cannot take stays, for begin_send to meet the same error and report it.
  if (!prepare_push(send, arrived->second.destination, arrived->second.at).empty()) return false;
  destinations_.erase(arrived);
  send.layerwise = true;
  send_rooms_[room] = sender.id;
  sends_.emplace(sender.id, std::move(send));
  log_debug("KV handoff: room '", room, "' (", sender.prompt_length, " tokens) goes layer by layer");
  return true;
}

void KvHandoffDriver::layer_written(const std::vector<RequestId>& senders, int64_t layer) {
  written_.push_back({senders, layer, executor_.mark_work()});  // no mark: the layer has run (the CPU)
  post_written_layers();
}

void KvHandoffDriver::post_written_layers() {
  while (!written_.empty() && (written_.front().mark == nullptr || written_.front().mark->reached())) {
    const Written written = std::move(written_.front());
    written_.pop_front();
    post_layer(written.senders, written.layer);
  }
}

void KvHandoffDriver::post_layer(const std::vector<RequestId>& senders, int64_t layer) {
  for (RequestId id : senders) {
    auto it = sends_.find(id);
    if (it == sends_.end()) continue;
    Send& send = it->second;
    // A layer posted already went with the rest when the first token came (finish_posting).
    if (send.closed || !send.error.empty() || layer != send.next_layer || layer >= reported_layers_) continue;
    post_layers(send, layer, layer + 1, {});
  }
}

void KvHandoffDriver::begin_send(const Sequence& sender, HandoffNote note) {
  if (auto armed = sends_.find(sender.id); armed != sends_.end()) {
    armed->second.note = std::move(note);
    finish_posting(armed->second);
    return;
  }
  const std::string& room = sender.options.kv_handoff->room;
  Send send = new_send(sender);
  send.note = std::move(note);
  send.deadline = Clock::now() + config_.bootstrap_timeout;  // for its destination
  if (send_rooms_.contains(room)) {
    send.error = str_cat("room '", room, "' is taken by another request on this prefill instance");
    sends_.emplace(sender.id, std::move(send));  // reported by the next progress()
    return;
  }
  send_rooms_[room] = sender.id;
  Send& placed = sends_.emplace(sender.id, std::move(send)).first->second;
  if (auto arrived = destinations_.find(room); arrived != destinations_.end()) {
    const Arrived destination = std::move(arrived->second);
    destinations_.erase(arrived);
    placed.error = prepare_push(placed, destination.destination, destination.at);
    finish_posting(placed);
  }
}

void KvHandoffDriver::take_destination(KvDestination destination, Clock::time_point now) {
  if (auto room = send_rooms_.find(destination.room); room != send_rooms_.end()) {
    Send& send = sends_.at(room->second);
    if (send.remote) {
      log_warning("KV handoff: a second destination for room '", destination.room, "', which is being pushed: ignored");
      return;
    }
    send.error = prepare_push(send, destination, now);  // it waits for this one
    finish_posting(send);
    return;
  }
  const std::string room = destination.room;
  destinations_.insert_or_assign(room, Arrived{std::move(destination), now});
}

void KvHandoffDriver::poll_sends(Clock::time_point now, std::vector<HandoffEvent>& events) {
  for (auto it = sends_.begin(); it != sends_.end();) {
    Send& send = it->second;
    std::erase_if(send.transfers, [&](uint64_t transfer) {
      const transfer::TransferState state = agent_->poll(transfer);
      if (state == transfer::TransferState::kInFlight) return false;
      if (state == transfer::TransferState::kFailed) {
        if (send.error.empty())
          send.error = str_cat("the KV push of room '", send.room, "' failed: ", agent_->error(transfer));
        peers_.erase(send.address);  // the agent fails the peer: the next destination connects again
      }
      agent_->release(transfer);
      return true;
    });
    if (!send.closed) {
      std::optional<std::string> outcome;
      if (!send.error.empty()) {
        outcome = send.error;
      } else if (send.note_posted && send.transfers.empty()) {
        outcome = "";
        ++pushes_;
        if (send.layerwise) ++layerwise_pushes_;
      } else if (send.note && !send.remote && now > send.deadline) {
        outcome = str_cat("no destination for room '", send.room, "' came from the decode instance within ",
                          config_.bootstrap_timeout.count(), " ms");
      } else if (send.note_posted && now > send.deadline) {
        outcome = str_cat("the KV push of room '", send.room, "' did not land within ",
                          config_.bootstrap_timeout.count(), " ms");
      }
      if (outcome) {
        if (!outcome->empty()) log_warning("KV handoff: ", *outcome);
        events.push_back({send.id, std::move(*outcome), std::nullopt});
        send.closed = true;
        if (auto room = send_rooms_.find(send.room); room != send_rooms_.end() && room->second == send.id)
          send_rooms_.erase(room);
      }
    }
    if (send.closed && send.transfers.empty()) {
      if (send.held) release(send.from);
      it = sends_.erase(it);
    } else {
      ++it;
    }
  }
}

// --- Decode side ---

std::string KvHandoffDriver::begin_receive(const Sequence& receiver) {
  const std::string& room = receiver.options.kv_handoff->room;
  if (receive_rooms_.contains(room))
    return str_cat("room '", room, "' is taken by another request on this decode instance");
  const int64_t page = model::kPageSize;
  DSINFER_CHECK(receiver.num_computed % page == 0 && receiver.num_computed < receiver.prompt_length,
                "KV handoff: room '", room, "' keeps ", receiver.num_computed, " tokens of a prompt of ",
                receiver.prompt_length);
  const auto first_page = static_cast<size_t>(receiver.num_computed / page);
  const auto end_page = static_cast<size_t>((receiver.prompt_length + page - 1) / page);
  DSINFER_CHECK(end_page <= receiver.pages.size(), "KV handoff: room '", room, "' holds ", receiver.pages.size(),
                " pages for a prompt of ", receiver.prompt_length, " tokens");
  Receive receive;
  receive.id = receiver.id;
  receive.room = room;
  receive.serial = next_serial_++;
  receive.pages.assign(receiver.pages.begin() + static_cast<std::ptrdiff_t>(first_page),
                       receiver.pages.begin() + static_cast<std::ptrdiff_t>(end_page));
  receive.deadline = Clock::now() + config_.bootstrap_timeout;
  hold(receive.pages);
  KvDestination destination{room, endpoint_.agent_address, endpoint_.cache_description, receive.pages,
                            receiver.num_computed, drafts_};
  const uint64_t serial = receive.serial;
  receive_rooms_[room] = receiver.id;
  announced_[serial] = receiver.id;
  receives_.emplace(receiver.id, std::move(receive));
  try {
    config_.announce(receiver.options.kv_handoff->peer, destination, [mailbox = mailbox_, serial](std::string error) {
      mailbox->answer(serial, std::move(error));
    });
  } catch (const std::exception& error) {
    mailbox_->answer(serial, str_cat("the announce callback threw: ", error.what()));
  }
  return "";
}

void KvHandoffDriver::drop_receive(std::map<RequestId, Receive>::iterator it) {
  Receive& receive = it->second;
  release(receive.pages);
  receive_rooms_.erase(receive.room);
  announced_.erase(receive.serial);
  receives_.erase(it);
}

void KvHandoffDriver::take_notes(std::vector<HandoffEvent>& events) {
  for (transfer::Blob& blob : agent_->take_notes()) {
    HandoffNote note;
    try {
      note = HandoffNote::decode(blob);
    } catch (const std::exception& error) {
      log_warning("KV handoff: a note that does not parse (", error.what(), "): ignored");
      continue;
    }
    auto room = receive_rooms_.find(note.room);
    if (room == receive_rooms_.end()) {
      log_warning("KV handoff: a note for room '", note.room, "', which no request here waits for: ignored");
      continue;
    }
    auto it = receives_.find(room->second);
    if (!it->second.reported) {
      it->second.reported = true;
      events.push_back({it->second.id, "", std::move(note)});
    }
    drop_receive(it);  // every write has landed: the request holds its pages alone now
  }
}

void KvHandoffDriver::check_receives(Clock::time_point now, std::vector<HandoffEvent>& events) {
  const Clock::duration quarantine = 2 * config_.bootstrap_timeout;
  for (auto it = receives_.begin(); it != receives_.end();) {
    Receive& receive = it->second;
    if (!receive.reported && now > receive.deadline) {
      receive.reported = true;
      const std::string error = str_cat("no KV for room '", receive.room, "' came from the prefill instance within ",
                                        config_.bootstrap_timeout.count(), " ms");
      log_warning("KV handoff: ", error);
      events.push_back({receive.id, error, std::nullopt});
    }
    // Kept until no write can land: 2T past the later of its end and the announce's answer. An answer
    // that never comes (the server must give one) counts as given 2T after the end, so that a
    // broken control plane cannot take the pages for good.
    std::optional<Clock::time_point> settled;
    if (receive.ended)
      settled = receive.answered ? std::max(*receive.ended, *receive.answered) : *receive.ended + quarantine;
    if (settled && now > *settled + quarantine) {
      if (!receive.answered) log_warning("KV handoff: the announce of room '", receive.room, "' never answered");
      drop_receive(it++);
    } else {
      ++it;
    }
  }
}

void KvHandoffDriver::request_ended(RequestId id) {
  if (auto it = sends_.find(id); it != sends_.end()) {
    Send& send = it->second;
    send.closed = true;
    if (auto room = send_rooms_.find(send.room); room != send_rooms_.end() && room->second == id)
      send_rooms_.erase(room);
    if (send.transfers.empty()) {
      if (send.held) release(send.from);
      sends_.erase(it);
    }
  }
  if (auto it = receives_.find(id); it != receives_.end()) {
    it->second.reported = true;
    if (!it->second.ended) it->second.ended = Clock::now();
  }
}

void KvHandoffDriver::progress_transport() {
  if (busy()) agent_->progress();
}

std::vector<HandoffEvent> KvHandoffDriver::progress() {
  post_written_layers();
  std::vector<HandoffEvent> events;
  const Clock::time_point now = Clock::now();
  std::erase_if(destinations_, [&](const auto& entry) { return now - entry.second.at > config_.bootstrap_timeout; });
  Mailbox::Mail mail = mailbox_->take();
  for (KvDestination& destination : mail.destinations) take_destination(std::move(destination), now);
  for (auto& [serial, error] : mail.answers) {
    auto found = announced_.find(serial);
    if (found == announced_.end()) continue;  // its note came first
    Receive& receive = receives_.at(found->second);
    receive.answered = now;
    if (error.empty() || receive.reported) continue;
    receive.reported = true;
    events.push_back(
        {receive.id, str_cat("announcing room '", receive.room, "' to the prefill instance failed: ", error), {}});
  }
  poll_sends(now, events);
  take_notes(events);
  check_receives(now, events);
  return events;
}

}  // namespace dsinfer::runtime
