#include "model/kv_cache.h"

namespace dsinfer::model {

CacheFormat parse_cache_format(std::string_view name) {
  if (name == "auto" || name == "bfloat16") return CacheFormat::kCompute;
  if (name == "fp8" || name == "fp8_e4m3") return CacheFormat::kFp8;
  if (name == "fp8_ds_mla") return CacheFormat::kFp8DsMla;
  throw Error(str_cat("--kv-cache-dtype ", name, " is not known: auto (or bfloat16) for the compute dtype, fp8 (or ",
                      "fp8_e4m3) for e4m3 rows, fp8_ds_mla for DeepSeek V3.2's 656-byte rows"));
}

std::string_view cache_format_name(CacheFormat format) {
  switch (format) {
    case CacheFormat::kFp8:
      return "fp8";
    case CacheFormat::kFp8DsMla:
      return "fp8_ds_mla";
    default:
      return "auto";
  }
}

LatentCache::LatentCache(backend::Backend& backend, int64_t layers, int64_t pages, int64_t width, DType dtype,
                         int64_t page_size)
    : pages_(pages), page_size_(page_size) {
  DSINFER_CHECK(layers > 0 && pages > 0 && width > 0 && page_size > 0, "latent cache: bad geometry (", layers,
                " layers, ", pages, " pages, width ", width, ")");
  layers_.reserve(layers);
  for (int64_t i = 0; i < layers; ++i) layers_.push_back(backend.empty(dtype, {pages, page_size, width}));
}

}  // namespace dsinfer::model
