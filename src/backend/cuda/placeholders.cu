// See placeholders.h.
#include "backend/cuda/placeholders.h"

#include "backend/cuda/cuda_check.h"

namespace dsinfer::backend::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void resolve_placeholders_kernel(int32_t* ids, int64_t tokens, const int32_t* previous) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (t >= tokens) return;
  const int32_t id = ids[t];
  if (id < 0) ids[t] = previous[-static_cast<int64_t>(id) - 1];
}

}  // namespace

void resolve_placeholders(int32_t* ids, int64_t tokens, const int32_t* previous, cudaStream_t stream) {
  if (tokens <= 0) return;
  const auto blocks = static_cast<unsigned>((tokens + kThreads - 1) / kThreads);
  resolve_placeholders_kernel<<<blocks, kThreads, 0, stream>>>(ids, tokens, previous);
  DSINFER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dsinfer::backend::cuda
