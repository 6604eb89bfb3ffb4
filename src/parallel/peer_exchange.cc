#include "parallel/peer_exchange.h"

#include "core/error.h"

namespace dsinfer::parallel {
namespace {

constexpr size_t kAlign = 256;

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// The byte offsets of a window's parts, in PeerWindow's order.
struct Layout {
  size_t tokens = 0, ids = 0, weights = 0, results = 0, dispatched = 0, combined = 0, waits = 0, end = 0;
  explicit Layout(const PeerShape& s) {
    const auto rows = static_cast<size_t>(s.ranks) * static_cast<size_t>(s.capacity);
    const size_t row_bytes = aligned(rows * s.row_bytes()), routing = aligned(rows * s.top_k * 4);
    const size_t signals = aligned(static_cast<size_t>(s.ranks) * sizeof(uint64_t));
    ids = tokens + row_bytes;
    weights = ids + routing;
    results = weights + routing;
    dispatched = results + row_bytes;
    combined = dispatched + signals;
    waits = combined + signals;
    end = waits + aligned(2 * sizeof(uint64_t));
  }
};

}  // namespace

size_t PeerShape::bytes() const { return Layout(*this).end; }

PeerWindow PeerWindow::in(std::byte* memory, const PeerShape& shape) {
  const Layout at(shape);
  return {memory + at.tokens,
          reinterpret_cast<int32_t*>(memory + at.ids),
          reinterpret_cast<float*>(memory + at.weights),
          memory + at.results,
          reinterpret_cast<uint64_t*>(memory + at.dispatched),
          reinterpret_cast<uint64_t*>(memory + at.combined),
          reinterpret_cast<uint64_t*>(memory + at.waits)};
}

PeerGroup::PeerGroup(int ranks, int64_t capacity, std::shared_ptr<PeerDevice> device)
    : ranks_(ranks), capacity_(capacity), device_(std::move(device)), memories_(ranks, nullptr) {
  DSINFER_CHECK(ranks >= 1 && capacity >= 1, "peer exchange: ", ranks, " ranks of ", capacity, " tokens");
}

PeerGroup::~PeerGroup() {
  for (std::byte* memory : memories_)
    if (memory) device_->release(memory);
}

std::span<const PeerWindow> PeerGroup::windows(backend::Backend& backend, int rank, const PeerShape& shape) {
  std::unique_lock<std::mutex> lock(mutex_);
  DSINFER_CHECK(!aborted_, "peer exchange: aborted (another rank failed)");
  if (memories_[rank] == nullptr) {
    if (allocated_ == 0) shape_ = shape;
    DSINFER_CHECK(shape.ranks == shape_.ranks && shape.capacity == shape_.capacity && shape.hidden == shape_.hidden &&
                      shape.top_k == shape_.top_k && shape.dtype == shape_.dtype,
                  "peer exchange: rank ", rank, " dispatches rows of ", shape.hidden, " ", dtype_name(shape.dtype),
                  " with ", shape.top_k, " choices, the group's first rank ", shape_.hidden, " ",
                  dtype_name(shape_.dtype), " with ", shape_.top_k);
    lock.unlock();
    std::byte* memory = device_->allocate(backend, shape.bytes());
    lock.lock();
    memories_[rank] = memory;
    if (++allocated_ == ranks_) {
      for (std::byte* each : memories_) windows_.push_back(PeerWindow::in(each, shape_));
      changed_.notify_all();
    }
    changed_.wait(lock, [&] { return allocated_ == ranks_ || aborted_; });
    DSINFER_CHECK(!aborted_, "peer exchange: aborted (another rank failed)");
    lock.unlock();
    device_->connect(backend, memories_);
    lock.lock();
  }
  DSINFER_CHECK(shape.hidden == shape_.hidden && shape.top_k == shape_.top_k && shape.dtype == shape_.dtype,
                "peer exchange: rows of ", shape.hidden, " ", dtype_name(shape.dtype), " with ", shape.top_k,
                " choices, the windows were made for ", shape_.hidden, " ", dtype_name(shape_.dtype), " with ",
                shape_.top_k);
  return windows_;
}

void PeerGroup::abort() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
  }
  changed_.notify_all();
  device_->abort();
}

