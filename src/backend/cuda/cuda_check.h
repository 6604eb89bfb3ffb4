// Checked CUDA calls: every runtime and library call goes through one of these, so a failure
// becomes a dsinfer::Error naming the call, the file and the error, never a silent wrong result.
#pragma once

#include <cuda_runtime.h>

#include "core/error.h"

namespace dsinfer::backend::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);

}  // namespace dsinfer::backend::cuda

#define DSINFER_CUDA_CHECK(call)                                                             \
  do {                                                                                       \
    cudaError_t dsinfer_status_ = (call);                                                    \
    if (dsinfer_status_ != cudaSuccess)                                                      \
      ::dsinfer::backend::cuda::throw_cuda_error(dsinfer_status_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: a bad launch configuration shows up here, not at the next sync.
#define DSINFER_CUDA_CHECK_LAUNCH() DSINFER_CUDA_CHECK(cudaGetLastError())
