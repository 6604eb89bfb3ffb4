// The CUDA backend: the op interface on one Hopper GPU (sm_90a).
//
// Activations are bf16 with float32 accumulation inside every op (compute_dtype() is kBF16); the
// router's logits and weights and the sampler's logits are float32. Every op is queued on the
// backend's one stream and returns without waiting; to_host, synchronize and sample_tokens wait.
// Device memory comes from a caching allocator (device_memory.h) and the per-step metadata from one
// upload per forward pass (step_metadata.h).
#pragma once

#include <cstddef>
#include <memory>

#include "backend/backend.h"

namespace dsinfer::backend::cuda {

struct CudaOptions {
  int device = 0;
  // The obviously-correct reference kernels instead of the fast ones (attention on CUDA cores,
  // every product through our own fallback GEMM): what the fast ones are tested against.
  bool reference_kernels = false;
};

// What the device is and what it holds, for start-up reports and the memory plan.
struct CudaDeviceInfo {
  std::string name;
  int multiprocessors = 0;
  size_t total_bytes = 0;
  size_t free_bytes = 0;
};
CudaDeviceInfo device_info(int device = 0);
// Number of CUDA devices (0 when there is no GPU or no driver).
int device_count();

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options = {});

}  // namespace dsinfer::backend::cuda
