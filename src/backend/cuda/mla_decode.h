// Absorbed MLA attention over the paged latent cache, on the GPU: decode steps and the verification
// of a few draft tokens. The CUDA form of cpu::attention_absorbed (backend/cpu/attention.cc).
//
//   out[t, h, :] = softmax_j(scale * q[t, h, :] . row_j[:L + R]) @ row_j[:L],  j = 0 .. positions[t]
//
// over the rows of token t's own sequence, found through its page table (CSR: page_table_start,
// page_ids; row j lives at slot page_ids[page_table_start[seq] + j / page_size] * page_size +
// j % page_size). L is the latent width (kv_lora_rank), R the rope width (qk_rope_head_dim); q and
// cache rows are L + R wide. Inputs and outputs are bf16; scores, softmax and sums are float32.
// The cache is bf16, or e4m3 (MlaDecodeArgs::cache_fp8: --kv-cache-dtype fp8, every value times
// kFp8CacheScale, cache_layout.h): at DeepSeek's widths the FP8 kernel (mla_decode_fp8.cu: Q and P
// in e4m3 too, FP8 wgmma for both products), at other widths the generic kernel dequantizing each
// value (f32 math, q unquantized).
//
// DeepSeek's widths (L = 512, R = 64, pages of 64) take the fast kernels below. Any other widths (the
// small test models, e.g. L = 160, R = 32) take a generic CUDA-core kernel, one warp per (token,
// head), no split and no scratch, whatever MlaDecodeKernel asks for; L + R <= 1024.
//
// Split-KV: each token's context is cut into up to `mla_decode_num_splits(...)` chunks of whole pages,
// one block per (token, head group, chunk), so that a small batch with a long context keeps the SMs
// busy; a chunk covers at least min_split_pages pages, so short contexts use fewer of the launched
// chunks (the combine costs more than it saves there). Partial results (running max, sum, unnormalised output)
// go to caller-provided scratch and a second kernel merges them. The split count is host arithmetic
// on (tokens, heads, sm_count) only, and each chunk's rows are derived on the device from the token's
// real position, so one captured CUDA graph stays right as contexts grow, and a graph replay computes
// exactly what the eager launch does (chunks past the end are empty and cost almost nothing).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cache_layout.h"

namespace dsinfer::backend::cuda {

inline constexpr int kMlaLatentDim = 512;   // kv_lora_rank: value width, first part of a cache row
inline constexpr int kMlaRopeDim = 64;      // qk_rope_head_dim: the rotated shared key after it
inline constexpr int kMlaCacheWidth = kMlaLatentDim + kMlaRopeDim;  // 576 bf16 per cache row
inline constexpr int kMlaPageSize = kPageSize;  // tokens per cache page (cache_layout.h)
inline constexpr int kMlaDecodeMaxSplits = 128;

inline constexpr int kMlaGenericMaxWidth = 1024;  // L + R limit of the generic path (32 dims a lane)

enum class MlaDecodeKernel : uint8_t {
  kSimple,      // CUDA cores, one warp per (token, head): the reference
  kTensorCore,  // mma.sync bf16, 16..64 heads per block as the M dimension
  kWgmma,       // Hopper wgmma + TMA, 64 heads per block (mla_decode_wgmma.h), any H (fewer than 64
                // heads in a block pad the MMA rows). Same splits and scratch as kTensorCore.
                // Over an FP8 cache every kernel but kSimple means the FP8 wgmma kernel
                // (mla_decode_fp8.h); kSimple means the generic kernel, dequantizing (the reference).
};

// True when (latent_dim, rope_dim) are DeepSeek's 512 / 64, the widths the fast kernels are built for.
constexpr bool mla_decode_fast_widths(int latent_dim, int rope_dim) {
  return latent_dim == kMlaLatentDim && rope_dim == kMlaRopeDim;
}

struct MlaDecodeArgs {
  const __nv_bfloat16* q = nullptr;         // [tokens, heads, L + R]: absorbed q_nope (L) then q_rope (R)
  const __nv_bfloat16* cache = nullptr;     // [num_pages, page_size, L + R] bf16; or null with:
  const uint8_t* cache_fp8 = nullptr;       // [num_pages, page_size, L + R] e4m3 (times kFp8CacheScale)
  const int32_t* token_sequence = nullptr;  // [tokens] sequence index of each token (into page_table_start)
  const int32_t* positions = nullptr;       // [tokens] the token sees its sequence's rows 0..position
  const int32_t* page_table_start = nullptr;  // [B + 1]
  const int32_t* page_ids = nullptr;          // [page_table_start[B]]
  __nv_bfloat16* out = nullptr;             // [tokens, heads, L]
  int tokens = 0;
  int heads = 0;            // any H >= 1 (128 for DeepSeek-V3 without attention TP)
  int latent_dim = kMlaLatentDim;  // L (kv_lora_rank): value and output width, first part of a row
  int rope_dim = kMlaRopeDim;      // R (qk_rope_head_dim): the rotated shared key after it
  int page_size = kMlaPageSize;  // 64 at DeepSeek's widths (passed so a mismatch fails loudly); the
                                 // generic path takes any page size >= 1
  int sm_count = 0;         // multiprocessors of the device (cudaDevAttrMultiProcessorCount)
  float scale = 1.0f;       // softmax scale (with YaRN mscale)
  // Fewest pages a context chunk covers. A one-page chunk spends much of its time on the block's
  // fixed cost (q load, pipeline fill), while every extra chunk costs the combine H * 512 * 4 bytes
  // written and read again; see CudaOptions::mla_min_split_pages for the measured choice.
  int min_split_pages = 2;
  void* scratch = nullptr;  // >= mla_decode_scratch_bytes(tokens or more, heads, sm_count, latent_dim,
                            //    rope_dim)
  size_t scratch_bytes = 0;
};

// Context chunks per token for this shape at DeepSeek's widths (>= 1, <= kMlaDecodeMaxSplits). Pure
// host arithmetic. (The generic path never splits.)
int mla_decode_num_splits(int tokens, int heads, int sm_count);

// Scratch bytes a launch needs for any tokens in 1..max_tokens with these heads, sm_count and widths
// (0 when no shape in that range splits, and always 0 for non-DeepSeek widths). Allocate once, up front.
size_t mla_decode_scratch_bytes(int max_tokens, int heads, int sm_count, int latent_dim = kMlaLatentDim,
                                int rope_dim = kMlaRopeDim);

// Enqueues the attention (and, when split, the merge) on `stream`; `kernel` chooses among the
// kernels at DeepSeek's widths and is ignored at other widths. Never allocates, synchronizes or
// reads device memory on the host: graph-capturable. Throws dsinfer::Error on bad arguments or a
// failed launch. A token with position < 0 (a padding row) gets a zero output; rows past the end of
// a sequence's page table are never read (the caller guarantees enough pages, as the CPU op checks).
void mla_decode(const MlaDecodeArgs& args, MlaDecodeKernel kernel, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
