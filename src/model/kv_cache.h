// The memory of the paged latent cache: one [pages, page_size, kv_lora_rank + rope_dim] tensor per
// attention layer (the MTP modules' layers included). Which page belongs to which sequence is the
// runtime's business (runtime/); this class only holds the bytes.
#pragma once

#include <vector>

#include "backend/backend.h"

namespace dsinfer::model {

inline constexpr int kPageSize = backend::kPageSize;  // tokens per page

class LatentCache {
 public:
  // dtype: the backend's compute dtype (f32 on the CPU, bf16 on the GPU); FP8 is the next step.
  LatentCache(backend::Backend& backend, int64_t layers, int64_t pages, int64_t width, DType dtype,
              int64_t page_size = kPageSize);

  Tensor& layer(int64_t index) { return layers_.at(index); }
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  int64_t num_pages() const { return pages_; }
  int64_t page_size() const { return page_size_; }

 private:
  std::vector<Tensor> layers_;
  int64_t pages_;
  int64_t page_size_;
};

}  // namespace dsinfer::model
