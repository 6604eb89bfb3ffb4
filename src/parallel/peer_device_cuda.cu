// PeerDevice on GPUs of one process: each window in its rank's device memory, written by the other
// ranks' kernels through peer access (NVLink). The steps are peer_device_cpu.cc's, as kernels on the
// rank's backend stream:
//
//   send_tokens   a warp a (token, rank) pair: its lanes read the token's k choices, OR the bits of the
//                 ranks that hold them, write the routing row into that rank's window and, when the
//                 rank holds one of them, copy the hidden row there (16 bytes a lane at a time).
//                 Every block then fences, and one thread adds 1 to the block's count in each
//                 receiver's `dispatched[sender]`.
//   wait          one thread a sender spins (acquire, system scope) until the sender's count reaches
//                 kSendBlocks x (waits + 1); then the rank's own wait count goes up by one. Every
//                 rank makes the same calls in the same order, so the counts agree with no reset.
//   send_results  a warp a received row: the rows with a choice here go back into the token rank's
//                 window, then the same signal into `combined`.
//   sum_results   a block a token: its rows from the ranks it chose, summed in rank order in f32,
//                 16 bytes a thread at a time.
//
// A wait gives up when the group is aborted (a host flag the kernel reads: another rank failed, and
// the host throws for the step), and traps after kTimeoutNs without its senders, so that a rank that
// never sends fails the step loudly instead of hanging the GPU.
#include <cuda/atomic>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "core/error.h"
#include "parallel/peer_device_cuda.h"

namespace dsinfer::parallel {
namespace {

constexpr int kMaxRanks = 16;
constexpr int kSendBlocks = 64;  // blocks of every send kernel; each signals once
constexpr int kWarps = 8;        // warps a block
constexpr unsigned kFull = 0xffffffffu;
constexpr unsigned long long kTimeoutNs = 120ull * 1000 * 1000 * 1000;

struct Windows {
  std::byte* tokens[kMaxRanks];
  int32_t* ids[kMaxRanks];
  float* weights[kMaxRanks];
  std::byte* results[kMaxRanks];
  unsigned long long* dispatched[kMaxRanks];
  unsigned long long* combined[kMaxRanks];
};

struct Geometry {
  int ranks = 0, rank = 0, top_k = 0;
  int64_t capacity = 0, row_bytes = 0, slots_per_rank = 0;
  bool vectors = false;  // rows move 16 bytes a lane (aligned, row_bytes % 16 == 0)
};

// The bits of the ranks that hold one of the lane's choices (lanes >= k bring kNoExpert, held by
// none), on every lane.
__device__ unsigned chosen_ranks(int32_t id, const Geometry& g) {
  const int64_t owner = id >= 0 && id != kNoExpert ? id / g.slots_per_rank : -1;
  return __reduce_or_sync(kFull, owner >= 0 && owner < 32 ? 1u << owner : 0u);
}

__device__ void copy_row(std::byte* __restrict__ to, const std::byte* __restrict__ from, const Geometry& g,
                         int lane) {
  if (g.vectors) {
    for (int64_t i = lane; i < g.row_bytes / 16; i += 32)
      reinterpret_cast<int4*>(to)[i] = reinterpret_cast<const int4*>(from)[i];
  } else {
    for (int64_t i = lane; i < g.row_bytes; i += 32) to[i] = from[i];
  }
}

// After a block's writes: the barrier orders them before thread 0's system-scope fence (cumulative,
// as cooperative groups' grid sync relies on), which makes them visible to every GPU before the
// block is counted in each target.
__device__ void signal(unsigned long long* const* counters, int targets, int sender) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    for (int j = 0; j < targets; ++j) atomicAdd_system(counters[j] + sender, 1ull);
  }
}

