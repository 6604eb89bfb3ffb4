// Backend::fill_uniform on the GPU: the values of backend/cpu/random_fill.h, computed in place.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace dsinfer::backend::cuda {

// data: n elements of dtype (kF32, kBF16 or kF8E4M3) on the device.
void fill_uniform(void* data, DType dtype, int64_t n, uint64_t seed, float low, float high, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
