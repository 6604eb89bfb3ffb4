// The GPU's ceilings (ceilings.h): copy bandwidth and the BF16 and FP8 GEMM peaks through our own
// GemmRunner, timed with CUDA events, L2 flushed before each call.
//
// Device memory: 2 x 2 GiB for the copy (freed before the GEMMs), 256 MiB for the flush, and for the
// GEMMs x, W, y of 8192 x 8192 (128 MiB each in bf16) plus the FP8 path's scratch (~200 MiB).
#include "ceilings.h"  // bench/gpu/, next to this file

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/random_fill.h"
#include "core/dtype.h"
#include "core/error.h"

namespace dsinfer::bench {
namespace {

using backend::cuda::GemmPath;
using backend::cuda::GemmRunner;

constexpr size_t kCopyBytes = size_t{2} << 30;    // per buffer: far beyond L2, as a weight stream is
constexpr size_t kFlushBytes = size_t{256} << 20;  // > 4x the largest Hopper L2 (60 MB on the H200)
constexpr int64_t kGemmSize = 8192;                // M = N = K
constexpr int64_t kScaleBlock = 128;               // DeepSeek's FP8 weight blocks, 128 x 128
constexpr int kWarmups = 3;                        // the first GEMM call also builds cuBLASLt's plan

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    cudaError_t status = cudaMalloc(&data_, bytes);
    if (status != cudaSuccess) {
      cudaGetLastError();  // an allocation failure is not sticky; clear it for the caller
      throw Error(str_cat("ceilings: cannot allocate ", bytes >> 20, " MiB of GPU memory (",
                          cudaGetErrorString(status), "); measuring the ceilings needs about 4.5 GiB free"));
    }
  }
  ~DeviceBuffer() { cudaFree(data_); }  // status ignored: a destructor must not throw
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

class Stream {
 public:
  Stream() { DSINFER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// A start and a stop event per timed run.
class EventPairs {
 public:
  explicit EventPairs(int runs) {
    events_.reserve(2 * static_cast<size_t>(runs));
    for (int i = 0; i < 2 * runs; ++i) {
      cudaEvent_t event = nullptr;
      DSINFER_CUDA_CHECK(cudaEventCreate(&event));
      events_.push_back(event);
    }
  }
  ~EventPairs() {
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
  }
  EventPairs(const EventPairs&) = delete;
  EventPairs& operator=(const EventPairs&) = delete;
  cudaEvent_t start(int run) const { return events_[2 * run]; }
  cudaEvent_t stop(int run) const { return events_[2 * run + 1]; }

 private:
  std::vector<cudaEvent_t> events_;
};

// Median milliseconds of `call` (which only queues work on `stream`). Every run is preceded by a
// memset of `flush` outside its events. All runs are queued before waiting, so each call is already
// queued when the GPU reaches it: the events time the GPU's work, not the host's launch.
template <typename Call>
double median_ms(cudaStream_t stream, const DeviceBuffer& flush, Call&& call) {
  for (int i = 0; i < kWarmups; ++i) call();
  EventPairs events(kCeilingRuns);
  for (int run = 0; run < kCeilingRuns; ++run) {
    DSINFER_CUDA_CHECK(cudaMemsetAsync(flush.get(), run & 0xff, flush.bytes(), stream));
    DSINFER_CUDA_CHECK(cudaEventRecord(events.start(run), stream));
    call();
    DSINFER_CUDA_CHECK(cudaEventRecord(events.stop(run), stream));
  }
  DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> times;
  for (int run = 0; run < kCeilingRuns; ++run) {
    float ms = 0;
    DSINFER_CUDA_CHECK(cudaEventElapsedTime(&ms, events.start(run), events.stop(run)));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  return n % 2 == 1 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

double measure_copy_tb_s(cudaStream_t stream, const DeviceBuffer& flush) {
  DeviceBuffer source(kCopyBytes), destination(kCopyBytes);
  backend::cuda::fill_uniform(source.get(), DType::kBF16, static_cast<int64_t>(kCopyBytes / 2), 11, -1.0f, 1.0f,
                              stream);
  const double ms = median_ms(stream, flush, [&] {
    DSINFER_CUDA_CHECK(
        cudaMemcpyAsync(destination.get(), source.get(), kCopyBytes, cudaMemcpyDeviceToDevice, stream));
  });
  return 2.0 * static_cast<double>(kCopyBytes) / (ms * 1e-3) / 1e12;  // read + written
}

// y [n, n] bf16 = x [n, n] bf16 . W [n, n]^T, W bf16 or f8e4m3 with [n/128, n/128] f32 block scales.
double measure_gemm_tflops(GemmRunner& runner, cudaStream_t stream, const DeviceBuffer& flush, DType weight_dtype) {
  const int64_t n = kGemmSize;
  const size_t elements = static_cast<size_t>(n * n);
  DeviceBuffer x(elements * sizeof(__nv_bfloat16)), weight(elements * dtype_size(weight_dtype)),
      y(elements * sizeof(__nv_bfloat16));
  backend::cuda::fill_uniform(x.get(), DType::kBF16, n * n, 21, -1.0f, 1.0f, stream);

  backend::cuda::LinearArgs args;
  args.x = static_cast<const __nv_bfloat16*>(x.get());
  args.weight.data = weight.get();
  args.weight.dtype = weight_dtype;
  args.y = y.get();
  args.y_dtype = DType::kBF16;
  args.tokens = n;
  args.out_features = n;
  args.in_features = n;

  std::optional<DeviceBuffer> scale, scratch;
  if (weight_dtype == DType::kF8E4M3) {
    // Codes of magnitude up to 224 (of e4m3's 448) times scales ~1.5e-4: DeepSeek-like weights.
    backend::cuda::fill_uniform(weight.get(), DType::kF8E4M3, n * n, 22, -224.0f, 224.0f, stream);
    const int64_t blocks = n / kScaleBlock;
    scale.emplace(static_cast<size_t>(blocks * blocks) * sizeof(float));
    backend::cuda::fill_uniform(scale->get(), DType::kF32, blocks * blocks, 23, 1.4e-4f, 1.7e-4f, stream);
    args.weight.scale = static_cast<const float*>(scale->get());
  } else {
    backend::cuda::fill_uniform(weight.get(), weight_dtype, n * n, 22, -1.0f, 1.0f, stream);
  }
  const backend::cuda::LinearPlan plan =
      backend::cuda::plan_linear(runner.options(), weight_dtype, DType::kBF16, n, n, n);
  if (plan.scratch_bytes > 0) {
    scratch.emplace(plan.scratch_bytes);
    args.scratch = scratch->get();
    args.scratch_bytes = scratch->bytes();
  }

  const double ms = median_ms(stream, flush, [&] { runner.linear(args, stream); });
  if (runner.last_path() != GemmPath::kCublasLt) {
    std::fprintf(stderr,
                 "warning: the %s GEMM ceiling ran our fallback kernel, not cuBLASLt: it is not the chip's peak\n",
                 std::string(dtype_name(weight_dtype)).c_str());
  }
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / (ms * 1e-3) / 1e12;
}

}  // namespace

Ceilings measure_ceilings(int device) {
  DSINFER_CUDA_CHECK(cudaSetDevice(device));
  Stream stream;
  DeviceBuffer flush(kFlushBytes);
  Ceilings ceilings;
  ceilings.copy_tb_s = measure_copy_tb_s(stream.get(), flush);
  GemmRunner runner;  // its cuBLASLt workspace on `device`
  ceilings.bf16_tflops = measure_gemm_tflops(runner, stream.get(), flush, DType::kBF16);
  ceilings.fp8_tflops = measure_gemm_tflops(runner, stream.get(), flush, DType::kF8E4M3);
  DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  return ceilings;
}

std::string gpu_device_name(int device) {
  cudaDeviceProp properties{};
  DSINFER_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  int driver = 0;
  DSINFER_CUDA_CHECK(cudaDriverGetVersion(&driver));
  char text[512];  // name is at most 256 bytes
  std::snprintf(text, sizeof(text), "cuda: %s (%d SMs, %.1f GiB, %d MiB L2, driver CUDA %d.%d)", properties.name,
                properties.multiProcessorCount, static_cast<double>(properties.totalGlobalMem) / (1 << 30),
                properties.l2CacheSize >> 20, driver / 1000, driver % 1000 / 10);
  return text;
}

}  // namespace dsinfer::bench
