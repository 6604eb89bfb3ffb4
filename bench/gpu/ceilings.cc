// The GPU's ceilings (ceilings.h): copy bandwidth and the BF16 and FP8 GEMM peaks through our own
// GemmRunner, timed by kernel_timing.h (CUDA events, L2 flushed before each call).
//
// Device memory: 2 x 2 GiB for the copy (freed before the GEMMs), 256 MiB for the flush, and for the
// GEMMs x, W, y of 8192 x 8192 (128 MiB each in bf16) plus the FP8 path's scratch (~200 MiB).
#include "ceilings.h"  // bench/gpu/, next to this file
#include "kernel_timing.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
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
constexpr int64_t kGemmSize = 8192;                // M = N = K
constexpr int64_t kScaleBlock = 128;               // DeepSeek's FP8 weight blocks, 128 x 128

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

// Median milliseconds of `call` (kernel_timing.h's Timer: the L2 flushed before each run).
double median_ms(cudaStream_t stream, const std::function<void()>& call) {
  Timer timer(stream, kCeilingRuns);
  return timer.median_us(call) * 1e-3;
}

double measure_copy_tb_s(cudaStream_t stream) {
  Buffer source(kCopyBytes), destination(kCopyBytes);
  backend::cuda::fill_uniform(source.get(), DType::kBF16, static_cast<int64_t>(kCopyBytes / 2), 11, -1.0f, 1.0f,
                              stream);
  const double ms = median_ms(stream, [&] {
    DSINFER_CUDA_CHECK(
        cudaMemcpyAsync(destination.get(), source.get(), kCopyBytes, cudaMemcpyDeviceToDevice, stream));
  });
  return 2.0 * static_cast<double>(kCopyBytes) / (ms * 1e-3) / 1e12;  // read + written
}

// y [n, n] bf16 = x [n, n] bf16 . W [n, n]^T, W bf16 or f8e4m3 with [n/128, n/128] f32 block scales.
double measure_gemm_tflops(GemmRunner& runner, cudaStream_t stream, DType weight_dtype) {
  const int64_t n = kGemmSize;
  const size_t elements = static_cast<size_t>(n * n);
  Buffer x(elements * sizeof(__nv_bfloat16)), weight(elements * dtype_size(weight_dtype)),
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

  std::optional<Buffer> scale, scratch;
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

  const double ms = median_ms(stream, [&] { runner.linear(args, stream); });
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
  Ceilings ceilings;
  ceilings.copy_tb_s = measure_copy_tb_s(stream.get());
  GemmRunner runner;  // its cuBLASLt workspace on `device`
  ceilings.bf16_tflops = measure_gemm_tflops(runner, stream.get(), DType::kBF16);
  ceilings.fp8_tflops = measure_gemm_tflops(runner, stream.get(), DType::kF8E4M3);
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