void PeerExchange::reserve(backend::Backend& backend, int64_t hidden, int64_t top_k, DType dtype) {
  shape_ = {group_->ranks(), capacity(), hidden, top_k, dtype};
  windows_ = group_->windows(backend, rank_, shape_);
}

void PeerExchange::send(backend::Backend& backend, const Tensor& x, const backend::Routing& routing,
                        int64_t slots_per_rank) {
  DSINFER_CHECK(phase_ == Phase::kIdle, "peer dispatch: the last exchange was not combined");
  const int64_t T = x.dim(0);
  DSINFER_CHECK(x.rank() == 2 && routing.expert_ids.rank() == 2 && routing.expert_ids.dim(0) == T &&
                    routing.weights.shape() == routing.expert_ids.shape(),
                "peer dispatch: tokens ", x.shape().to_string(), " with routing ", routing.expert_ids.shape().to_string());
  DSINFER_CHECK(T <= capacity(), "peer dispatch: ", T, " tokens, more than the windows' ", capacity(),
                " (fits_step() says when a step can use them)");
  DSINFER_CHECK(slots_per_rank >= 1, "peer dispatch: ", slots_per_rank, " experts a rank");
  const PeerShape shape{group_->ranks(), capacity(), x.dim(1), routing.expert_ids.dim(1), x.dtype()};
  windows_ = group_->windows(backend, rank_, shape);
  shape_ = shape;
  group_->device().send_tokens(backend, shape_, windows_, rank_, x, routing.expert_ids, routing.weights,
                               slots_per_rank);
  ids_ = routing.expert_ids;
  slots_per_rank_ = slots_per_rank;
  phase_ = Phase::kSent;
  ++dispatches_;
}

PeerExchange::Received PeerExchange::receive(backend::Backend& backend) {
  DSINFER_CHECK(phase_ == Phase::kSent, "peer dispatch: receive without a send");
  group_->device().wait(backend, shape_, windows_[rank_], /*dispatch=*/true);
  phase_ = Phase::kReceived;
  const PeerWindow& mine = windows_[rank_];
  const int64_t rows = shape_.ranks * shape_.capacity;
  const Device device = ids_.device();
  return {Tensor::wrap(mine.tokens, shape_.dtype, {rows, shape_.hidden}, device, nullptr),
          {Tensor::wrap(mine.ids, DType::kI32, {rows, shape_.top_k}, device, nullptr),
           Tensor::wrap(mine.weights, DType::kF32, {rows, shape_.top_k}, device, nullptr)}};
}

void PeerExchange::send_back(backend::Backend& backend, const Tensor& expert_out) {
  DSINFER_CHECK(phase_ == Phase::kReceived, "peer combine without a dispatch received");
  DSINFER_CHECK(expert_out.rank() == 2 && expert_out.dim(0) == shape_.ranks * shape_.capacity &&
                    expert_out.dim(1) == shape_.hidden && expert_out.dtype() == shape_.dtype,
                "peer combine: ", expert_out.shape().to_string(), " for ", shape_.ranks * shape_.capacity,
                " received rows of ", shape_.hidden);
  group_->device().send_results(backend, shape_, windows_, rank_, expert_out, slots_per_rank_);
  phase_ = Phase::kSentBack;
}

Tensor PeerExchange::receive_back(backend::Backend& backend) {
  DSINFER_CHECK(phase_ == Phase::kSentBack, "peer combine: receive without a send back");
  PeerDevice& device = group_->device();
  device.wait(backend, shape_, windows_[rank_], /*dispatch=*/false);
  Tensor out = device.sum_results(backend, shape_, windows_[rank_], ids_, slots_per_rank_);
  ids_ = Tensor();
  phase_ = Phase::kIdle;
  return out;
}

std::vector<std::unique_ptr<PeerExchange>> make_peer_exchanges(int ranks, int64_t capacity,
                                                               std::shared_ptr<PeerDevice> device) {
  auto group = std::make_shared<PeerGroup>(ranks, capacity, std::move(device));
  std::vector<std::unique_ptr<PeerExchange>> exchanges;
  for (int rank = 0; rank < ranks; ++rank) exchanges.push_back(std::make_unique<PeerExchange>(group, rank));
  return exchanges;
}

}  // namespace dsinfer::parallel
