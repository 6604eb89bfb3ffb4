// The paged latent cache's layout, stated once for the host and the kernels. A layer's cache is
// [pages, kPageSize, width]; token j of a sequence whose pages are `pages` lives in row
// cache_slot(pages, page_size, j) = pages[j / page_size] * page_size + j % page_size.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace dsinfer::backend {

inline constexpr int kPageSize = 64;  // tokens per cache page

DSINFER_HOST_DEVICE inline int64_t cache_slot(const int32_t* pages, int64_t page_size, int64_t position) {
  return static_cast<int64_t>(pages[position / page_size]) * page_size + position % page_size;
}

}  // namespace dsinfer::backend
