// Glue from kernels_bench to FlashInfer's Hopper ragged prefill (flashinfer_prefill.h): our own host
// code around FlashInfer's header-only kernel (include/flashinfer/attention/hopper/prefill_sm90.cuh)
// and host plan (include/flashinfer/attention/scheduler.cuh, PrefillSM90Plan). Nothing of FlashInfer
// is copied here: its headers come from .deps/flashinfer (tools/setup_flashinfer.sh).
//
// Computes: causal ragged attention, bf16 in/out, q/k [*, heads, 192], v/o [*, heads, 128], per head
// out = softmax(scale * q k^T) v with FlashInfer's end-aligned causal mask (flashinfer_prefill.h).
// Roofline: 2 * (192 + 128) * heads FLOPs per visible (query, key) pair; bytes at least q + k + v read
// and o written, 2 bytes each (8 x 2048: 1.37 TFLOP over 2.7 GB, ~500 FLOP/B, far above H200's ~165
// ridge): compute-bound, bounded by the BF16 wgmma rate.
// Launch: FlashInfer's persistent grid, one CTA per SM, 384 threads (a producer warpgroup issuing TMA
// loads + two consumer warpgroups of wgmma), 128-query x 128-key tiles, 2 K/V stages, ~208 KiB of
// shared memory; its work list (query tile, head) per CTA comes from the plan.
//
// Exactly one instantiation, to keep this file's compile small: BatchPrefillWithRaggedKVCacheDispatched
// <192, 128, kCausal, no sliding window, per-head schedule, StandardAttention>. The plan's other
// schedule (one shared by all heads, chosen above 4096 query tiles per head, i.e. > ~0.5M tokens) is
// rejected with an error instead of instantiating a second kernel.
#include "flashinfer_prefill.h"  // bench/gpu/, next to this file

#include <flashinfer/attention/hopper/default_params.cuh>
#include <flashinfer/attention/hopper/prefill_sm90.cuh>
#include <flashinfer/attention/hopper/variants.cuh>
#include <flashinfer/attention/mask.cuh>
#include <flashinfer/attention/scheduler.cuh>

