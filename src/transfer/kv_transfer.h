// Moving KV pages between serving instances (prefill/decode disaggregation): the semantics NIXL
// gives, over an existing transport library (ucx_transfer.h), never a protocol of ours.
//
// An agent registers its page memory once and hands out an opaque descriptor of it through the
// control plane; a peer connects to the agent's address, imports the descriptor, and posts batched
// writes into that memory followed by a note, which the target receives once every byte of the
// batch has landed. Disaggregation pushes: the decode instance allocates the pages and describes
// them, the prefill instance writes them and names the request in the note.
//
// An agent is driven by one thread: it makes progress inside poll(), take_notes() and progress(). A
// transfer reports kDone or kFailed only when nothing of it is still reading the source memory, so
// the caller may free its pages then, exactly once, whichever way it ended.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dsinfer::transfer {

using Blob = std::string;  // opaque bytes for the control plane (addresses, descriptors, notes)

// One contiguous copy of `bytes` from local_offset of a local region to remote_offset of a remote one.
struct Write {
  uint64_t local_offset = 0;
  uint64_t remote_offset = 0;
  uint64_t bytes = 0;
  bool operator==(const Write&) const = default;
};

// The writes in their order, each merged into the one before when it continues it, or precedes it,
// in both memories: a run of consecutive pages, listed upwards or downwards, becomes one large
// transfer. Empty writes are dropped.
std::vector<Write> merge_contiguous(std::span<const Write> writes);

// A blob in lowercase hex, for control planes that carry text (JSON); blob_from_hex reads either
// case and throws dsinfer::Error naming `what` for anything else.
std::string blob_to_hex(const Blob& blob);
Blob blob_from_hex(std::string_view text, std::string_view what);

enum class TransferState : uint8_t { kInFlight, kDone, kFailed };

enum class MemoryKind : uint8_t { kHost, kDevice };

class KvTransfer {
 public:
  virtual ~KvTransfer() = default;

  // Where peers connect to this agent.
  virtual Blob address() const = 0;
  // Registers [base, base + bytes) for transfers in and out; returns a local region. GPU memory
  // (cudaMalloc) is registered as kDevice: between GPUs of one host the transport copies it with
  // CUDA IPC, never through host memory.
  virtual int register_memory(void* base, uint64_t bytes, MemoryKind kind = MemoryKind::kHost) = 0;
  // What a peer needs to write into a local region.
  virtual Blob describe(int region) const = 0;

  // Connects to the agent at `address`; returns a peer.
  virtual int connect(const Blob& address) = 0;
  // A region of `peer` from its descriptor; returns a remote region.
  virtual int import(int peer, const Blob& descriptor) = 0;

  // Posts `writes` from local region `local` into remote region `remote` (merged where contiguous),
  // then `note` for the remote agent, unless it is empty. A note also tells that every transfer
  // posted to the same peer before it has landed (a layer-wise send notes only its last layer). Every range is checked first: a write outside either region,
  // an unknown region or a note over kMaxNoteBytes throws dsinfer::Error with nothing posted.
  // Returns the transfer.
  virtual uint64_t post(int local, int remote, std::span<const Write> writes, const Blob& note) = 0;
  // Progresses the agent; the transfer's state. A failed one stays failed (its peer is unreachable).
  virtual TransferState poll(uint64_t transfer) = 0;
  // Why a failed transfer failed ("" otherwise).
  virtual std::string error(uint64_t transfer) const = 0;
  // Forgets a transfer that is no longer in flight.
  virtual void release(uint64_t transfer) = 0;

  // Progresses the agent; the notes of the transfers into its memory that have landed since the last
  // call, in the order they landed.
  virtual std::vector<Blob> take_notes() = 0;
  // Progresses the agent and reports nothing (poll and take_notes report what it moved): for the
  // driving thread between its polls when it is busy for long, since some transports (TCP) move
  // data, in either direction, only while the agents progress.
  virtual void progress() = 0;

  static constexpr size_t kMaxNoteBytes = 4096;
};

}  // namespace dsinfer::transfer
