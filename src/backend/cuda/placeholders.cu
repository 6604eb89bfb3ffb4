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

__global__ void map_expert_ids_kernel(int32_t* ids, int64_t entries, int64_t top_k, const int32_t* start,
                                      const int32_t* slots) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= entries) return;
  const int32_t e = ids[i];
  const int64_t t = i / top_k, j = i % top_k;
  const int32_t first = start[e], replicas = start[e + 1] - first;
  ids[i] = slots[first + (t + j) % replicas];
}

__global__ void count_expert_ids_kernel(const int32_t* ids, int64_t entries, unsigned long long* counts,
                                        int64_t experts) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= entries) return;
  const int32_t e = ids[i];
  if (e >= 0 && e < experts) atomicAdd(counts + e, 1ull);
}

}  // namespace

void count_expert_ids(const int32_t* ids, int64_t entries, unsigned long long* counts, int64_t experts,
                      cudaStream_t stream) {
  if (entries <= 0) return;
  const auto blocks = static_cast<unsigned>((entries + kThreads - 1) / kThreads);
  count_expert_ids_kernel<<<blocks, kThreads, 0, stream>>>(ids, entries, counts, experts);
  DSINFER_CUDA_CHECK(cudaGetLastError());
}

void map_expert_ids(int32_t* ids, int64_t tokens, int64_t top_k, const int32_t* start, const int32_t* slots,
                    cudaStream_t stream) {
  const int64_t entries = tokens * top_k;
  if (entries <= 0) return;
  const auto blocks = static_cast<unsigned>((entries + kThreads - 1) / kThreads);
  map_expert_ids_kernel<<<blocks, kThreads, 0, stream>>>(ids, entries, top_k, start, slots);
  DSINFER_CUDA_CHECK(cudaGetLastError());
}

void resolve_placeholders(int32_t* ids, int64_t tokens, const int32_t* previous, cudaStream_t stream) {
  if (tokens <= 0) return;
  const auto blocks = static_cast<unsigned>((tokens + kThreads - 1) / kThreads);
  resolve_placeholders_kernel<<<blocks, kThreads, 0, stream>>>(ids, tokens, previous);
  DSINFER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dsinfer::backend::cuda
