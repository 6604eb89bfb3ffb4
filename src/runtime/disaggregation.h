// Prefill/decode disaggregation (SGLang's PD flow, push): what the engines of a prefill instance
// (P) and a decode instance (D) tell each other, and how an engine is configured for its side.
//
// The router sends one request to P and the same one to D, both tagged with a room (RequestOptions::
// kv_handoff). D reserves KV pages for the prompt (keeping its own prefix-cache hits) and announces
// a KvDestination, which the server layer carries to P's Engine::add_kv_destination over HTTP. P
// computes the prompt, samples the first token, writes the prompt's pages into D's through the
// transfer agent and ends the last write with a note naming the room and carrying the token; D
// then decodes the rest. How the engines drive it: kv_handoff.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/request.h"
#include "transfer/kv_transfer.h"

namespace dsinfer::runtime {

enum class DisaggregationMode : uint8_t { kNone, kPrefill, kDecode };

// Where a P engine writes a room's prompt: D's agent, D's cache, and the pages D reserved. The pages
// hold prompt tokens [first_token, prompt length), page i tokens [first_token + 64 i, ...);
// first_token is a multiple of the page size (D keeps its prefix-cache hits below it).
struct KvDestination {
  std::string room;
  transfer::Blob agent_address;      // D's KvTransfer::address()
  transfer::Blob cache_description;  // D's CacheRegions::describe()
  std::vector<int32_t> pages;
  int64_t first_token = 0;
  // D drafts with the model's MTP modules: it reads the prompt's rows of their cache layers, which
  // only a P engine that drafts too has written.
  bool drafts = false;

  // A compact JSON object for the control plane (blobs in hex); from_string throws dsinfer::Error
  // naming what is malformed.
  std::string to_string() const;
  static KvDestination from_string(std::string_view text);
  bool operator==(const KvDestination&) const = default;
};

// Where peers write into an engine's cache: its agent's address and its cache's description.
struct KvEndpoint {
  transfer::Blob agent_address;
  transfer::Blob cache_description;
};

// What P's last write tells D: the room, the first output token and, when the request asked for
// logprobs, that token's entry. At most KvTransfer::kMaxNoteBytes once encoded.
struct HandoffNote {
  std::string room;
  int32_t token = 0;
  std::optional<TokenLogprob> logprob;

  transfer::Blob encode() const;
  static HandoffNote decode(const transfer::Blob& note);  // throws dsinfer::Error
};

// Rooms name one request pair; longer ones are refused (the note must stay small).
inline constexpr size_t kMaxRoomBytes = 256;

struct DisaggregationConfig {
  DisaggregationMode mode = DisaggregationMode::kNone;
  // Makes the engine's transfer agent. The engine owns it, since it registers the engine's cache
  // memory and must be gone before that memory is (peers may still hold its keys); it is driven by
  // the engine thread alone. Empty: UCX with its defaults (transfer::make_ucx_transfer()). Set the
  // agent's own transfer timeout below bootstrap_timeout, so that a stalled peer fails a push.
  std::function<std::unique_ptr<transfer::KvTransfer>()> make_transfer;
  // P: how long a sampled request waits for its destination, how long a push may take, and how
  // long a destination stays usable after it arrived. D: how long a request waits for its note
  // after announcing.
  std::chrono::milliseconds bootstrap_timeout{30000};
  // P: prompts of at least this many tokens are sent layer by layer while the last chunk computes;
  // shorter ones in one go after it. 0: never layer by layer. Only where the executor reports each
  // layer once its cache rows are written (the CPU); elsewhere a non-zero value is refused.
  int64_t layerwise_threshold = 8192;
  // D: hands a destination to the request's P at `peer` (KvHandoff::peer; the server's bootstrap
  // call). Called on the engine thread, so it must not block; `done` is to be called exactly once,
  // from any thread, with "" or an error.
  std::function<void(const std::string& peer, const KvDestination& destination,
                     std::function<void(std::string error)> done)>
      announce;
};

}  // namespace dsinfer::runtime
