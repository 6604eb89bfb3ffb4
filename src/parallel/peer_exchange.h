// Expert dispatch and combine through peer buffers: DeepEP's low-latency mode, for ranks that share
// one process (one host's GPUs, each reaching the others' memory over NVLink; or CPU threads).
//
// Every rank owns a window that the other ranks write into directly, sized once for `capacity`
// tokens a rank:
//
//   tokens  [ranks, capacity, hidden]  the rows each sender sent here, at their token's index
//   ids     [ranks, capacity, top_k]   each sender's whole routing, every row (kNoExpert past its tokens)
//   weights [ranks, capacity, top_k]
//   results [ranks, capacity, hidden]  this rank's token rows back from each expert rank
//
//   dispatch: rank i writes every token's routing into every rank's ids[i] and weights[i], and the
//             token's row into tokens[i] of each rank that holds one of its choices; then it signals
//             every rank. A rank waits for every sender's signal and runs its experts on all
//             ranks x capacity rows: moe_experts skips the ids it does not hold, so a row no choice
//             of which is here costs nothing and is never read.
//   combine:  the expert rank writes each row it computed back into results[its rank] of the
//             token's rank, and signals; the token's rank waits and sums its rows in rank order, in
//             f32, over the ranks that hold one of its choices.
//
// No counts come to the host and every shape is fixed, so a step of at most `capacity` tokens a
// rank waits for no host round trip, and CUDA graphs hold it. Larger steps (prefill) go through a
// second exchange in rounds of its capacity (Moe::in_chunks), or ExpertDispatch's all-to-all: Moe
// asks fits_step(), and the executor sets the step's largest rank before each step so that every
// rank takes the same path.
//
// Why one window is enough: a rank writes into another's tokens for layer L + 1 only after that
// rank's combine for layer L reached it, which comes after its experts read layer L's rows; a rank
// writes results for layer L + 1 only after every token rank's dispatch for L + 1, which comes after
// that rank summed layer L's results (the same holds between the rounds of a chunked layer). Signals
// are counters that only grow (each sender's blocks add one each call), so they are never reset.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "backend/backend.h"

namespace dsinfer::parallel {

// The choices of a row past a sender's tokens: an id no rank holds (moe_experts skips ids outside its
// stack, and takes no negative one).
inline constexpr int32_t kNoExpert = INT32_MAX;

// The shape of every rank's window: fixed by reserve() or the first dispatch, the same for every layer.
struct PeerShape {
  int ranks = 0;
  int64_t capacity = 0;  // tokens a rank sends in one dispatch, at most
  int64_t hidden = 0, top_k = 0;
  DType dtype = DType::kBF16;
  size_t row_bytes() const { return static_cast<size_t>(hidden) * dtype_size(dtype); }
  size_t bytes() const;  // one window, with its signal counters
};

// One rank's window, as every rank addresses it.
struct PeerWindow {
  std::byte* tokens = nullptr;
  int32_t* ids = nullptr;
  float* weights = nullptr;
  std::byte* results = nullptr;
  uint64_t* dispatched = nullptr;  // [ranks]: blocks of each sender's dispatches finished here, ever
  uint64_t* combined = nullptr;    // [ranks]: the same for combines
  uint64_t* waits = nullptr;       // [2]: the dispatches and combines this rank has waited for
  static PeerWindow in(std::byte* memory, const PeerShape& shape);
};

// Where the windows live and the four steps that move rows between them: host memory and loops on
// the CPU (peer_device_cpu.cc), device memory and kernels on GPUs (peer_device_cuda.cu). Each step is
// queued where the rank's backend queues its work; the CPU runs it at once.
class PeerDevice {
 public:
  virtual ~PeerDevice() = default;
  // Zeroed memory for one window, on `backend`'s device.
  virtual std::byte* allocate(backend::Backend& backend, size_t bytes) = 0;
  virtual void release(std::byte* memory) = 0;
  // Once every window exists: lets this rank's device write into the others'.
  virtual void connect(backend::Backend& backend, std::span<std::byte* const> memories) = 0;

