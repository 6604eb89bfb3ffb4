// Backend::sample_tokens and queue_sample_tokens on the GPU: uploads a SamplingBatch (pinned staging,
// one copy), queues the sampling kernels (sampling.h) and one copy of the tokens and logprobs to
// pinned host memory. The sampled tokens stay on the device for the next step's placeholders.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/device_memory.h"

namespace dsinfer::backend::cuda {

class SamplingOp {
 public:
  explicit SamplingOp(CudaContext& context);
  ~SamplingOp();
  SamplingOp(const SamplingOp&) = delete;
  SamplingOp& operator=(const SamplingOp&) = delete;

  // logits [B, V] f32 on the device (overwritten by the penalties). Returns once the work is queued.
  // Two handles may be outstanding: queueing a third reuses the pinned buffers of the first, after
  // waiting for its copies, and that handle's wait() then throws.
  std::unique_ptr<PendingTokens> queue(Tensor& logits, const SamplingBatch& batch);

  // Pinned buffers and the event that says when the device is done with them; `generation` counts
  // reuses, so that a handle can tell its buffers were taken.
  struct Slot {
    PinnedBuffer upload, download;
    cudaEvent_t done = nullptr;
    uint64_t generation = 0;
  };

 private:
  CudaContext& context_;
  Slot slots_[2];
  int next_ = 0;
};

}  // namespace dsinfer::backend::cuda
