// PeerDevice on the CPU: windows in host memory, every step a loop on the calling rank's thread.
// The same steps as the CUDA kernels (peer_device_cuda.cu), one "block" a send.
#include <atomic>
#include <cstring>
#include <new>
#include <thread>

#include "core/error.h"
#include "parallel/peer_exchange.h"

namespace dsinfer::parallel {
namespace {

constexpr std::align_val_t kWindowAlign{256};

// Whether one of a token's choices is held by `rank` (slot s on rank s / slots_per_rank).
bool chooses(const int32_t* ids, int64_t top_k, int rank, int64_t slots_per_rank) {
  for (int64_t j = 0; j < top_k; ++j)
    if (ids[j] != kNoExpert && ids[j] / slots_per_rank == rank) return true;
  return false;
}

void signal(uint64_t& counter) { std::atomic_ref<uint64_t>(counter).fetch_add(1, std::memory_order_release); }

class CpuPeerDevice final : public PeerDevice {
 public:
  std::byte* allocate(backend::Backend&, size_t bytes) override {
    auto* memory = static_cast<std::byte*>(::operator new(bytes, kWindowAlign));
    std::memset(memory, 0, bytes);
    return memory;
  }
  void release(std::byte* memory) override { ::operator delete(memory, kWindowAlign); }
  void connect(backend::Backend&, std::span<std::byte* const>) override {}  // one address space

  void send_tokens(backend::Backend&, const PeerShape& s, std::span<const PeerWindow> windows, int rank,
                   const Tensor& x, const Tensor& ids, const Tensor& weights, int64_t slots_per_rank) override {
    const int64_t T = x.dim(0), k = s.top_k;
    const size_t row = s.row_bytes();
    for (int64_t t = 0; t < s.capacity; ++t) {
      const int32_t* token_ids = t < T ? ids.data<int32_t>() + t * k : nullptr;
      for (int j = 0; j < s.ranks; ++j) {
        const int64_t slot = int64_t{rank} * s.capacity + t;  // its row in rank j's window
        for (int64_t c = 0; c < k; ++c) {
          windows[j].ids[slot * k + c] = token_ids ? token_ids[c] : kNoExpert;
          windows[j].weights[slot * k + c] = token_ids ? weights.data<float>()[t * k + c] : 0.0f;
        }
        if (token_ids && chooses(token_ids, k, j, slots_per_rank))
          std::memcpy(windows[j].tokens + slot * row, static_cast<const std::byte*>(x.raw()) + t * row, row);
      }
    }
    for (int j = 0; j < s.ranks; ++j) signal(windows[j].dispatched[rank]);
  }

  void wait(backend::Backend&, const PeerShape& s, const PeerWindow& mine, bool dispatch) override {
    uint64_t* arrived = dispatch ? mine.dispatched : mine.combined;
    uint64_t& waits = mine.waits[dispatch ? 0 : 1];
    for (int i = 0; i < s.ranks; ++i) {
      while (std::atomic_ref<uint64_t>(arrived[i]).load(std::memory_order_acquire) < waits + 1) {
        DSINFER_CHECK(!aborted_.load(), "peer exchange: aborted (another rank failed)");
        std::this_thread::yield();
      }
    }
    ++waits;
  }

  void send_results(backend::Backend&, const PeerShape& s, std::span<const PeerWindow> windows, int rank,
                    const Tensor& expert_out, int64_t slots_per_rank) override {
    const size_t row = s.row_bytes();
    const PeerWindow& mine = windows[rank];
    for (int i = 0; i < s.ranks; ++i) {
      for (int64_t t = 0; t < s.capacity; ++t) {
        const int64_t received = int64_t{i} * s.capacity + t;  // its row here
        if (!chooses(mine.ids + received * s.top_k, s.top_k, rank, slots_per_rank)) continue;
        std::memcpy(windows[i].results + (int64_t{rank} * s.capacity + t) * row,
                    static_cast<const std::byte*>(expert_out.raw()) + received * row, row);
      }
      signal(windows[i].combined[rank]);
    }
  }

  Tensor sum_results(backend::Backend&, const PeerShape& s, const PeerWindow& mine, const Tensor& ids,
                     int64_t slots_per_rank) override {
    DSINFER_CHECK(s.dtype == DType::kF32 || s.dtype == DType::kBF16, "peer combine on the CPU: ",
                  dtype_name(s.dtype), " rows (f32 and bf16 only)");
    const int64_t T = ids.dim(0), H = s.hidden;
    Tensor out = Tensor::empty(s.dtype, {T, H});
    std::vector<float> sum(static_cast<size_t>(H));
    for (int64_t t = 0; t < T; ++t) {
      std::fill(sum.begin(), sum.end(), 0.0f);
      for (int j = 0; j < s.ranks; ++j) {
        if (!chooses(ids.data<int32_t>() + t * s.top_k, s.top_k, j, slots_per_rank)) continue;
        const std::byte* row = mine.results + (int64_t{j} * s.capacity + t) * s.row_bytes();
        for (int64_t h = 0; h < H; ++h)
          sum[h] += s.dtype == DType::kF32 ? reinterpret_cast<const float*>(row)[h]
                                           : bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[h]);
      }
      for (int64_t h = 0; h < H; ++h) {
        if (s.dtype == DType::kF32) {
          out.data<float>()[t * H + h] = sum[h];
        } else {
          out.data<uint16_t>()[t * H + h] = f32_to_bf16(sum[h]);
        }
      }
    }
    return out;
  }

  void abort() override { aborted_ = true; }

 private:
  std::atomic<bool> aborted_{false};
};

}  // namespace

std::shared_ptr<PeerDevice> make_cpu_peer_device() { return std::make_shared<CpuPeerDevice>(); }

}  // namespace dsinfer::parallel
