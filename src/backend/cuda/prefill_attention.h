// Expanded (prefill) MLA attention on the GPU, ragged and causal by position: the CUDA form of
// cpu::attention_expanded (backend/cpu/attention.cc).
//
//   score(t, h, j) = scale * (q[t, h, :N] . kv[kv_start[b] + j, h, :N] + q[t, h, N:] . k_rope[kv_start[b] + j])
//   out[t, h, :]   = softmax_j(score) @ kv[kv_start[b] + j, h, N:],   j = 0 .. positions[t]
//
// for token t of sequence b (query_start[b] <= t < query_start[b + 1]); kv and k_rope hold every
// sequence's whole context in position order (kv_b_proj of the gathered latents). N is the nope
// width (qk_nope_head_dim), R the rope width (qk_rope_head_dim), V the value width (v_head_dim).
// Inputs and outputs are bf16; scores, softmax and sums are float32. No scratch.
//
// DeepSeek's widths (N = 128, R = 64, V = 128) take the two kernels below. Any other widths (the
// small test models, e.g. 64 / 32 / 48) take a generic CUDA-core kernel, one warp per (token, head),
// whatever PrefillAttentionKernel asks for; N + R <= 1024 and V <= 1024.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace dsinfer::backend::cuda {

inline constexpr int kPrefillNopeDim = 128;   // qk_nope_head_dim
inline constexpr int kPrefillRopeDim = 64;    // qk_rope_head_dim (one shared rotated key per row)
inline constexpr int kPrefillValueDim = 128;  // v_head_dim
inline constexpr int kPrefillGenericMaxWidth = 1024;  // N + R and V limit of the generic path (32 a lane)

// True when (nope, rope, value) are DeepSeek's 128 / 64 / 128, the widths kSimple and kFlash are built for.
constexpr bool prefill_attention_fast_widths(int nope_dim, int rope_dim, int value_dim) {
  return nope_dim == kPrefillNopeDim && rope_dim == kPrefillRopeDim && value_dim == kPrefillValueDim;
}

enum class PrefillAttentionKernel : uint8_t {
  kSimple,  // CUDA cores, one warp per (token, head): the reference (slow)
  kFlash,   // mma.sync bf16, 64 queries x 64 keys tiles, online softmax
  kWgmma,   // Hopper wgmma + TMA, 128 queries x 128 keys (prefill_attention_wgmma.h); needs kv_rows,
            // else kFlash
};

struct PrefillAttentionArgs {
  const __nv_bfloat16* q = nullptr;       // [tokens, heads, N + R]: q_nope (N) then rotated q_rope (R)
  const __nv_bfloat16* kv = nullptr;      // [kv_rows, heads, N + V]: per head k_nope (N) then v (V)
  const __nv_bfloat16* k_rope = nullptr;  // [kv_rows, R], shared by all heads
  const int32_t* query_start = nullptr;   // [B + 1] token rows of each sequence; query_start[B] = tokens
  const int32_t* kv_start = nullptr;      // [B + 1] kv/k_rope rows of each sequence (its context)
  const int32_t* positions = nullptr;     // [tokens] token t sees its sequence's kv rows 0..positions[t]
  __nv_bfloat16* out = nullptr;           // [tokens, heads, V]
  int tokens = 0;
  int heads = 0;          // >= 1
  int num_sequences = 0;  // B
  int kv_rows = 0;        // rows of kv and k_rope (S); 0: unknown (kWgmma then runs kFlash)
  int nope_dim = kPrefillNopeDim;    // N (qk_nope_head_dim)
  int rope_dim = kPrefillRopeDim;    // R (qk_rope_head_dim)
  int value_dim = kPrefillValueDim;  // V (v_head_dim)
  float scale = 1.0f;     // softmax scale (with YaRN mscale)
};

// Enqueues the attention on `stream`; `kernel` chooses between the two kernels at DeepSeek's widths
// and is ignored at other widths. Never allocates, synchronizes or reads device memory on the host.
// Positions must lie in 0 .. context - 1 of their sequence (the caller checks, as the CPU op does);
// the kernels clamp a larger one to the context and give a negative one a zero output.
// Throws dsinfer::Error on bad arguments or a failed launch.
void prefill_attention(const PrefillAttentionArgs& args, PrefillAttentionKernel kernel, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
