// The CUDA backend's heavier op families (products, attention, MoE, sampling), each in its own
// file (cuda_linear.cc, cuda_attention.cc, cuda_moe.cc, cuda_sampling.cc), over what the backend
// shares with them: its stream, its allocator and the step's metadata.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "backend/backend.h"
#include "backend/cuda/step_metadata.h"

namespace dsinfer::backend::cuda {

class CudaContext {
 public:
  virtual ~CudaContext() = default;
  virtual cudaStream_t stream() const = 0;
  virtual Tensor allocate(DType dtype, Shape shape) = 0;
  virtual std::shared_ptr<void> allocate_bytes(size_t bytes) = 0;
  virtual StepMetadata& metadata() = 0;
  virtual int sm_count() const = 0;
  // Waits for `event`, running the backend's wait poll (Backend::set_wait_poll) meanwhile while it has work.
  virtual void wait_for(cudaEvent_t event) = 0;
};

class CudaOps {
 public:
  virtual ~CudaOps() = default;
  // x [T, K] bf16, weight [N, K] in any supported format -> [T, N] in out_dtype (bf16 or f32).
  virtual Tensor linear(const Tensor& x, const LinearWeight& weight, DType out_dtype) = 0;
  virtual Tensor grouped_linear(const Tensor& x, const Tensor& weight) = 0;
  virtual Tensor absorb_query(const Tensor& q, const Tensor& w_uk_t) = 0;
  virtual Tensor attention_expanded(const Tensor& q, const Tensor& kv, const Tensor& k_rope,
                                    const AttentionBatch& batch, float scale) = 0;
  virtual Tensor attention_absorbed(const Tensor& q, const Tensor& cache, const AttentionBatch& batch, float scale,
                                    int64_t latent_width) = 0;
  virtual Tensor moe_experts(const Tensor& x, const Routing& routing, const ExpertStack& experts) = 0;
  virtual std::unique_ptr<PendingTokens> queue_sample_tokens(Tensor& logits, const SamplingBatch& batch) = 0;
};

struct CudaOptions;
std::unique_ptr<CudaOps> make_cuda_ops(CudaContext& context, const CudaOptions& options);

}  // namespace dsinfer::backend::cuda
