// The FP8 form of MLA decode at DeepSeek's widths: attention over an e4m3 latent cache
// (--kv-cache-dtype fp8, cache_layout.h) with FP8 warpgroup MMAs for both Q K^T and P V. mla_decode()
// (mla_decode.h) takes it when MlaDecodeArgs::cache_fp8 is set at L = 512, R = 64; it checks the
// arguments, chooses the split count (the same chunks as the BF16 kernels) and launches the combine.
// This header is the attention kernel's launcher only, private to the MLA decode .cu files.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/mla_decode_internal.cuh"

namespace dsinfer::backend::cuda {

// Heads per block of the FP8 kernel: the M of its MMAs. A last block with fewer heads pads its rows.
inline constexpr int kMlaFp8Heads = 64;

// Enqueues the attention kernel on `stream`: grid (ceil(H / 64), p.num_splits, tokens), 256 threads,
// ~195 KB of dynamic shared memory. Reads p.q (bf16, quantized inside) and p.cache_fp8; unsplit it
// writes p.out, split it writes p.partial_out and p.partial_stats as the BF16 kernels do. Requires a
// 16-byte aligned cache. Builds one TMA descriptor on the host (no device memory, no sync):
// graph-capturable. Throws dsinfer::Error when the driver cannot build it or the launch fails.
void launch_mla_decode_fp8(const MlaDecodeParams& p, int tokens, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
