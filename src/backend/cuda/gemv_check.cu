// gemv_check: is every tiling of the one-token bf16 product (gemv.h) right, and which is fastest at
// each of DeepSeek-V3's one-token shapes? A standalone GPU program, not a ctest test (~4 GB of GPU
// memory).
//
//   build/src/backend/cuda/gemv_check [--runs N]
//
// Shapes: bf16 and FP8 (128 x 128 block scales) weights. For each shape: the fallback GEMM
// (fp8_gemm.h, which uses x in bf16 as this kernel does) is the reference; every built tiling must match it
// (NMSE <= 1e-6: both sum the same products in f32, in different orders) and be deterministic
// (two calls bitwise equal). Timing: CUDA events around one call, the L2 flushed before it (a memset
// of 4 x L2), median of --runs (default 20); the fallback GEMM and cuBLASLt are timed the same way.
// Prints one line per (shape, path) with microseconds and TB/s of weight bytes, marks the tiling
// choose_gemv_tiling picks and the fastest one. Exit status 1 on any mismatch.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/fp8_gemm.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/gemv.h"
#include "core/dtype.h"
#include "core/error.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;

struct Shape {
  const char* name;
  int64_t n, k, groups;
  bool f32_out;
  bool fp8 = false;  // e4m3 weights with 128 x 128 block scales (DeepSeek-V3's checkpoint format)
};

// DeepSeek-V3's one-token products (bf16 weights), and the fused q_a + kv_a.
constexpr Shape kShapes[] = {
    {"q_a", 1536, 7168, 1, false},          {"kv_a", 576, 7168, 1, false},
    {"q_a+kv_a", 2112, 7168, 1, false},     {"q_b", 24576, 1536, 1, false},
    {"w_uk", 512, 128, 128, false},         {"w_uv", 128, 512, 128, false},
    {"o_proj", 7168, 16384, 1, false},      {"dense gate_up", 36864, 7168, 1, false},
    {"dense down", 7168, 18432, 1, false},  {"shared gate_up", 4096, 7168, 1, false},
    {"shared down", 7168, 2048, 1, false},  {"lm_head", 129280, 7168, 1, true},
    {"fp8 q_a", 1536, 7168, 1, false, true},            {"fp8 kv_a", 576, 7168, 1, false, true},
    {"fp8 q_b", 24576, 1536, 1, false, true},           {"fp8 o_proj", 7168, 16384, 1, false, true},
    {"fp8 dense gate_up", 36864, 7168, 1, false, true}, {"fp8 dense down", 7168, 18432, 1, false, true},
    {"fp8 shared gate_up", 4096, 7168, 1, false, true}, {"fp8 shared down", 7168, 2048, 1, false, true},
};

