#include "transfer/ucx_transfer.h"

#include <ucp/api/ucp.h>
#include <ucs/config/global_opts.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/strings.h"

namespace dsinfer::transfer {
namespace {

constexpr unsigned kNoteMessage = 1;  // the active-message id of notes

void check_status(ucs_status_t status, const char* what) {
  DSINFER_CHECK(status == UCS_OK, "UCX: ", what, ": ", ucs_status_string(status));
}

// A region's descriptor: its base address and length, then its packed remote key.
Blob encode_descriptor(uint64_t base, uint64_t bytes, const void* rkey, size_t rkey_bytes) {
  Blob blob(16 + rkey_bytes, '\0');
  std::memcpy(blob.data(), &base, 8);
  std::memcpy(blob.data() + 8, &bytes, 8);
  std::memcpy(blob.data() + 16, rkey, rkey_bytes);
  return blob;
}

class UcxTransfer final : public KvTransfer {
 public:
  explicit UcxTransfer(const UcxOptions& options) : timeout_(options.transfer_timeout) {
    // UCX's cache of memory types learns of GPU allocations by hooking cudaMalloc, which it cannot
    // do in binaries with the static CUDA runtime (ours): it would take a GPU cache for host memory
    // and its registration fails. Without it UCX asks the driver for each buffer. An operator's
    // UCX_MEMTYPE_CACHE still wins.
    if (std::getenv("UCX_MEMTYPE_CACHE") == nullptr) ucs_global_opts_set_value("MEMTYPE_CACHE", "n");
    ucp_config_t* config = nullptr;
    check_status(ucp_config_read(nullptr, nullptr, &config), "reading the configuration");
    if (!options.transports.empty()) {
      const ucs_status_t status = ucp_config_modify(config, "TLS", options.transports.c_str());
      if (status != UCS_OK) ucp_config_release(config);
      check_status(status, str_cat("transports '", options.transports, "'").c_str());
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM;
    const ucs_status_t init = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    check_status(init, "ucp_init");
    ucp_worker_params_t worker_params{};
    worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;  // one thread drives an agent
    if (const ucs_status_t status = ucp_worker_create(context_, &worker_params, &worker_); status != UCS_OK) {
      ucp_cleanup(context_);
      check_status(status, "ucp_worker_create");
    }
    ucp_address_t* address = nullptr;
    size_t address_bytes = 0;
    check_status(ucp_worker_get_address(worker_, &address, &address_bytes), "ucp_worker_get_address");
    address_.assign(reinterpret_cast<const char*>(address), address_bytes);
    ucp_worker_release_address(worker_, address);
    ucp_am_handler_param_t handler{};
    handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    handler.id = kNoteMessage;
    handler.cb = &UcxTransfer::on_note;
    handler.arg = this;
    check_status(ucp_worker_set_am_recv_handler(worker_, &handler), "registering the note handler");
  }

  ~UcxTransfer() override {
    // Nothing may still read or write registered memory: closing the endpoints at once ends what is
    // in flight (a stalled peer included), and those requests are then freed.
    for (Peer& peer : peers_) close(peer);
    for (auto& [id, transfer] : transfers_) drain(transfer);
    for (Remote& remote : remotes_)
      if (remote.rkey != nullptr) ucp_rkey_destroy(remote.rkey);
    for (Region& region : regions_) ucp_mem_unmap(context_, region.memory);
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
  }

  Blob address() const override { return address_; }

  int register_memory(void* base, uint64_t bytes, MemoryKind kind) override {
    DSINFER_CHECK(base != nullptr && bytes > 0, "KV transfer: registering ", bytes, " bytes at ", base);
    ucp_mem_map_params_t params{};
    params.field_mask =
        UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    params.address = base;
    params.length = bytes;
    // Said, not detected: UCX's detection needs its CUDA module loaded and hooks on cudaMalloc.
    params.memory_type = kind == MemoryKind::kDevice ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
    ucp_mem_h memory = nullptr;
    check_status(ucp_mem_map(context_, &params, &memory), "ucp_mem_map");
    void* rkey = nullptr;
    size_t rkey_bytes = 0;
    if (const ucs_status_t status = ucp_rkey_pack(context_, memory, &rkey, &rkey_bytes); status != UCS_OK) {
      ucp_mem_unmap(context_, memory);
      check_status(status, "ucp_rkey_pack");
    }
    Region region{base, bytes, memory, params.memory_type,
                  encode_descriptor(reinterpret_cast<uint64_t>(base), bytes, rkey, rkey_bytes)};
    ucp_rkey_buffer_release(rkey);
    regions_.push_back(std::move(region));
    return static_cast<int>(regions_.size()) - 1;
  }

  Blob describe(int region) const override { return local(region).descriptor; }

  int connect(const Blob& address) override {
    DSINFER_CHECK(!address.empty(), "KV transfer: connecting to an empty address");
    ucp_ep_params_t params{};
    params.field_mask =
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(address.data());
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;  // a peer's death fails its transfers, not the process
    auto peer = std::make_unique<PeerState>();
    params.err_handler.cb = &UcxTransfer::on_peer_error;
    params.err_handler.arg = peer.get();
    ucp_ep_h endpoint = nullptr;
    check_status(ucp_ep_create(worker_, &params, &endpoint), "ucp_ep_create");
    peers_.push_back(Peer{endpoint, std::move(peer)});
    return static_cast<int>(peers_.size()) - 1;
  }

  int import(int peer, const Blob& descriptor) override {
    const Peer& p = peer_at(peer);
    DSINFER_CHECK(p.endpoint != nullptr, "KV transfer: peer ", peer, " has failed (", p.state->error,
                  "): connect again");
    DSINFER_CHECK(descriptor.size() > 16, "KV transfer: a region descriptor of ", descriptor.size(), " bytes");
    Remote remote{peer, 0, 0, nullptr};
    std::memcpy(&remote.base, descriptor.data(), 8);
    std::memcpy(&remote.bytes, descriptor.data() + 8, 8);
    check_status(ucp_ep_rkey_unpack(p.endpoint, descriptor.data() + 16, &remote.rkey), "ucp_ep_rkey_unpack");
    remotes_.push_back(remote);
    return static_cast<int>(remotes_.size()) - 1;
  }

  uint64_t post(int local_region, int remote_region, std::span<const Write> writes, const Blob& note) override {
    const Region& source = local(local_region);
    DSINFER_CHECK(remote_region >= 0 && remote_region < static_cast<int>(remotes_.size()),
                  "KV transfer: no remote region ", remote_region);
    const Remote& target = remotes_[remote_region];
    DSINFER_CHECK(note.size() <= kMaxNoteBytes, "KV transfer: a note of ", note.size(), " bytes (at most ",
                  kMaxNoteBytes, ")");
    const std::vector<Write> merged = merge_contiguous(writes);
    for (const Write& w : merged) {
      DSINFER_CHECK(w.local_offset <= source.bytes && w.bytes <= source.bytes - w.local_offset,
                    "KV transfer: a write of ", w.bytes, " bytes from offset ", w.local_offset,
                    " runs past the local region of ", source.bytes, " bytes");
      DSINFER_CHECK(w.remote_offset <= target.bytes && w.bytes <= target.bytes - w.remote_offset,
                    "KV transfer: a write of ", w.bytes, " bytes to offset ", w.remote_offset,
                    " runs past the remote region of ", target.bytes, " bytes");
    }
    const uint64_t id = next_transfer_++;
    Transfer& transfer = transfers_[id];
    transfer.peer = target.peer;
    transfer.note = note;
    transfer.deadline = std::chrono::steady_clock::now() + timeout_;
    const Peer& peer = peers_[target.peer];
    if (!peer.state->error.empty()) {  // settles as failed at the next poll
      fail(transfer, peer.state->error);
      return id;
    }
    // The source's registration and kind, given: otherwise UCX finds both again for every put (tens of
    // microseconds a put for device memory), which bounded a page-by-page push at ~1.5 GB/s.
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.memh = source.memory;
    param.memory_type = source.memory_type;
    for (const Write& w : merged) {
      void* from = static_cast<char*>(source.base) + w.local_offset;
      if (!track(transfer, ucp_put_nbx(peer.endpoint, from, w.bytes, target.base + w.remote_offset, target.rkey, &param)))
        return id;
    }
    const ucp_request_param_t flush{};
    track(transfer, ucp_ep_flush_nbx(peer.endpoint, &flush));  // every put has landed when it completes
    return id;
  }

  TransferState poll(uint64_t id) override {
    Transfer& transfer = transfer_at(id);
    progress();
    advance(transfer);
    return transfer.state;
  }

  std::string error(uint64_t id) const override {
    const auto it = transfers_.find(id);
    DSINFER_CHECK(it != transfers_.end(), "KV transfer: no transfer ", id);
    return it->second.error;
  }

  void release(uint64_t id) override {
    Transfer& transfer = transfer_at(id);
    DSINFER_CHECK(transfer.state != TransferState::kInFlight, "KV transfer: transfer ", id,
                  " is in flight and cannot be released");
    transfers_.erase(id);
  }

  void progress() override {
    while (ucp_worker_progress(worker_) != 0) {
    }
  }

  std::vector<Blob> take_notes() override {
    progress();
    std::vector<Blob> notes(std::make_move_iterator(notes_.begin()), std::make_move_iterator(notes_.end()));
    notes_.clear();
    return notes;
  }

 private:
  struct Region {
    void* base;
    uint64_t bytes;
    ucp_mem_h memory;
    ucs_memory_type_t memory_type;
    Blob descriptor;
  };
  struct PeerState {
    std::string error;  // set by UCX's error callback when the peer is unreachable
  };
  struct Peer {
    ucp_ep_h endpoint;  // null once closed
    std::unique_ptr<PeerState> state;
  };
  struct Remote {
    int peer;
    uint64_t base;
    uint64_t bytes;
    ucp_rkey_h rkey;
  };
  struct Transfer {
    int peer = -1;
    Blob note;
    std::vector<void*> requests;  // puts and the flush, then the note, not yet complete
    bool note_sent = false;
    std::chrono::steady_clock::time_point deadline;
    TransferState state = TransferState::kInFlight;
    std::string error;
  };

  static ucs_status_t on_note(void* arg, const void*, size_t, void* data, size_t length,
                              const ucp_am_recv_param_t* param) {
    auto* self = static_cast<UcxTransfer*>(arg);
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0)  // eager, as every note is sent
      self->notes_.emplace_back(static_cast<const char*>(data), length);
    return UCS_OK;
  }