#include <cstdint>
#include <exception>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace dsinfer::bench {
namespace {

using bf16 = __nv_bfloat16;
using FiType = cutlass::bfloat16_t;  // FlashInfer's sm90 kernels take CUTLASS's bf16 (same bits)
using FiParams = flashinfer::BatchPrefillRaggedParams<FiType, FiType, FiType, int32_t>;
using FiVariant = flashinfer::StandardAttention;  // scale * q.k, online softmax, no soft cap
static_assert(sizeof(FiType) == sizeof(bf16));

constexpr int kTileQ = 128;  // PrefillSM90Plan's cta_tile_q for head_dim_vo 128; the kernel's CTA_Q

size_t align16(size_t bytes) { return (bytes + 15) / 16 * 16; }

int current_sm_count() {
  int device = 0, sms = 0;
  DSINFER_CUDA_CHECK(cudaGetDevice(&device));
  DSINFER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

bool aligned16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

}  // namespace

void flashinfer_prefill_build_kv(const bf16* kv, const bf16* k_rope, int kv_rows, int heads, bf16* k, bf16* v,
                                 cudaStream_t stream) {
  DSINFER_CHECK(kv != nullptr && k_rope != nullptr && k != nullptr && v != nullptr,
                "flashinfer_prefill_build_kv: a null pointer");
  DSINFER_CHECK(kv_rows >= 1 && heads >= 1, "flashinfer_prefill_build_kv: kv_rows ", kv_rows, " and heads ", heads,
                " must be >= 1");
  constexpr size_t kE = sizeof(bf16);
  constexpr size_t kKvWidth = kFlashInferNope + kFlashInferHeadDimVo;  // 256: k_nope then v, per head
  const size_t rows = size_t(kv_rows) * heads;                         // (row, head) pairs
  // k[., :128] = kv[., :128]: one 256-byte run per (row, head), pitches 512 (kv) and 384 (k) bytes.
  DSINFER_CUDA_CHECK(cudaMemcpy2DAsync(k, kFlashInferHeadDimQk * kE, kv, kKvWidth * kE, kFlashInferNope * kE, rows,
                                       cudaMemcpyDeviceToDevice, stream));
  // v[., :] = kv[., 128:]: 256 bytes per (row, head), pitches 512 (kv) and 256 (v) bytes.
  DSINFER_CUDA_CHECK(cudaMemcpy2DAsync(v, kFlashInferHeadDimVo * kE, kv + kFlashInferNope, kKvWidth * kE,
                                       kFlashInferHeadDimVo * kE, rows, cudaMemcpyDeviceToDevice, stream));
  // k[r, h, 128:] = k_rope[r, :] for each head h: 128 bytes per row, pitches 128 (k_rope) and
  // heads * 384 (k) bytes.
  for (int h = 0; h < heads; ++h)
    DSINFER_CUDA_CHECK(cudaMemcpy2DAsync(k + size_t(h) * kFlashInferHeadDimQk + kFlashInferNope,
                                         size_t(heads) * kFlashInferHeadDimQk * kE, k_rope, kFlashInferRope * kE,
                                         kFlashInferRope * kE, size_t(kv_rows), cudaMemcpyDeviceToDevice, stream));
}

size_t flashinfer_prefill_scratch_bytes(int tokens, int num_sequences, int heads) {
  DSINFER_CHECK(tokens >= 0 && num_sequences >= 1 && heads >= 1, "flashinfer_prefill_scratch_bytes: tokens ", tokens,
                ", num_sequences ", num_sequences, ", heads ", heads);
  // Work items per head: sum over sequences of ceil(qo_len / 128) <= ceil(tokens / 128) + sequences.
  const size_t works = (size_t(tokens + kTileQ - 1) / kTileQ + size_t(num_sequences)) * size_t(heads);
  // Seven int32 arrays of `works` entries and work_indptr[sms + 1], each 16-byte aligned, + slack.
  return 7 * align16(works * 4) + align16(size_t(current_sm_count() + 1) * 4) + 256;
}

FlashInferPrefillPlan flashinfer_prefill_plan(const int32_t* query_start, const int32_t* kv_start, int num_sequences,
                                              int heads, void* scratch, size_t scratch_bytes, cudaStream_t stream) {
  DSINFER_CHECK(query_start != nullptr && kv_start != nullptr && num_sequences >= 1 && heads >= 1,
                "flashinfer_prefill_plan: needs host query_start/kv_start and num_sequences, heads >= 1");
  DSINFER_CHECK(scratch != nullptr && aligned16(scratch), "flashinfer_prefill_plan: scratch must be a 16-byte "
                "aligned device pointer");
  DSINFER_CHECK(query_start[0] == 0 && kv_start[0] == 0, "flashinfer_prefill_plan: query_start and kv_start must "
                "start at 0");
  std::vector<int32_t> qo_indptr(query_start, query_start + num_sequences + 1),
      kv_indptr(kv_start, kv_start + num_sequences + 1), kv_lens(num_sequences);
  for (int b = 0; b < num_sequences; ++b) {
    const int32_t qo_len = qo_indptr[b + 1] - qo_indptr[b];
    kv_lens[b] = kv_indptr[b + 1] - kv_indptr[b];
    // FlashInfer's causal mask is end-aligned; with kv_len < qo_len the first queries would see
    // nothing, unlike our positions. Not a case we compare.
    DSINFER_CHECK(qo_len >= 0 && kv_lens[b] >= qo_len, "flashinfer_prefill_plan: sequence ", b, " has ", qo_len,
                  " queries on ", kv_lens[b], " kv rows; needs 0 <= queries <= kv rows");
  }
  const int tokens = qo_indptr[num_sequences], kv_rows = kv_indptr[num_sequences];
  const size_t needed = flashinfer_prefill_scratch_bytes(tokens, num_sequences, heads);
  DSINFER_CHECK(scratch_bytes >= needed, "flashinfer_prefill_plan: scratch has ", scratch_bytes, " bytes, needs ",
                needed, " (flashinfer_prefill_scratch_bytes)");

  // The plan fills a host mirror of the scratch, then copies it with cudaMemcpyAsync; pageable host
  // memory is fine (the copy stages it before returning) and we synchronize before it goes anyway.
  std::vector<uint8_t> host_mirror(scratch_bytes);
  flashinfer::PrefillPlanSM90Info info;
  cudaError_t status = cudaSuccess;
  try {
    status = flashinfer::PrefillSM90Plan<int32_t>(
        /*float_buffer=*/nullptr, /*float_workspace_size_in_bytes=*/0, scratch, host_mirror.data(), scratch_bytes,
        info, qo_indptr.data(), kv_indptr.data(), kv_lens.data(), uint32_t(tokens), uint32_t(num_sequences),
        uint32_t(heads), uint32_t(heads), kFlashInferHeadDimQk, kFlashInferHeadDimVo, /*page_size=*/1,
        /*causal=*/true, /*enable_cuda_graph=*/false, /*sizeof_dtype_o=*/2, stream);
  } catch (const std::exception& e) {
    throw Error(str_cat("FlashInfer's PrefillSM90Plan rejected the batch: ", e.what()));
  }
  DSINFER_CHECK(status == cudaSuccess, "FlashInfer's PrefillSM90Plan failed: ", cudaGetErrorString(status));
  DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream));
  DSINFER_CHECK(!info.same_schedule_for_all_heads, "FlashInfer's plan chose its shared-by-all-heads schedule (",
                tokens, " tokens: over 4096 query tiles per head), which this bench does not instantiate");

  FlashInferPrefillPlan plan;
  plan.scratch = scratch;
  plan.qo_tile_indices = info.qo_tile_indices_offset;
  plan.qo_indptr = info.qo_indptr_offset;
  plan.kv_indptr = info.kv_indptr_offset;
  plan.qo_lens = info.qo_len_offset;
  plan.kv_lens = info.kv_len_offset;
  plan.head_indices = info.head_indices_offset;
  plan.work_indptr = info.work_indptr_offset;
  plan.batch_indices = info.batch_indices_offset;
  plan.tokens = tokens;
  plan.kv_rows = kv_rows;
  plan.heads = heads;
  plan.num_sequences = num_sequences;
  return plan;
}

