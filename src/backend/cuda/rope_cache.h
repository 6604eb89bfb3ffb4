// Rotary embedding in place, and the paged latent cache's writes and gathers (MLA), on the GPU.
// bf16 activations and cache, float32 rotary tables and math. Launchers queue one kernel on
// `stream` and return: no allocation, no synchronisation. Sizes and strides in elements; an empty
// problem launches nothing. Device-side indices (positions, slots, page ids) are trusted: the
// caller validates them on the host.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace dsinfer::backend::cuda {

// Rotates dims [begin, begin + rope_dim) of every group of x [tokens, groups, group_dim] in place,
// element (t, g, d) at x[t * token_stride + g * group_dim + d] (token_stride >= groups * group_dim,
// so a column slice of a wider matrix works: k_rope inside kv_a is x = kv_a + 512, groups 1,
// group_dim 64, token_stride 576). For i < half = rope_dim / 2, with p = positions[t] in
// [0, max_positions), c = cos_table[p, i], s = sin_table[p, i], and the pair (a, b) = (2i, 2i + 1)
// when interleaved (DeepSeek) else (i, i + half):
//   x[a] = x[a] * c - x[b] * s,  x[b] = x[b] * c + x[a] * s  (old values on the right; float math).
// cos_table, sin_table [max_positions, half] f32 (backend::RopeTable); positions [tokens] int32.
void rope_inplace(__nv_bfloat16* x, int64_t tokens, int64_t groups, int64_t group_dim, int64_t token_stride,
                  int64_t begin, int64_t rope_dim, const int32_t* positions, const float* cos_table,
                  const float* sin_table, bool interleaved, cudaStream_t stream);

// cache[slot_mapping[t], :] = latent[t, :] for t < tokens.
// latent [tokens, width] bf16 with rows latent_row_stride apart (may read straight from a wider
// projection output); cache [num_slots, width] bf16 contiguous (a [pages, page_size, width] cache
// viewed flat); slot_mapping [tokens] int64, each in [0, num_slots) or negative to skip the row
// (a padding row). Rows sharing a slot (padding rows aimed at one scratch slot) leave that slot
// with unspecified contents.
void write_cache(const __nv_bfloat16* latent, int64_t latent_row_stride, const int64_t* slot_mapping,
                 __nv_bfloat16* cache, int64_t tokens, int64_t width, cudaStream_t stream);

// The same write with the cache row assembled from two sources in one pass (no concat):
//   cache[slot, 0 : latent_width]                         = latent[t, :]  (the normed latent, 512)
//   cache[slot, latent_width : latent_width + rope_width] = k_rope[t, :]  (the rotated key, 64)
// Cache rows are latent_width + rope_width wide; latent and k_rope rows are their strides apart.
void write_cache_split(const __nv_bfloat16* latent, int64_t latent_row_stride, int64_t latent_width,
                       const __nv_bfloat16* k_rope, int64_t k_rope_row_stride, int64_t rope_width,
                       const int64_t* slot_mapping, __nv_bfloat16* cache, int64_t tokens, cudaStream_t stream);

// MLA's cache row straight from the kv_a projection (Backend::write_latent_cache), one launch:
//   cache[slot_mapping[t], 0 : latent]            = rms_norm(kv_a[t, 0 : latent]) * norm_weight
//   cache[slot_mapping[t], latent : latent + rope] = rope(kv_a[t, latent : latent + rope], positions[t])
// with rms_norm's and rope_inplace's arithmetic (the same roundings). kv_a [tokens, latent + rope] bf16
// contiguous; norm_weight [latent] f32; cos/sin tables [max_positions, rope / 2] f32; slot_mapping as
// write_cache's (negative: skip the row). Launch: one warp per token with 16-byte accesses (V3's
// shapes: interleaved, latent and rope multiples of 8, latent <= 1024, aligned pointers), else one
// 128-thread block per token. Bytes: 2 (latent + rope) read and written per token, nothing more: the
// latency of one launch instead of six.
void write_latent_cache(const __nv_bfloat16* kv_a, int64_t tokens, int64_t latent, int64_t rope,
                        const float* norm_weight, float eps, const int32_t* positions, const float* cos_table,
                        const float* sin_table, bool interleaved, const int64_t* slot_mapping, __nv_bfloat16* cache,
                        cudaStream_t stream);

// The FP8 cache (cache_layout.h: e4m3 times kFp8CacheScale; what --kv-cache-dtype fp8 allocates):
// the same writes with each value rounded to e4m3 as the CPU backend does (value / kFp8CacheScale,
// nearest even, saturating at +-448): write_latent_cache_fp8 from the f32 norm and rope results,
// write_cache_fp8 from the bf16 latent. cache [num_slots, width] e4m3 bytes; the rest as above.
void write_latent_cache_fp8(const __nv_bfloat16* kv_a, int64_t tokens, int64_t latent, int64_t rope,
                            const float* norm_weight, float eps, const int32_t* positions, const float* cos_table,
                            const float* sin_table, bool interleaved, const int64_t* slot_mapping, uint8_t* cache,
                            cudaStream_t stream);
void write_cache_fp8(const __nv_bfloat16* latent, int64_t latent_row_stride, const int64_t* slot_mapping,
                     uint8_t* cache, int64_t tokens, int64_t width, cudaStream_t stream);

// Every sequence's cached rows in order: out[out_row_start[b] + j, :] = cache[slot(b, j), :] for
// j < context_lens[b], slot(b, j) = page_ids[page_table_start[b] + j / page_size] * page_size +
// j % page_size (the slot formula of the CPU backend).
// cache [num_slots, width] bf16; page_table_start [num_sequences + 1], page_ids [...], context_lens
// [num_sequences], out_row_start [num_sequences + 1] (prefix sums of context_lens) int32, all on the
// device; out [out_row_start[num_sequences], width] bf16. max_context_len (host) is at least every
// context_lens[b]: it sizes the grid. num_sequences <= 65535.
void gather_cache(const __nv_bfloat16* cache, const int32_t* page_table_start, const int32_t* page_ids,
                  const int32_t* context_lens, const int32_t* out_row_start, __nv_bfloat16* out, int num_sequences,
                  int max_context_len, int page_size, int64_t width, cudaStream_t stream);

// The same gather from an FP8 cache, dequantized to bf16 (exact: every e4m3 value times a power-of-two
// scale is a bf16 value).
void gather_cache_fp8(const uint8_t* cache, const int32_t* page_table_start, const int32_t* page_ids,
                      const int32_t* context_lens, const int32_t* out_row_start, __nv_bfloat16* out, int num_sequences,
                      int max_context_len, int page_size, int64_t width, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