  static void on_peer_error(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* state = static_cast<PeerState*>(arg);
    if (state->error.empty()) state->error = str_cat("the peer is unreachable: ", ucs_status_string(status));
  }

  const Region& local(int region) const {
    DSINFER_CHECK(region >= 0 && region < static_cast<int>(regions_.size()), "KV transfer: no local region ", region);
    return regions_[region];
  }
  const Peer& peer_at(int peer) const {
    DSINFER_CHECK(peer >= 0 && peer < static_cast<int>(peers_.size()), "KV transfer: no peer ", peer);
    return peers_[peer];
  }
  Transfer& transfer_at(uint64_t id) {
    const auto it = transfers_.find(id);
    DSINFER_CHECK(it != transfers_.end(), "KV transfer: no transfer ", id);
    return it->second;
  }

  static void fail(Transfer& transfer, const std::string& why) {
    if (transfer.error.empty()) transfer.error = why;
  }

  // Keeps a request of the transfer; false (and the transfer failing) when it could not be posted.
  bool track(Transfer& transfer, ucs_status_ptr_t request) {
    if (request == nullptr) return true;  // done at once
    if (UCS_PTR_IS_ERR(request)) {
      fail(transfer, str_cat("posting: ", ucs_status_string(UCS_PTR_STATUS(request))));
      return false;
    }
    transfer.requests.push_back(request);
    return true;
  }