class Buffer {
 public:
  explicit Buffer(size_t bytes) : bytes_(bytes) { DSINFER_CUDA_CHECK(cudaMalloc(&data_, std::max<size_t>(bytes, 16))); }
  ~Buffer() { cudaFree(data_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* get() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

__global__ void fill_kernel(bf16* p, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint64_t h = (static_cast<uint64_t>(i) + seed) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    const float u = static_cast<float>(h >> 40) / static_cast<float>(1ull << 24);  // [0, 1)
    p[i] = __float2bfloat16((2.0f * u - 1.0f) * scale);
  }
}

// e4m3 weights near N(0, sigma ~100) as block-quantized weights look (never NaN: |x| <= 448), and
// positive block scales around 2e-4.
__global__ void fill_fp8_kernel(__nv_fp8_e4m3* p, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint64_t h = (static_cast<uint64_t>(i) + seed) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    const float u = static_cast<float>(h >> 40) / static_cast<float>(1ull << 24);
    p[i] = __nv_fp8_e4m3((2.0f * u - 1.0f) * 400.0f);
  }
}

__global__ void fill_scale_kernel(float* p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    p[i] = 2e-4f * (0.5f + static_cast<float>((i * 2654435761u) % 1000) / 1000.0f);
}

std::vector<float> to_host(const void* device, int64_t count, bool f32) {
  std::vector<float> out(count);
  if (f32) {
    DSINFER_CUDA_CHECK(cudaMemcpy(out.data(), device, count * 4, cudaMemcpyDeviceToHost));
  } else {
    std::vector<bf16> raw(count);
    DSINFER_CUDA_CHECK(cudaMemcpy(raw.data(), device, count * 2, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < count; ++i) out[i] = __bfloat162float(raw[i]);
  }
  return out;
}

double nmse(const std::vector<float>& ref, const std::vector<float>& got) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den > 0 ? num / den : num;
}

struct Timer {
  cudaStream_t stream;
  Buffer& flush;
  int runs;
  double median_us(const std::function<void()>& call) {
    cudaEvent_t start, stop;
    DSINFER_CUDA_CHECK(cudaEventCreate(&start));
    DSINFER_CUDA_CHECK(cudaEventCreate(&stop));
    std::vector<float> times;
    for (int run = 0; run < runs + 2; ++run) {
      DSINFER_CUDA_CHECK(cudaMemsetAsync(flush.get(), run & 0xff, flush.bytes(), stream));
      DSINFER_CUDA_CHECK(cudaEventRecord(start, stream));
      call();
      DSINFER_CUDA_CHECK(cudaEventRecord(stop, stream));
      DSINFER_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      DSINFER_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (run >= 2) times.push_back(ms * 1e3f);
    }
    DSINFER_CUDA_CHECK(cudaEventDestroy(start));
    DSINFER_CUDA_CHECK(cudaEventDestroy(stop));
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }
};

bool same_tiling(const GemvTiling& a, const GemvTiling& b) {
  return a.team == b.team && a.rows == b.rows && a.split == b.split && a.loads == b.loads;
}

int run(int runs) {
  int device = 0, l2 = 0;
  DSINFER_CUDA_CHECK(cudaGetDevice(&device));
  DSINFER_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  cudaDeviceProp prop{};
  DSINFER_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf("%s: %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount, l2 >> 20);
  cudaStream_t stream;
  DSINFER_CUDA_CHECK(cudaStreamCreate(&stream));
  Buffer flush(4 * static_cast<size_t>(l2));
  Timer timer{stream, flush, runs};
  GemmOptions fallback_options;
  fallback_options.force_fallback = true;
  GemmRunner fallback(fallback_options);
  GemmOptions cublas_options;  // bf16_fallback_max_rows 0: cuBLASLt for every bf16 product (FP8: activations
  cublas_options.fp8_wgmma_max_rows = 0;  // quantized), never our FP8 wgmma kernel
  GemmRunner cublas(cublas_options);
  Buffer cublas_scratch(size_t{64} << 20);
  int failures = 0;

  for (const Shape& shape : kShapes) {
    const int64_t w_count = shape.groups * shape.n * shape.k, x_count = shape.groups * shape.k;
    const int64_t y_count = shape.groups * shape.n;
    const int64_t scale_count = ((shape.n + 127) / 128) * ((shape.k + 127) / 128);
    const size_t y_bytes = y_count * (shape.f32_out ? 4 : 2);
    const int64_t w_bytes = w_count * (shape.fp8 ? 1 : 2);
    Buffer w(w_bytes), x(x_count * 2), y_ref(y_bytes), y(y_bytes), scale(scale_count * 4);
    if (shape.fp8) {
      fill_fp8_kernel<<<1024, 256, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(w.get()), w_count, 1);
      fill_scale_kernel<<<64, 256, 0, stream>>>(static_cast<float*>(scale.get()), scale_count);
    } else {
      fill_kernel<<<1024, 256, 0, stream>>>(static_cast<bf16*>(w.get()), w_count, 1, 0.05f);
    }
    fill_kernel<<<64, 256, 0, stream>>>(static_cast<bf16*>(x.get()), x_count, 2, 1.0f);
    DSINFER_CUDA_CHECK_LAUNCH();
    const double gb = static_cast<double>(w_bytes + (shape.fp8 ? scale_count * 4 : 0)) / 1e9;
    const DType y_dtype = shape.f32_out ? DType::kF32 : DType::kBF16;
    const DType w_dtype = shape.fp8 ? DType::kF8E4M3 : DType::kBF16;

    auto product = [&](GemmRunner& runner, void* out) {
      if (shape.groups == 1) {
        LinearArgs args;
        args.x = static_cast<const bf16*>(x.get());
        args.weight = {w.get(), w_dtype, shape.fp8 ? static_cast<const float*>(scale.get()) : nullptr};
        args.y = out;
        args.y_dtype = y_dtype;
        args.tokens = 1;
        args.out_features = shape.n;
        args.in_features = shape.k;
        args.scratch = cublas_scratch.get();
        args.scratch_bytes = cublas_scratch.bytes();
        runner.linear(args, stream);
      } else {
        runner.grouped_linear(static_cast<const bf16*>(x.get()), w.get(), DType::kBF16, static_cast<bf16*>(out), 1,
                              shape.groups, shape.n, shape.k, stream);
      }
    };
    product(fallback, y_ref.get());
    DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<float> reference = to_host(y_ref.get(), y_count, shape.f32_out);
    std::printf("\n%-16s n %6lld k %6lld groups %3lld  %8.2f MB\n", shape.name, static_cast<long long>(shape.n),
                static_cast<long long>(shape.k), static_cast<long long>(shape.groups), gb * 1e3);
    const double fallback_us = timer.median_us([&] { product(fallback, y.get()); });
    std::printf("  %-36s %8.2f us %6.2f TB/s\n", "fallback GEMM", fallback_us, gb / fallback_us * 1e3);
    const double cublas_us = timer.median_us([&] { product(cublas, y.get()); });
    std::printf("  %-36s %8.2f us %6.2f TB/s\n", "cuBLASLt", cublas_us, gb / cublas_us * 1e3);

    Gemv g;
    g.x = static_cast<const bf16*>(x.get());
    g.x_group_stride = shape.k;
    g.w = w.get();
    g.w_dtype = w_dtype;
    g.w_scale = shape.fp8 ? static_cast<const float*>(scale.get()) : nullptr;
    g.w_group_stride = shape.n * shape.k;
    g.y = y.get();
    g.y_dtype = y_dtype;
    g.y_group_stride = shape.n;
    g.n = shape.n;
    g.k = shape.k;
    g.groups = shape.groups;
    const GemvTiling chosen = choose_gemv_tiling(shape.n, shape.k, shape.groups, w_dtype);
    double best_us = 1e30, chosen_us = 0;
    std::string best;
    for (const GemvTiling& tiling : gemv_tilings()) {
      if (shape.n % tiling.rows != 0) continue;
      DSINFER_CUDA_CHECK(cudaMemsetAsync(y.get(), 0xff, y_bytes, stream));
      gemv(g, tiling, stream);
      DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream));
      const std::vector<float> first = to_host(y.get(), y_count, shape.f32_out);
      gemv(g, tiling, stream);
      DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream));
      const std::vector<float> second = to_host(y.get(), y_count, shape.f32_out);
      const double error = nmse(reference, first);
      const bool deterministic = std::memcmp(first.data(), second.data(), first.size() * sizeof(float)) == 0;
      const bool ok = error <= 1e-6 && deterministic;
      if (!ok) ++failures;
      const double us = timer.median_us([&] { gemv(g, tiling, stream); });
      const bool is_chosen = same_tiling(tiling, chosen);
      if (is_chosen) chosen_us = us;
      if (us < best_us) best_us = us, best = tiling.describe();
      std::printf("  gemv %-31s %8.2f us %6.2f TB/s  nmse %.1e%s%s%s\n", tiling.describe().c_str(), us, gb / us * 1e3,
                  error, deterministic ? "" : "  NOT DETERMINISTIC", ok ? "" : "  FAIL", is_chosen ? "  <- chosen" : "");
    }
    std::printf("  best: %s %.2f us; chosen %.2f us; fallback %.2f; cuBLASLt %.2f\n", best.c_str(), best_us, chosen_us,
                fallback_us, cublas_us);
  }
  DSINFER_CUDA_CHECK(cudaStreamDestroy(stream));
  std::printf("\n%s\n", failures == 0 ? "all tilings match" : "MISMATCHES");
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace dsinfer::backend::cuda

int main(int argc, char** argv) {
  int runs = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = std::max(3, std::atoi(argv[++i]));
  }
  try {
    return dsinfer::backend::cuda::run(runs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemv_check: %s\n", e.what());
    return 2;
  }
}