__global__ void send_tokens_kernel(Windows w, Geometry g, const std::byte* __restrict__ x,
                                   const int32_t* __restrict__ ids, const float* __restrict__ weights, int64_t T) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  // A warp a (token, target rank) pair, so that a few tokens still keep every warp copying.
  const int64_t pairs = g.capacity * g.ranks;
  for (int64_t p = int64_t{blockIdx.x} * kWarps + warp; p < pairs; p += int64_t{gridDim.x} * kWarps) {
    const int64_t t = p / g.ranks;
    const int j = static_cast<int>(p % g.ranks);
    int32_t id = kNoExpert;
    float weight = 0.0f;
    if (t < T && lane < g.top_k) {
      id = ids[t * g.top_k + lane];
      weight = weights[t * g.top_k + lane];
    }
    const int64_t slot = int64_t{g.rank} * g.capacity + t;  // its row in every window
    if (lane < g.top_k) {
      w.ids[j][slot * g.top_k + lane] = id;
      w.weights[j][slot * g.top_k + lane] = weight;
    }
    if (chosen_ranks(id, g) >> j & 1u) copy_row(w.tokens[j] + slot * g.row_bytes, x + t * g.row_bytes, g, lane);
  }
  signal(w.dispatched, g.ranks, g.rank);
}

__global__ void wait_kernel(unsigned long long* arrived, unsigned long long* waits, int ranks,
                            const volatile int* aborted) {
  const unsigned long long target = (*waits + 1) * kSendBlocks;
  if (threadIdx.x < ranks) {
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> count(arrived[threadIdx.x]);
    unsigned long long start = 0, now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (count.load(cuda::memory_order_acquire) < target) {
      if (*aborted) break;  // the host fails the step
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
      if (now - start > kTimeoutNs) __trap();  // a rank that never sent
      __nanosleep(128);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) *waits += 1;
}

__global__ void send_results_kernel(Windows w, Geometry g, const std::byte* __restrict__ out) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int32_t* received_ids = w.ids[g.rank];
  const int64_t rows = g.ranks * g.capacity;
  for (int64_t r = int64_t{blockIdx.x} * kWarps + warp; r < rows; r += int64_t{gridDim.x} * kWarps) {
    const int32_t id = lane < g.top_k ? received_ids[r * g.top_k + lane] : kNoExpert;
    if (!(chosen_ranks(id, g) >> g.rank & 1u)) continue;
    const int64_t sender = r / g.capacity, t = r % g.capacity;
    copy_row(w.results[sender] + (int64_t{g.rank} * g.capacity + t) * g.row_bytes, out + r * g.row_bytes, g, lane);
  }
  signal(w.combined, g.ranks, g.rank);
}

// N values of T at a time: 16 bytes when the rows allow it (Geometry::vectors), else one.
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T values[N];
};

template <typename T, int N>
__global__ void sum_results_kernel(Geometry g, const std::byte* __restrict__ results, const int32_t* __restrict__ ids,
                                   T* __restrict__ out, int64_t hidden) {
  __shared__ unsigned from;
  const int64_t t = blockIdx.x;
  if (threadIdx.x < 32) {
    const int lane = static_cast<int>(threadIdx.x);
    const unsigned chosen = chosen_ranks(lane < g.top_k ? ids[t * g.top_k + lane] : kNoExpert, g);
    if (lane == 0) from = chosen;
  }
  __syncthreads();
  using Values = Pack<T, N>;
  for (int64_t p = threadIdx.x; p < hidden / N; p += blockDim.x) {
    float sum[N] = {};
    for (int j = 0; j < g.ranks; ++j) {
      if (!(from >> j & 1u)) continue;
      const Values part = reinterpret_cast<const Values*>(results + (int64_t{j} * g.capacity + t) * g.row_bytes)[p];
#pragma unroll
      for (int i = 0; i < N; ++i) sum[i] += static_cast<float>(part.values[i]);
    }
    Values total;
#pragma unroll
    for (int i = 0; i < N; ++i) total.values[i] = T(sum[i]);
    reinterpret_cast<Values*>(out + t * hidden)[p] = total;
  }
}

