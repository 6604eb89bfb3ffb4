// Private to the MLA decode kernels (mla_decode.cu, mla_decode_wgmma.cu, mla_decode_fp8.cu): the kernel parameters and
// the split-KV arithmetic they share, so that every fast kernel cuts a context into the same chunks
// and leaves the same partial results for the one combine kernel (results are interchangeable).
// Include from .cu files only.
//
// Scratch (splits > 1): partial_out float [T, splits, H, 512] then partial_stats float2 [T, splits, H]
// (running max in log2 units, sum of exponentials). An empty chunk writes stats (-inf, 0) only.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/mla_decode.h"

namespace dsinfer::backend::cuda {

// Everything the DeepSeek-width kernels and the combine read, by value (kernel parameters).
struct MlaDecodeParams {
  const __nv_bfloat16* q;               // [T, H, 576]
  const __nv_bfloat16* cache;           // [pages, 64, 576] bf16 (the BF16 kernels)
  const uint8_t* cache_fp8;             // [pages, 64, 576] e4m3 (the FP8 kernel)
  const int32_t* token_sequence;        // [T]
  const int32_t* positions;             // [T]
  const int32_t* page_table_start;      // [B + 1]
  const int32_t* page_ids;
  __nv_bfloat16* out;                   // [T, H, 512]
  float* partial_out;     // [T, splits, H, 512]   (splits > 1)
  float2* partial_stats;  // [T, splits, H]        (splits > 1)
  int heads;
  int num_splits;
  int min_split_pages;    // fewest pages a chunk covers (MlaDecodeArgs::min_split_pages)
  float scale_log2;       // scale * log2(e): scores are kept in log2 units, exp2f throughout
};

// The rows [begin, end) of a token's context handled by one chunk: whole pages, evenly shared but at
// least min_split_pages a chunk, so the layout depends only on the token's own length and the split
// count (chunks past the end are empty: a short context uses fewer of the launched splits).
struct MlaRowRange {
  int begin;
  int end;
  __device__ bool empty() const { return begin >= end; }
};

__device__ inline MlaRowRange mla_split_rows(int kv_len, int split, int num_splits, int min_split_pages) {
  if (kv_len <= 0) return {0, 0};
  const int pages = (kv_len + kMlaPageSize - 1) / kMlaPageSize;
  const int pages_per_split = max((pages + num_splits - 1) / num_splits, min_split_pages);
  const int begin = split * pages_per_split * kMlaPageSize;
  const int end = min(begin + pages_per_split * kMlaPageSize, kv_len);
  return {begin, end};
}

// Rows token t attends to: 0..position, never past its sequence's page table (a bad position must
// not read a page id that is not there).
__device__ inline int mla_visible_rows(const MlaDecodeParams& p, int t, int sequence) {
  const int pages = p.page_table_start[sequence + 1] - p.page_table_start[sequence];
  return min(p.positions[t] + 1, pages * kMlaPageSize);
}

// Row of (token, chunk, head) in partial_out (times 512) and partial_stats.
__device__ inline size_t mla_partial_index(int t, int split, int head, const MlaDecodeParams& p) {
  return (static_cast<size_t>(t) * p.num_splits + split) * p.heads + head;
}

// A chunk with no rows: the final output is zero when unsplit (only a padding token gets here);
// otherwise stats (-inf, 0), which the combine skips. Called by the lanes of one warp for one head.
__device__ inline void mla_finish_empty(const MlaDecodeParams& p, int t, int split, int head, int lane) {
  if (p.num_splits == 1) {
    __nv_bfloat162* out =
        reinterpret_cast<__nv_bfloat162*>(p.out + (static_cast<size_t>(t) * p.heads + head) * kMlaLatentDim);
    for (int i = lane; i < kMlaLatentDim / 2; i += 32) out[i] = __floats2bfloat162_rn(0.f, 0.f);
  } else if (lane == 0) {
    p.partial_stats[mla_partial_index(t, split, head, p)] = make_float2(-INFINITY, 0.f);
  }
}

}  // namespace dsinfer::backend::cuda
