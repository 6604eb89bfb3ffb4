// The memory of the paged latent cache: one [pages, page_size, kv_lora_rank + rope_dim] tensor per
// attention layer (the MTP modules' layers included). Which page belongs to which sequence is the
// runtime's business (runtime/); this class only holds the bytes.
#pragma once

#include <string_view>
#include <vector>

#include "backend/backend.h"

namespace dsinfer::model {

inline constexpr int kPageSize = backend::kPageSize;  // tokens per page

// How the cache stores a token's row (backend/cache_layout.h): the compute dtype; every value in
// e4m3 with one scale (--kv-cache-dtype fp8); DeepSeek V3.2's 656-byte rows (fp8_ds_mla).
enum class CacheFormat : uint8_t { kCompute, kFp8, kFp8DsMla };
// --kv-cache-dtype's values (vLLM's spellings): auto and bfloat16 (the compute dtype, bf16 on the
// GPU), fp8 and fp8_e4m3, fp8_ds_mla. Throws dsinfer::Error naming them for anything else.
CacheFormat parse_cache_format(std::string_view name);
std::string_view cache_format_name(CacheFormat format);  // auto, fp8 or fp8_ds_mla

class LatentCache {
 public:
  // dtype and width: a row's (DeepseekModel::cache_dtype and cache_row).
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
