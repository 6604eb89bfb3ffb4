// What the standalone MoE kernel checks (moe_fp8_rows_check, moe_w4a8_rows_check) share: device
// buffers that free themselves and copies to and from them, the device they run on, the hash and the
// routings their random inputs are drawn from, a call's bf16 output (eager or replayed from a CUDA
// graph), the comparison of bf16 outputs, and kernel timing (L2 flushed before each call, CUDA
// events, the median).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "core/dtype.h"
#include "core/error.h"

namespace dsinfer::backend::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) DSINFER_CUDA_CHECK(cudaMalloc(&data_, bytes));
  }
  ~DeviceBuffer() {
    if (data_) cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;  // other frees what this held
  }
  template <typename T = void>
  T* get() const { return static_cast<T*>(data_); }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

template <typename T>
void upload(DeviceBuffer& buffer, const std::vector<T>& host) {
  DSINFER_CHECK(buffer.bytes() >= host.size() * sizeof(T), "upload: buffer too small");
  DSINFER_CUDA_CHECK(cudaMemcpy(buffer.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
}

template <typename T>
std::vector<T> download(const void* device, size_t count) {
  std::vector<T> host(count);
  DSINFER_CUDA_CHECK(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

// splitmix64's finalizer: the random inputs' hash, the same on host and device.
__host__ __device__ inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// How a check routes its tokens: k distinct random experts each (kUniform), and on top of that one
// token's three slots on expert 5 (kRepeated), experts 3, 7 and 11 with exactly 64, 32 and 20 rows
// (kHot), ids outside [0, experts) and repeated within a token (kInvalid); or every expert exactly
// tokens * k / experts rows (kBalanced).
enum class RoutingKind { kUniform, kRepeated, kHot, kInvalid, kBalanced };

// ids [tokens, top_k] and their weights (each token's summing to 2.5), drawn from rng.
inline void draw_routing(RoutingKind routing, int64_t tokens, int experts, int top_k, std::mt19937_64& rng,
                         std::vector<int32_t>& ids, std::vector<float>& weights) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  ids.assign(tokens * top_k, 0);
  weights.assign(tokens * top_k, 0.0f);
  std::uniform_int_distribution<int32_t> pick(0, experts - 1);
  for (int64_t t = 0; t < tokens; ++t) {
    int32_t* row = &ids[t * top_k];
    if (routing == RoutingKind::kBalanced) {
      for (int j = 0; j < top_k; ++j) row[j] = static_cast<int32_t>((t * top_k + j) % experts);
    } else {
      for (int j = 0; j < top_k; ++j) {  // k distinct experts (the hot case keeps its three out of the draw)
        int32_t e;
        do e = pick(rng);
        while (std::find(row, row + j, e) != row + j ||
               (routing == RoutingKind::kHot && (e == 3 || e == 7 || e == 11)));
        row[j] = e;
      }
    }
    switch (routing) {
      case RoutingKind::kUniform:
      case RoutingKind::kBalanced: break;
      case RoutingKind::kRepeated: row[0] = row[1] = row[2] = 5; break;  // expert 5 gets 3 rows of one token
      case RoutingKind::kHot:  // exactly 64, 32 and 20 rows
        row[0] = 3;
        if (t < 32) row[1] = 7;
        if (t < 20) row[2] = 11;
        break;
      case RoutingKind::kInvalid:
        if (t % 5 == 0) row[3] = -1;
        if (t % 7 == 0) row[5] = experts;
        if (t % 11 == 0) row[6] = row[0];
        break;
    }
    float total = 0.0f;
    for (int j = 0; j < top_k; ++j) total += weights[t * top_k + j] = 0.05f + unit(rng);
    for (int j = 0; j < top_k; ++j) weights[t * top_k + j] *= 2.5f / total;
  }
}

// A case's tokens on the host and, once uploaded, on the device: x [T, H] bf16 bits, and the router's
// ids and weights [T, k].
struct MoeInputs {
  int64_t tokens = 0;
  std::vector<uint16_t> x;
  std::vector<int32_t> ids;
  std::vector<float> weights;
  DeviceBuffer x_dev, ids_dev, weights_dev;

  void upload_all() {
    x_dev = DeviceBuffer(x.size() * sizeof(uint16_t));
    ids_dev = DeviceBuffer(ids.size() * sizeof(int32_t));
    weights_dev = DeviceBuffer(weights.size() * sizeof(float));
    upload(x_dev, x);
    upload(ids_dev, ids);
    upload(weights_dev, weights);
  }
};

// Rows per expert of the valid ids.
inline std::vector<int32_t> expert_counts(const std::vector<int32_t>& ids, int experts) {
  std::vector<int32_t> counts(experts, 0);
  for (int32_t e : ids)
    if (e >= 0 && e < experts) ++counts[e];
  return counts;
}

// Normalized squared error of the first `count` bf16 values of a against b.
inline double bf16_nmse(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, int64_t count) {
  double err = 0.0, ref = 0.0;
  for (int64_t i = 0; i < count; ++i) {
    const double x = bf16_to_f32(a[i]), y = bf16_to_f32(b[i]);
    err += (x - y) * (x - y);
    ref += y * y;
  }
  return ref > 0.0 ? err / ref : (err > 0.0 ? INFINITY : 0.0);
}

inline bool bf16_all_finite(const std::vector<uint16_t>& v) {
  for (uint16_t bits : v)
    if (!std::isfinite(bf16_to_f32(bits))) return false;
  return true;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Median microseconds of one call over `runs` after `warmups`, `flush` (larger than the L2) written
// before each.
inline double time_us(cudaStream_t stream, const DeviceBuffer& flush, int runs, int warmups,
                      const std::function<void()>& call) {
  cudaEvent_t start, stop;
  DSINFER_CUDA_CHECK(cudaEventCreate(&start));
  DSINFER_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> us;
  for (int run = 0; run < runs + warmups; ++run) {
    DSINFER_CUDA_CHECK(cudaMemsetAsync(flush.get(), run & 0xff, flush.bytes(), stream));
    DSINFER_CUDA_CHECK(cudaEventRecord(start, stream));
    call();
    DSINFER_CUDA_CHECK(cudaEventRecord(stop, stream));
    DSINFER_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    DSINFER_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (run >= warmups) us.push_back(1e3 * ms);
  }
  DSINFER_CUDA_CHECK(cudaEventDestroy(start));
  DSINFER_CUDA_CHECK(cudaEventDestroy(stop));
  return median(us);
}

// The device's copy bandwidth (bytes read plus written), TB/s: a copy of `bytes`, timed as above.
inline double copy_tbps(cudaStream_t stream, const DeviceBuffer& flush, int runs, int warmups, int64_t bytes) {
  DeviceBuffer a(bytes), b(bytes);
  DSINFER_CUDA_CHECK(cudaMemsetAsync(a.get(), 1, bytes, stream));
  const double us = time_us(stream, flush, runs, warmups, [&] {
    DSINFER_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream));
  });
  return 2.0 * bytes / (us * 1e-6) / 1e12;
}

constexpr int kCheckWarmups = 3;                     // untimed calls before the timed ones
constexpr int64_t kCheckCopyBytes = int64_t{1} << 30;  // the copy that measures the bandwidth

// The device a check runs on: its stream, a flush buffer larger than its L2, the copy bandwidth
// (1 TB/s until measured), and the scratch and output buffers the check sizes.
struct CheckDevice {
  cudaStream_t stream = nullptr;
  int64_t l2_bytes = 0;
  double copy_tbps = 1.0;
  DeviceBuffer flush, scratch, out;

  // The current device, with a stream of its own; prints its name, SMs and L2.
  void open() {
    int device = 0;
    DSINFER_CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp props{};
    DSINFER_CUDA_CHECK(cudaGetDeviceProperties(&props, device));
    DSINFER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    l2_bytes = props.l2CacheSize;
    flush = DeviceBuffer(std::max<size_t>(4 * static_cast<size_t>(l2_bytes), size_t{256} << 20));
    std::printf("%s: %d SMs, L2 %lld MiB\n", props.name, props.multiProcessorCount,
                static_cast<long long>(l2_bytes >> 20));
  }
};

// Median microseconds of one call on the check's device, the L2 flushed before each.
inline double time_us(const CheckDevice& d, int runs, const std::function<void()>& call) {
  return time_us(d.stream, d.flush, runs, kCheckWarmups, call);
}

inline double measure_copy_tbps(const CheckDevice& d, int runs) {
  return copy_tbps(d.stream, d.flush, runs, kCheckWarmups, kCheckCopyBytes);
}

// Runs `call` (work queued on `stream`) captured in a CUDA graph, replayed once, and waits for it.
inline void replay_once_in_graph(cudaStream_t stream, const std::function<void()>& call) {
  cudaGraph_t graph = nullptr;
  DSINFER_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  try {
    call();
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  DSINFER_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  DSINFER_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  DSINFER_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream));
  DSINFER_CUDA_CHECK(cudaGraphExecDestroy(exec));
  DSINFER_CUDA_CHECK(cudaGraphDestroy(graph));
}

// The first `count` bf16 values of d.out after `call` (eager, or captured in a CUDA graph and
// replayed once), d.out first filled with NaN so that a value never written shows.
inline std::vector<uint16_t> bf16_output(CheckDevice& d, int64_t count, const std::function<void()>& call,
                                         bool in_graph = false) {
  DSINFER_CUDA_CHECK(cudaMemsetAsync(d.out.get(), 0xff, count * sizeof(uint16_t), d.stream));
  if (in_graph) {
    DSINFER_CUDA_CHECK(cudaStreamSynchronize(d.stream));
    replay_once_in_graph(d.stream, call);
  } else {
    call();
  }
  DSINFER_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  return download<uint16_t>(d.out.get(), static_cast<size_t>(count));
}

}  // namespace dsinfer::backend::cuda
