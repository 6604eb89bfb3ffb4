// What the standalone kernel checks (moe_fp8_rows_check, moe_w4a8_rows_check) share: device buffers
// that free themselves, copies to and from them, and the hash their random inputs are drawn from.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
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

}  // namespace dsinfer::backend::cuda
