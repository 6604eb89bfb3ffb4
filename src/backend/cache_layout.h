// The paged latent cache's layout, stated once for the host and the kernels. A layer's cache is
// [pages, kPageSize, row]; token j of a sequence whose pages are `pages` lives in row
// cache_slot(pages, page_size, j) = pages[j / page_size] * page_size + j % page_size.
//
// A row holds the token's latent (kv_lora_rank values) and then its rope key (qk_rope_head_dim
// values), in one of three formats, told apart by the cache tensor's dtype:
//   the compute dtype (f32 on the CPU, bf16 on the GPU): the values themselves;
//   kF8E4M3 (--kv-cache-dtype fp8): every value in e4m3, times one scale for the whole cache,
//     kFp8CacheScale (vLLM's default without calibrated scales);
//   kU8 (--kv-cache-dtype fp8_ds_mla, DeepSeek V3.2's layout): the latent in e4m3 in tiles of 128
//     values, each tile times its own f32 scale (its largest magnitude / 448), then the tiles'
//     scales, then the 64 rope values in bf16: L + 4 L / 128 + 128 bytes (656 for L = 512).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace dsinfer::backend {

inline constexpr int kPageSize = 64;  // tokens per cache page

inline constexpr float kFp8CacheScale = 1.0f;
inline constexpr int64_t kDsMlaTile = 128;  // latent values a scale covers
inline constexpr int64_t kDsMlaRope = 64;   // the bf16 rope values at the end of a row

// fp8_ds_mla: a row's bytes for a latent of `latent` values (a multiple of kDsMlaTile), and back.
DSINFER_HOST_DEVICE inline int64_t ds_mla_row_bytes(int64_t latent) {
  return latent + 4 * (latent / kDsMlaTile) + 2 * kDsMlaRope;
}
DSINFER_HOST_DEVICE inline int64_t ds_mla_latent(int64_t row_bytes) {
  return (row_bytes - 2 * kDsMlaRope) * kDsMlaTile / (kDsMlaTile + 4);
}

DSINFER_HOST_DEVICE inline int64_t cache_slot(const int32_t* pages, int64_t page_size, int64_t position) {
  return static_cast<int64_t>(pages[position / page_size]) * page_size + position % page_size;
}

}  // namespace dsinfer::backend