template <typename T>
void launch_sum(const Geometry& g, const std::byte* results, const int32_t* ids, T* out, int64_t tokens,
                int64_t hidden, cudaStream_t stream) {
  constexpr int kPack = 16 / sizeof(T);
  const bool packed = g.vectors && hidden % kPack == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  if (packed) {
    sum_results_kernel<T, kPack><<<tokens, 128, 0, stream>>>(g, results, ids, out, hidden);
  } else {
    sum_results_kernel<T, 1><<<tokens, 256, 0, stream>>>(g, results, ids, out, hidden);
  }
}

int device_of(const void* memory) {
  cudaPointerAttributes attributes{};
  DSINFER_CUDA_CHECK(cudaPointerGetAttributes(&attributes, memory));
  return attributes.device;
}

class CudaPeerDevice final : public PeerDevice {
 public:
  CudaPeerDevice() {
    DSINFER_CUDA_CHECK(cudaHostAlloc(&aborted_, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
    *aborted_ = 0;
  }
  ~CudaPeerDevice() override { cudaFreeHost(aborted_); }

  std::byte* allocate(backend::Backend& backend, size_t bytes) override {
    select(backend);
    void* memory = nullptr;
    DSINFER_CUDA_CHECK(cudaMalloc(&memory, bytes));
    DSINFER_CUDA_CHECK(cudaMemset(memory, 0, bytes));
    return static_cast<std::byte*>(memory);
  }
  void release(std::byte* memory) override {
    int current = 0;
    if (cudaGetDevice(&current) != cudaSuccess) return;
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, memory) == cudaSuccess) cudaSetDevice(attributes.device);
    cudaFree(memory);
    cudaSetDevice(current);
  }
  void connect(backend::Backend& backend, std::span<std::byte* const> memories) override {
    const int mine = select(backend);
    for (std::byte* memory : memories) {
      const int peer = device_of(memory);
      if (peer == mine) continue;
      int can = 0;
      DSINFER_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, mine, peer));
      DSINFER_CHECK(can, "GPU ", mine, " cannot write into GPU ", peer, "'s memory (no peer access), which the "
                    "low-latency expert dispatch needs: run with --num-max-dispatch-tokens-per-rank 0");
      const cudaError_t enabled = cudaDeviceEnablePeerAccess(peer, 0);
      if (enabled == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();  // not an error here
      } else {
        DSINFER_CUDA_CHECK(enabled);
      }
    }
  }

  void send_tokens(backend::Backend& backend, const PeerShape& shape, std::span<const PeerWindow> windows, int rank,
                   const Tensor& x, const Tensor& ids, const Tensor& weights, int64_t slots_per_rank) override {
    const Geometry g = geometry(shape, rank, slots_per_rank, {x.raw()});
    send_tokens_kernel<<<kSendBlocks, kWarps * 32, 0, backend::cuda::stream_of(backend)>>>(
        windows_of(windows), g, static_cast<const std::byte*>(x.raw()), ids.data<int32_t>(), weights.data<float>(),
        x.dim(0));
    DSINFER_CUDA_CHECK(cudaGetLastError());
  }
  void wait(backend::Backend& backend, const PeerShape& shape, const PeerWindow& mine, bool dispatch) override {
    wait_kernel<<<1, 32 * ((shape.ranks + 31) / 32), 0, backend::cuda::stream_of(backend)>>>(
        reinterpret_cast<unsigned long long*>(dispatch ? mine.dispatched : mine.combined),
        reinterpret_cast<unsigned long long*>(mine.waits + (dispatch ? 0 : 1)), shape.ranks, aborted_);
    DSINFER_CUDA_CHECK(cudaGetLastError());
  }
  void send_results(backend::Backend& backend, const PeerShape& shape, std::span<const PeerWindow> windows, int rank,
                    const Tensor& expert_out, int64_t slots_per_rank) override {
    const Geometry g = geometry(shape, rank, slots_per_rank, {expert_out.raw()});
    send_results_kernel<<<kSendBlocks, kWarps * 32, 0, backend::cuda::stream_of(backend)>>>(
        windows_of(windows), g, static_cast<const std::byte*>(expert_out.raw()));
    DSINFER_CUDA_CHECK(cudaGetLastError());
  }
  Tensor sum_results(backend::Backend& backend, const PeerShape& shape, const PeerWindow& mine, const Tensor& ids,
                     int64_t slots_per_rank) override {
    const int64_t T = ids.dim(0);
    Tensor out = backend.empty(shape.dtype, {T, shape.hidden});
    if (T == 0) return out;
    const Geometry g = geometry(shape, 0, slots_per_rank, {});
    cudaStream_t stream = backend::cuda::stream_of(backend);
    const int32_t* token_ids = ids.data<int32_t>();
    switch (shape.dtype) {
      case DType::kBF16:
        launch_sum(g, mine.results, token_ids, out.data<__nv_bfloat16>(), T, shape.hidden, stream);
        break;
      case DType::kF16:
        launch_sum(g, mine.results, token_ids, out.data<__half>(), T, shape.hidden, stream);
        break;
      case DType::kF32:
        launch_sum(g, mine.results, token_ids, out.data<float>(), T, shape.hidden, stream);
        break;
      default:
        throw Error(str_cat("peer combine: ", dtype_name(shape.dtype), " rows (bf16, f16 and f32 only)"));
    }
    DSINFER_CUDA_CHECK(cudaGetLastError());
    return out;
  }
  void abort() override { *reinterpret_cast<volatile int*>(aborted_) = 1; }

 private:
  // Makes the backend's GPU current; returns it.
  static int select(backend::Backend& backend) {
    int device = 0;
    DSINFER_CUDA_CHECK(cudaStreamGetDevice(backend::cuda::stream_of(backend), &device));
    DSINFER_CUDA_CHECK(cudaSetDevice(device));
    return device;
  }
  static Windows windows_of(std::span<const PeerWindow> windows) {
    DSINFER_CHECK(windows.size() <= kMaxRanks, "peer exchange: ", windows.size(), " ranks, at most ", kMaxRanks);
    Windows w{};
    for (size_t j = 0; j < windows.size(); ++j) {
      w.tokens[j] = windows[j].tokens;
      w.ids[j] = windows[j].ids;
      w.weights[j] = windows[j].weights;
      w.results[j] = windows[j].results;
      w.dispatched[j] = reinterpret_cast<unsigned long long*>(windows[j].dispatched);
      w.combined[j] = reinterpret_cast<unsigned long long*>(windows[j].combined);
    }
    return w;
  }
  static Geometry geometry(const PeerShape& shape, int rank, int64_t slots_per_rank,
                           std::initializer_list<const void*> rows) {
    DSINFER_CHECK(shape.ranks <= kMaxRanks && shape.top_k <= 32, "peer exchange: ", shape.ranks, " ranks and ",
                  shape.top_k, " choices a token (at most ", kMaxRanks, " and 32)");
    Geometry g;
    g.ranks = shape.ranks;
    g.rank = rank;
    g.top_k = static_cast<int>(shape.top_k);
    g.capacity = shape.capacity;
    g.row_bytes = static_cast<int64_t>(shape.row_bytes());
    g.slots_per_rank = slots_per_rank;
    g.vectors = g.row_bytes % 16 == 0;
    for (const void* row : rows) g.vectors = g.vectors && reinterpret_cast<uintptr_t>(row) % 16 == 0;
    return g;
  }

  int* aborted_ = nullptr;  // host memory the GPUs read
};

}  // namespace

std::shared_ptr<PeerDevice> make_cuda_peer_device() { return std::make_shared<CudaPeerDevice>(); }

}  // namespace dsinfer::parallel
