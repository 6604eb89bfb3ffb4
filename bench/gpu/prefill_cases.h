// kernels_bench's cases for prefill attention (prefill_attention.h): the kWgmma kernel the backend
// runs, beside kFlash (the mma.sync kernel), whose output it must match; ragged, causal by position,
// DeepSeek-V3's widths (128 heads, d_qk 192 = 128 nope + 64 rope, d_v 128), at issue 8's shapes:
// 8 sequences x 2K, 1 x 16K, and a 4K chunk on top of a 4K cached prefix. FLOPs count the causal
// pairs: 2 * (192 + 128) per head and (query, visible key). Each line prints time, TFLOP/s, that rate
// against the run's BF16 GEMM ceiling and against issue 8's 550 TFLOP/s bar, and, when kernels_bench
// was built with FlashInfer's headers (tools/setup_flashinfer.sh), FlashInfer's sm90 prefill on the
// same inputs (flashinfer_prefill.h) beside it.
#pragma once

#include <cuda_runtime.h>

#include "ceilings.h"        // bench/gpu/
#include "core/json.h"
#include "kernel_timing.h"  // bench/gpu/

namespace dsinfer::bench {

// Figures "prefill_attention_<case>_us", "_tflops", "_of_bf16" (and "_flashinfer_us",
// "_vs_flashinfer" with FlashInfer). Needs ~4.3 GB of free device memory.
void prefill_attention_cases(Timer& timer, cudaStream_t stream, const Ceilings& ceilings, Json& figures);

}  // namespace dsinfer::bench
