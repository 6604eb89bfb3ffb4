#include "kernel_timing.h"  // bench/gpu/, next to this file

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "kernel_activity.h"
#include "backend/cuda/random_fill.h"
#include "core/error.h"

namespace dsinfer::bench {

Buffer::Buffer(size_t bytes) : bytes_(std::max<size_t>(bytes, 256)) {
  const cudaError_t status = cudaMalloc(&data_, bytes_);
  if (status != cudaSuccess) {
    cudaGetLastError();  // an allocation failure is not sticky; clear it for the caller
    throw Error(str_cat("cannot allocate ", bytes_ >> 20, " MiB of GPU memory (", cudaGetErrorString(status),
                        "); the GPU benchmarks need a few GiB free"));
  }
}

Buffer::~Buffer() { cudaFree(data_); }  // status ignored: a destructor must not throw

Timer::Timer(cudaStream_t stream, int runs) : stream_(stream), runs_(runs), flush_(size_t{256} << 20) {
  events_.reserve(2 * static_cast<size_t>(runs));
  for (int i = 0; i < 2 * runs; ++i) {
    cudaEvent_t event = nullptr;
    DSINFER_CUDA_CHECK(cudaEventCreate(&event));
    events_.push_back(event);
  }
}

Timer::~Timer() {
  for (cudaEvent_t event : events_) cudaEventDestroy(event);
}

namespace {

double median(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  return n % 2 == 1 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

}  // namespace

double Timer::median_us(const std::function<void()>& call) {
  for (int i = 0; i < kWarmups; ++i) call();
  KernelActivity* activity = KernelActivity::get();
  if (activity != nullptr) {
    DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the warm-ups' records are dropped
    activity->begin();
  }
  for (int run = 0; run < runs_; ++run) {
    DSINFER_CUDA_CHECK(cudaMemsetAsync(flush_.get(), run & 0xff, flush_.bytes(), stream_));
    DSINFER_CUDA_CHECK(cudaEventRecord(events_[2 * run], stream_));
    call();
    DSINFER_CUDA_CHECK(cudaEventRecord(events_[2 * run + 1], stream_));
  }
  DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<double> times;
  for (int run = 0; run < runs_; ++run) {
    float ms = 0;
    DSINFER_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[2 * run], events_[2 * run + 1]));
    times.push_back(ms * 1e3);
  }
  const std::vector<double> spans = activity != nullptr ? activity->spans_us(runs_) : std::vector<double>{};
  kernel_median_us_ = spans.empty() ? 0 : median(spans);
  return median(times);
}

void fill(void* data, DType dtype, int64_t n, uint64_t seed, float low, float high, cudaStream_t stream) {
  backend::cuda::fill_uniform(data, dtype, n, seed, low, high, stream);
}

}  // namespace dsinfer::bench
