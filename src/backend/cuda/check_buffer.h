// Device memory for the GPU check programs (mla_decode_check, mla_decode_fp8_check): one cudaMalloc,
// freed when the buffer goes out of scope, and a host vector's upload into it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "backend/cuda/cuda_check.h"

namespace dsinfer::backend::cuda {

struct DeviceBuffer {
  void* data = nullptr;
  explicit DeviceBuffer(size_t bytes) {
    if (bytes > 0) DSINFER_CUDA_CHECK(cudaMalloc(&data, bytes));
  }
  ~DeviceBuffer() {
    if (data) cudaFree(data);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

template <typename T>
void upload(DeviceBuffer& buffer, const std::vector<T>& host) {
  DSINFER_CUDA_CHECK(cudaMemcpy(buffer.data, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
}

}  // namespace dsinfer::backend::cuda
