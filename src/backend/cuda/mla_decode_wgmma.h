// The Hopper (sm_90a) warpgroup-MMA form of MLA decode at DeepSeek's widths: MlaDecodeKernel::kWgmma
// of mla_decode (mla_decode.h). mla_decode() checks the arguments, chooses the split count and
// launches the combine; this header is the attention kernel's launcher only. Private to the MLA
// decode .cu files (it names MlaDecodeParams from mla_decode_internal.cuh).
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/mla_decode_internal.cuh"

namespace dsinfer::backend::cuda {

// Heads per block of the WGMMA kernel: the M of its MMAs. A last block with fewer heads pads its rows.
inline constexpr int kMlaWgmmaHeads = 64;

// Enqueues the attention kernel on `stream`: grid (ceil(H / 64), p.num_splits, tokens), 256 threads,
// ~219 KB of dynamic shared memory. Unsplit it writes p.out; split it writes p.partial_out and
// p.partial_stats exactly as the other fast kernels do, and the caller then runs the combine.
// Requires 16-byte aligned q and cache, tokens * heads < 2^31. Builds two
// TMA descriptors on the host (no device memory, no sync): graph-capturable. Throws dsinfer::Error
// when the driver cannot build them or the launch fails.
void launch_mla_decode_wgmma(const MlaDecodeParams& p, int tokens, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
