// The Hopper (sm_90a) warpgroup-MMA form of expanded (prefill) MLA attention at DeepSeek's widths:
// PrefillAttentionKernel::kWgmma of prefill_attention (prefill_attention.h), which checks the
// arguments and chooses; this header is the kernel's launcher only. Private to the prefill .cu files.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/prefill_attention.h"

namespace dsinfer::backend::cuda {

// Whether the kernel takes these arguments: DeepSeek's widths (128 / 64 / 128), kv_rows known (> 0),
// q, kv and k_rope 16-byte aligned.
bool prefill_attention_wgmma_supported(const PrefillAttentionArgs& args);

// Enqueues the kernel: grid (ceil(tokens / 128) + sequences, ceil(heads / P)) with P = 1, 2 or 4
// heads a block, 384 threads, ~209 KB of dynamic shared memory. Builds three TMA descriptors on the
// host (no device memory, no sync): graph-capturable. Throws dsinfer::Error when unsupported or when the launch fails.
void launch_prefill_attention_wgmma(const PrefillAttentionArgs& args, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
