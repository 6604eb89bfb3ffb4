#include "model/kv_cache.h"

namespace dsinfer::model {

LatentCache::LatentCache(backend::Backend& backend, int64_t layers, int64_t pages, int64_t width, DType dtype,
                         int64_t page_size)
    : pages_(pages), page_size_(page_size) {
  DSINFER_CHECK(layers > 0 && pages > 0 && width > 0 && page_size > 0, "latent cache: bad geometry (", layers,
                " layers, ", pages, " pages, width ", width, ")");
  layers_.reserve(layers);
  for (int64_t i = 0; i < layers; ++i) layers_.push_back(backend.empty(dtype, {pages, page_size, width}));
}

}  // namespace dsinfer::model