  // Frees the transfer's completed requests; when none is left, sends its note or settles its state.
  void advance(Transfer& transfer) {
    if (transfer.state != TransferState::kInFlight) return;
    if (timeout_.count() > 0 && !transfer.requests.empty() && std::chrono::steady_clock::now() > transfer.deadline) {
      const std::string why = str_cat("a transfer took longer than ", timeout_.count(), " ms");
      fail(transfer, why);  // before its requests end as cancelled
      fail_peer(transfer.peer, why);
    }
    std::erase_if(transfer.requests, [&](void* request) {
      const ucs_status_t status = ucp_request_check_status(request);
      if (status == UCS_INPROGRESS) return false;
      if (status != UCS_OK) fail(transfer, str_cat("a write failed: ", ucs_status_string(status)));
      ucp_request_free(request);
      return true;
    });
    if (!transfer.requests.empty()) return;
    const std::string& peer_error = peers_[transfer.peer].state->error;
    if (!peer_error.empty()) fail(transfer, peer_error);
    if (!transfer.error.empty()) {
      transfer.state = TransferState::kFailed;
    } else if (!transfer.note_sent && !transfer.note.empty()) {
      transfer.note_sent = true;
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_AM_SEND_FLAG_EAGER;  // the receiver takes the note in its callback
      if (track(transfer, ucp_am_send_nbx(peers_[transfer.peer].endpoint, kNoteMessage, nullptr, 0,
                                          transfer.note.data(), transfer.note.size(), &param)))
        advance(transfer);
      else
        transfer.state = TransferState::kFailed;
    } else {
      transfer.state = TransferState::kDone;
    }
  }

  // Closes the peer's endpoint at once, which ends what it has in flight (those requests complete
  // with an error), and forgets its remote keys: every transfer to it fails, now and later.
  void fail_peer(int index, const std::string& why) {
    Peer& peer = peers_[index];
    if (peer.state->error.empty()) peer.state->error = why;
    close(peer);
    for (Remote& remote : remotes_)
      if (remote.peer == index && remote.rkey != nullptr) {
        ucp_rkey_destroy(remote.rkey);
        remote.rkey = nullptr;
      }
  }

  void close(Peer& peer) {
    if (peer.endpoint == nullptr) return;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;  // a dead or stalled peer must not hold the close
    wait(ucp_ep_close_nbx(peer.endpoint, &param));
    peer.endpoint = nullptr;
  }

  // Progresses until the transfer's requests have all completed (cancelled ones included).
  void drain(Transfer& transfer) {
    for (void* request : transfer.requests) wait(request);
    transfer.requests.clear();
  }

  void wait(ucs_status_ptr_t request) {
    if (request == nullptr || UCS_PTR_IS_ERR(request)) return;
    while (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_worker_progress(worker_);
    ucp_request_free(request);
  }

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  Blob address_;
  std::vector<Region> regions_;
  std::vector<Peer> peers_;
  std::vector<Remote> remotes_;
  std::unordered_map<uint64_t, Transfer> transfers_;
  uint64_t next_transfer_ = 1;
  std::chrono::milliseconds timeout_;
  std::deque<Blob> notes_;
};

}  // namespace

std::unique_ptr<KvTransfer> make_ucx_transfer(const UcxOptions& options) {
  return std::make_unique<UcxTransfer>(options);
}

}  // namespace dsinfer::transfer
