// kernels_bench's cases for issue 8's small kernels, as the CUDA backend runs them, at DeepSeek-V3's
// widths and decode to prefill token counts (1, 64, 256, 1024, 4096, 16384):
//   - fused routing (routing.h): logits [T, 256] -> ids, weights [T, 8]; against the 5 us bar at 256;
//   - SiLU-mul (elementwise.h), alone and fused with FP8 quantization, I = 2048 (MoE / shared expert)
//     and 18432 (dense layers);
//   - add + RMSNorm (norm.h) at hidden 7168, both row schedules, alone and fused with FP8 quantization
//     (with and without the bf16 copy);
//   - RoPE on q [T, 128, 192] (dims 128..191) and the fused latent-cache write (kv_a [T, 576] -> norm,
//     rope and scatter into 64-row pages).
// Each line: time (kernel_timing.h's median with the L2 flushed), the compulsory bytes (every input
// read once, every output written once; a weight or table row once per call or per token, as its
// header says), TB/s, and that rate's share of the run's copy ceiling. The MoE permute / combine
// kernels of moe.cu have no launcher of their own and are not timed here.
//
// The fused FP8 launchers have no Backend op yet, so each case first checks them bit for bit against
// the unfused kernels the backend runs today (silu_mul / add_rms_norm_inplace, then
// quantize_fp8_per_token_group), and the norm's two schedules against each other: a mismatch throws
// dsinfer::Error naming the case and the first differing byte.
#pragma once

#include <cuda_runtime.h>

#include "ceilings.h"        // bench/gpu/
#include "core/json.h"
#include "kernel_timing.h"  // bench/gpu/

namespace dsinfer::bench {

// Prints one section per kernel and one line per case to stdout; every figure goes to `figures`
// ("<case>_us", "_tb_s", "_of_copy"). Needs ~6 GB of free device memory.
void small_op_cases(Timer& timer, cudaStream_t stream, const Ceilings& ceilings, Json& figures);

}  // namespace dsinfer::bench