  // dispatch, on the token rank: x [T, hidden], ids / weights [T, top_k], T <= capacity.
  virtual void send_tokens(backend::Backend& backend, const PeerShape& shape, std::span<const PeerWindow> windows,
                           int rank, const Tensor& x, const Tensor& ids, const Tensor& weights,
                           int64_t slots_per_rank) = 0;
  // Waits until every rank's sends of this rank's next dispatch (combine: false) have landed.
  virtual void wait(backend::Backend& backend, const PeerShape& shape, const PeerWindow& mine, bool dispatch) = 0;
  // combine, on the expert rank: expert_out [ranks x capacity, hidden], its rows of the received tokens.
  virtual void send_results(backend::Backend& backend, const PeerShape& shape, std::span<const PeerWindow> windows,
                            int rank, const Tensor& expert_out, int64_t slots_per_rank) = 0;
  // combine, on the token rank, after wait: [T, hidden], each token's rows summed in rank order.
  virtual Tensor sum_results(backend::Backend& backend, const PeerShape& shape, const PeerWindow& mine,
                             const Tensor& ids, int64_t slots_per_rank) = 0;
  // Makes every wait in progress or to come fail instead of waiting for a rank that will not send.
  virtual void abort() = 0;
};

std::shared_ptr<PeerDevice> make_cpu_peer_device();

// The windows of one group of ranks, shared by the ranks' PeerExchanges.
class PeerGroup {
 public:
  PeerGroup(int ranks, int64_t capacity, std::shared_ptr<PeerDevice> device);
  ~PeerGroup();
  PeerGroup(const PeerGroup&) = delete;
  PeerGroup& operator=(const PeerGroup&) = delete;

  int ranks() const { return ranks_; }
  int64_t capacity() const { return capacity_; }
  PeerDevice& device() { return *device_; }
  // Every rank's window, once every rank asked for its own: the first call of each rank allocates
  // its window for `shape` (the same on every rank) and waits for the others'.
  std::span<const PeerWindow> windows(backend::Backend& backend, int rank, const PeerShape& shape);
  void abort();

 private:
  const int ranks_;
  const int64_t capacity_;
  std::shared_ptr<PeerDevice> device_;
  std::mutex mutex_;
  std::condition_variable changed_;
  PeerShape shape_;
  std::vector<std::byte*> memories_;  // [ranks]
  std::vector<PeerWindow> windows_;   // [ranks], once all exist
  int allocated_ = 0;
  bool aborted_ = false;
};

// One rank's side.
class PeerExchange {
 public:
  PeerExchange(std::shared_ptr<PeerGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int64_t capacity() const { return group_->capacity(); }

  // Allocates this rank's window for rows of `hidden` values of `dtype` with `top_k` choices (and
  // waits for every rank's), so that a memory plan made after it counts the windows. The first
  // dispatch does it otherwise.
  void reserve(backend::Backend& backend, int64_t hidden, int64_t top_k, DType dtype);

  // The most tokens any rank of the group runs in the coming step (the executor knows every
  // rank's batch); a negative count: unknown. The same on every rank.
  void set_step_tokens(int64_t tokens) { step_tokens_ = tokens; }
  // Whether this step's dispatches go through the windows.
  bool fits_step() const { return step_tokens_ >= 0 && step_tokens_ <= capacity(); }
  int64_t step_tokens() const { return step_tokens_; }

  struct Received {
    Tensor tokens;             // [ranks x capacity, hidden]: this rank's window
    backend::Routing routing;  // [ranks x capacity, top_k]: every sent row's routing (kNoExpert: none)
  };
  // This rank's tokens x [T, hidden] (T <= capacity) to the ranks of their experts; slot s is held
  // by rank s / slots_per_rank. The received rows are valid until the next dispatch.
  Received dispatch(backend::Backend& backend, const Tensor& x, const backend::Routing& routing,
                    int64_t slots_per_rank) {
    send(backend, x, routing, slots_per_rank);
    return receive(backend);
  }
  // expert_out [ranks x capacity, hidden] (this rank's experts on the received rows) -> [T, hidden]
  // for this rank's tokens of the last dispatch.
  Tensor combine(backend::Backend& backend, const Tensor& expert_out) {
    send_back(backend, expert_out);
    return receive_back(backend);
  }

  // Each of the two in halves: the sends are queued, and the receive (the wait for every other
  // rank) comes later in the stream, so that work queued between the two (the shared expert) runs
  // while the other ranks catch up instead of a wait kernel spinning.
  void send(backend::Backend& backend, const Tensor& x, const backend::Routing& routing, int64_t slots_per_rank);
  Received receive(backend::Backend& backend);
  void send_back(backend::Backend& backend, const Tensor& expert_out);
  Tensor receive_back(backend::Backend& backend);

  void abort() { group_->abort(); }
  int64_t dispatches() const { return dispatches_; }  // through the windows, so far

 private:
  std::shared_ptr<PeerGroup> group_;
  const int rank_;
  int64_t step_tokens_ = -1;
  PeerShape shape_;
  std::span<const PeerWindow> windows_;
  Tensor ids_;  // the last dispatch's routing ids [T, top_k], for its combine
  int64_t slots_per_rank_ = 0;
  enum class Phase { kIdle, kSent, kReceived, kSentBack } phase_ = Phase::kIdle;  // the halves' order
  int64_t dispatches_ = 0;
};

// Every rank's exchange over one group of `ranks` ranks.
std::vector<std::unique_ptr<PeerExchange>> make_peer_exchanges(int ranks, int64_t capacity,
                                                               std::shared_ptr<PeerDevice> device);

}  // namespace dsinfer::parallel