void flashinfer_prefill(const FlashInferPrefillPlan& plan, const FlashInferPrefillArgs& args, cudaStream_t stream) {
  DSINFER_CHECK(plan.scratch != nullptr, "flashinfer_prefill: no plan (call flashinfer_prefill_plan first)");
  DSINFER_CHECK(plan.tokens >= 1 && plan.kv_rows >= 1, "flashinfer_prefill: empty batch (", plan.tokens,
                " tokens, ", plan.kv_rows, " kv rows)");
  DSINFER_CHECK(aligned16(args.q) && aligned16(args.k) && aligned16(args.v) && aligned16(args.out),
                "flashinfer_prefill: q, k, v and out must be non-null and 16-byte aligned (TMA)");
  // FlashInfer's layouts take int32 row counts; its TMA descriptors need < 2^31 rows per dimension.
  DSINFER_CHECK(int64_t(plan.tokens) * plan.heads < (int64_t(1) << 31) &&
                    int64_t(plan.kv_rows) * plan.heads < (int64_t(1) << 31),
                "flashinfer_prefill: batch too large (", plan.tokens, " tokens, ", plan.kv_rows, " kv rows)");

  FiParams params{};  // zero: no LSE, no multi-item scoring pointers, soft cap 0 (unused: StandardAttention)
  params.q_ptr = reinterpret_cast<FiType*>(const_cast<bf16*>(args.q));
  params.k_ptr = reinterpret_cast<FiType*>(const_cast<bf16*>(args.k));
  params.v_ptr = reinterpret_cast<FiType*>(const_cast<bf16*>(args.v));
  params.o_ptr = reinterpret_cast<FiType*>(args.out);
  params.lse_ptr = nullptr;
  auto at = [&](int64_t offset) { return flashinfer::GetPtrFromBaseOffset<int32_t>(plan.scratch, offset); };
  params.qo_tile_indices = at(plan.qo_tile_indices);
  params.qo_indptr = at(plan.qo_indptr);
  params.kv_indptr = at(plan.kv_indptr);
  params.qo_lens = at(plan.qo_lens);
  params.kv_lens = at(plan.kv_lens);
  params.head_indices = at(plan.head_indices);
  params.work_indptr = at(plan.work_indptr);
  params.batch_indices = at(plan.batch_indices);
  params.additional_params.logits_soft_cap = 0.0f;
  params.additional_params.sm_scale = args.scale;
  // Strides in elements, NHD layout: row-major [rows, heads, dim].
  params.q_stride_n = int64_t(plan.heads) * kFlashInferHeadDimQk;
  params.q_stride_h = kFlashInferHeadDimQk;
  params.k_stride_n = int64_t(plan.heads) * kFlashInferHeadDimQk;
  params.k_stride_h = kFlashInferHeadDimQk;
  params.v_stride_n = int64_t(plan.heads) * kFlashInferHeadDimVo;
  params.v_stride_h = kFlashInferHeadDimVo;
  params.o_stride_n = int64_t(plan.heads) * kFlashInferHeadDimVo;
  params.o_stride_h = kFlashInferHeadDimVo;
  params.nnz_qo = plan.tokens;
  params.nnz_kv = plan.kv_rows;
  params.num_qo_heads = plan.heads;
  params.num_kv_heads = plan.heads;  // MHA after kv_b_proj: one KV head per query head
  params.group_size = 1;
  params.window_left = -1;  // no sliding window
  params.causal = true;

  cudaError_t status = cudaSuccess;
  try {
    status = flashinfer::BatchPrefillWithRaggedKVCacheDispatched<
        kFlashInferHeadDimQk, kFlashInferHeadDimVo, flashinfer::MaskMode::kCausal, /*LEFT_SLIDING_WINDOW=*/false,
        /*SAME_SCHEDULE_FOR_ALL_HEADS=*/false, FiVariant>(params, /*enable_pdl=*/false, stream);
  } catch (const std::exception& e) {
    throw Error(str_cat("FlashInfer's sm90 prefill rejected the launch: ", e.what()));
  }
  DSINFER_CHECK(status == cudaSuccess, "FlashInfer's sm90 prefill failed to launch: ", cudaGetErrorString(status),
                " (it needs an sm_90 GPU and ~208 KiB of shared memory per block)");
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::bench
