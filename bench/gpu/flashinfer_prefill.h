// kernels_bench's anchor for prefill attention (issue 8: ">= 1.0x FlashInfer's sm90 prefill in the
// same run"): FlashInfer's Hopper (FA3-style) batch prefill over a ragged KV, called through its
// header-only include/ (tools/setup_flashinfer.sh unpacks the pinned wheel into .deps/flashinfer).
// Built only when CMake finds those headers (DSINFER_HAVE_FLASHINFER); sm_90a only.
//
// One configuration, DeepSeek-V3's prefill: bf16 q/k/v/o, 128-query x 128-key tiles, causal,
// head_dim_qk 192 (128 nope + 64 rope), head_dim_vo 128, as many KV heads as query heads, no sliding
// window, soft cap or ALiBi, no LSE output.
//
//   q   [tokens, heads, 192]    k [kv_rows, heads, 192]    v [kv_rows, heads, 128]
//   out [tokens, heads, 128]
//   out[t, h] = softmax_j(scale * q[t, h] . k[kv_start[b] + j, h]) @ v[kv_start[b] + j, h]
//
// for token t of sequence b, j = 0 .. kv_len_b - qo_len_b + (t - query_start[b]): FlashInfer's causal
// mask aligns the queries with the END of their sequence's KV rows, so a chunk of n queries on top
// of p cached rows (kv_len = p + n) sees rows 0 .. p + i for its i-th query, as our positions do.
//
// Use: flashinfer_prefill_build_kv once (our kv + shared k_rope into FlashInfer's K and V), then
// flashinfer_prefill_plan once (host scheduling, copied into the caller's scratch; synchronizes),
// then flashinfer_prefill as often as wanted (launch only: no allocation, copy or sync).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dsinfer::bench {

inline constexpr int kFlashInferHeadDimQk = 192;  // 128 nope + 64 rope
inline constexpr int kFlashInferHeadDimVo = 128;
inline constexpr int kFlashInferNope = 128;
inline constexpr int kFlashInferRope = 64;

// FlashInfer's K and V from our MLA layout, by stream-ordered 2D copies (no kernel):
//   k[r, h, :128] = kv[r, h, :128], k[r, h, 128:] = k_rope[r, :]   (the rope key broadcast per head)
//   v[r, h, :]    = kv[r, h, 128:]
// kv [kv_rows, heads, 256], k_rope [kv_rows, 64], k [kv_rows, heads, 192], v [kv_rows, heads, 128].
// Enqueues 2 + heads copies on `stream`; throws dsinfer::Error on bad sizes or a failed copy.
void flashinfer_prefill_build_kv(const __nv_bfloat16* kv, const __nv_bfloat16* k_rope, int kv_rows, int heads,
                                 __nv_bfloat16* k, __nv_bfloat16* v, cudaStream_t stream);

// Bytes of device scratch flashinfer_prefill_plan needs for its work schedule (an upper bound: 7
// int32 per (query tile, head) work item plus one per SM of the current device, aligned).
size_t flashinfer_prefill_scratch_bytes(int tokens, int num_sequences, int heads);

// The schedule FlashInfer's plan wrote into the caller's scratch: byte offsets of its int32 arrays.
struct FlashInferPrefillPlan {
  void* scratch = nullptr;  // device, as given to flashinfer_prefill_plan; must outlive the runs
  int64_t qo_tile_indices = 0, qo_indptr = 0, kv_indptr = 0, qo_lens = 0, kv_lens = 0, head_indices = 0,
          work_indptr = 0, batch_indices = 0;
  int tokens = 0, kv_rows = 0, heads = 0, num_sequences = 0;
};

// FlashInfer's host plan (PrefillSM90Plan: query tiles of 128 spread over the SMs by cost) for the
// ragged batch query_start / kv_start ([num_sequences + 1] each, host, starting at 0; query_start's
// last entry is tokens, kv_start's kv_rows; each sequence has kv_len >= qo_len). Copies the schedule
// into `scratch` (device, flashinfer_prefill_scratch_bytes bytes, 16-byte aligned) on `stream` and
// synchronizes it. Throws dsinfer::Error with FlashInfer's message when it rejects the batch.
FlashInferPrefillPlan flashinfer_prefill_plan(const int32_t* query_start, const int32_t* kv_start, int num_sequences,
                                              int heads, void* scratch, size_t scratch_bytes, cudaStream_t stream);

struct FlashInferPrefillArgs {
  const __nv_bfloat16* q = nullptr;  // [tokens, heads, 192], 16-byte aligned (TMA)
  const __nv_bfloat16* k = nullptr;  // [kv_rows, heads, 192]
  const __nv_bfloat16* v = nullptr;  // [kv_rows, heads, 128]
  __nv_bfloat16* out = nullptr;      // [tokens, heads, 128]
  float scale = 1.0f;                // softmax scale
};

// Launches FlashInfer's sm90 ragged causal prefill on `stream` with `plan`'s schedule (a persistent
// grid of one CTA per SM, 3 warpgroups). Host work: the TMA descriptors and one attribute set; no
// allocation, copy or synchronization. Throws dsinfer::Error naming the CUDA error when the launch
// fails (e.g. not an sm_90 GPU).
void flashinfer_prefill(const FlashInferPrefillPlan& plan, const FlashInferPrefillArgs& args, cudaStream_t stream);

}  // namespace dsinfer::bench
