// The per-step metadata of the CUDA backend: the host arrays of a StepContext, packed into pinned
// staging (two buffers, so the next step packs while the last copy may still be in flight), copied
// to the device with one cudaMemcpyAsync, and looked up by the ops that read them.
//
// Lookup is by identity: an op given an AttentionBatch, a positions vector or a rows vector that
// begin_step registered reads its device copy; anything else is uploaded on the spot (correct, but
// a synchronous copy: the model never does it on the hot path).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include <cuda_runtime.h>

#include "backend/backend.h"
#include "backend/cuda/device_memory.h"

namespace dsinfer::backend::cuda {

// An AttentionBatch on the device, with what the kernels need derived once per step.
struct DeviceAttention {
  const int32_t* positions = nullptr;         // [T]
  const int64_t* slot_mapping = nullptr;      // [T]
  const int32_t* query_start = nullptr;       // [B + 1]
  const int32_t* context_lens = nullptr;      // [B]
  const int32_t* page_table_start = nullptr;  // [B + 1]
  const int32_t* page_ids = nullptr;
  const int32_t* token_sequence = nullptr;    // [T] the sequence of each token row
  const int32_t* context_start = nullptr;     // [B + 1] prefix sums of context_lens (gathered rows)
  int num_tokens = 0;
  int num_sequences = 0;
  int64_t total_context = 0;  // sum of context_lens
  int max_context = 0;
  int max_query_len = 0;
  int page_size = kPageSize;
};

class StepMetadata {
 public:
  StepMetadata(std::shared_ptr<DeviceAllocator> allocator, cudaStream_t stream);
  ~StepMetadata();

  // Packs and uploads everything `step` names; earlier registrations end.
  void upload(const StepContext& step);
  // Where the last upload put each array on the device. Two steps with equal layouts can share a
  // CUDA graph: the arrays of a step's batches of the same sizes land at the same addresses, with
  // the page ids (whose count varies with the contexts) after them, and the logit rows last. The
  // logit rows are left out of the layout: a decode graph's step is padded to its bucket but its
  // head runs eagerly over the real rows, whose count varies within a bucket, so a captured graph
  // must never read them.
  const std::vector<uintptr_t>& layout() const { return layout_; }
  // While a graph is captured, an op must not upload anything on the spot (that would synchronize).
  void set_capturing(bool capturing) { capturing_ = capturing; }
  bool capturing() const { return capturing_; }

  // The device copy of a registered batch, or of `batch` uploaded now.
  const DeviceAttention& attention(const AttentionBatch& batch);
  // The device copy of a registered host int32 array (token ids, logit rows, positions), or null.
  const int32_t* find(const void* host) const;
  // A host int32 array on the device: the registered copy, or one uploaded now (kept until the
  // next upload).
  const int32_t* int32_array(const int32_t* host, size_t count);

 private:
  struct Pending;
  void pack(const StepContext& step);

  std::shared_ptr<DeviceAllocator> allocator_;
  cudaStream_t stream_;
  PinnedBuffer staging_[2];
  cudaEvent_t staged_[2] = {nullptr, nullptr};  // the copy out of staging_[i] has finished
  int next_staging_ = 0;
  std::shared_ptr<void> device_;
  size_t device_bytes_ = 0;
  std::vector<uintptr_t> layout_;
  bool capturing_ = false;
  std::unordered_map<const void*, const int32_t*> arrays_;
  std::unordered_map<const AttentionBatch*, DeviceAttention> batches_;
  std::vector<std::shared_ptr<void>> extra_;  // unregistered uploads of this step
  std::deque<DeviceAttention> extra_batches_;
};

}  // namespace dsinfer::backend::cuda
