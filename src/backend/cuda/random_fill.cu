// fill_uniform: element i = uniform_at(seed, i, low, high) in the tensor's dtype.
// Memory-bound write of n * dtype_size bytes; a grid-stride loop, 256 threads a block.
#include "backend/cuda/random_fill.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "backend/cpu/random_fill.h"
#include "backend/cuda/cuda_check.h"

namespace dsinfer::backend::cuda {
namespace {

template <typename T>
__device__ T narrow(float value);
template <>
__device__ float narrow<float>(float value) { return value; }
template <>
__device__ __nv_bfloat16 narrow<__nv_bfloat16>(float value) { return __float2bfloat16_rn(value); }
template <>
__device__ __nv_fp8_e4m3 narrow<__nv_fp8_e4m3>(float value) { return __nv_fp8_e4m3(value); }  // RNE, saturating

template <typename T>
__global__ void fill_kernel(T* data, int64_t n, uint64_t seed, float low, float high) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    data[i] = narrow<T>(uniform_at(seed, static_cast<uint64_t>(i), low, high));
}

template <typename T>
void launch(void* data, int64_t n, uint64_t seed, float low, float high, cudaStream_t stream) {
  constexpr int kThreads = 256;
  int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 132 * 16);
  fill_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(static_cast<T*>(data), n, seed, low, high);
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

void fill_uniform(void* data, DType dtype, int64_t n, uint64_t seed, float low, float high, cudaStream_t stream) {
  if (n == 0) return;
  switch (dtype) {
    case DType::kF32: launch<float>(data, n, seed, low, high, stream); break;
    case DType::kBF16: launch<__nv_bfloat16>(data, n, seed, low, high, stream); break;
    case DType::kF8E4M3: launch<__nv_fp8_e4m3>(data, n, seed, low, high, stream); break;
    default: throw Error(str_cat("fill_uniform: unsupported dtype ", dtype_name(dtype)));
  }
}

}  // namespace dsinfer::backend::cuda
