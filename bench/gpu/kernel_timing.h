// How the GPU benchmarks time one call, and the device buffers they use (bench/gpu: ceilings.cc,
// kernels_bench.cc, small_ops_cases.cc).
//
// Timing (issue 8, ANCHORS.md): the L2 flushed before each call by a 256 MiB cudaMemsetAsync outside
// the timed region, CUDA events around the one call, the median of `runs` after warm-ups. All runs
// are queued before waiting, so each call is already queued when the GPU reaches it: the events time
// the GPU's work, not the host's launch. Beside them, where libcupti loads (kernel_activity.h), the
// same runs' kernel times from the GPU's own timestamps: what ANCHORS.md's H200 tables hold.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/dtype.h"

namespace dsinfer::bench {

// One device allocation (at least 256 bytes), freed with the object. cudaMalloc'd: 256-byte aligned.
// Throws dsinfer::Error naming the size when the GPU has too little free memory.
class Buffer {
 public:
  explicit Buffer(size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  template <typename T = void>
  T* get() const { return static_cast<T*>(data_); }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

class Timer {
 public:
  static constexpr int kWarmups = 3;  // the first call may build plans (cuBLASLt) or set attributes
  Timer(cudaStream_t stream, int runs);  // runs: timed calls per median
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  // Median microseconds of one call of `call` (which only queues its work on the stream), the L2
  // flushed before each.
  double median_us(const std::function<void()>& call);
  // For the last median_us: the median over its runs of the span from the call's first kernel's
  // start to its last kernel's end, from CUPTI's records; 0 when there are none (no libcupti, or a
  // call that queues memsets of its own).
  double kernel_median_us() const { return kernel_median_us_; }

 private:
  cudaStream_t stream_;
  int runs_;
  double kernel_median_us_ = 0;
  Buffer flush_;
  std::vector<cudaEvent_t> events_;  // a start and a stop per run
};

// n elements of `dtype` (kF32, kBF16 or kF8E4M3) drawn uniformly from [low, high) on the device
// (backend::cuda::fill_uniform: the same values for the same seed).
void fill(void* data, DType dtype, int64_t n, uint64_t seed, float low, float high, cudaStream_t stream);

}  // namespace dsinfer::bench
