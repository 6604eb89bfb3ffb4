// Private to the CUDA kernels: rope_kernel's arithmetic on one 16-byte unit of interleaved pairs (8
// bf16 as floats, 4 pairs, with their 4 cos and 4 sin), shared by rope_cache.cu's rope kernels and
// latent_write.cu's fused cache write. Device code only; include from .cu files.
#pragma once

#include <cuda_runtime.h>

namespace dsinfer::backend::cuda {

// x[a] = x[a] * c - x[b] * s, x[b] = x[b] * c + x[a] * s for the pairs (a, b) = (2m, 2m + 1).
__device__ __forceinline__ void rotate_unit(float (&v)[8], const float4& c, const float4& s) {
  const float cs[4] = {c.x, c.y, c.z, c.w}, sn[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const float x0 = v[2 * m], x1 = v[2 * m + 1];
    v[2 * m] = x0 * cs[m] - x1 * sn[m];
    v[2 * m + 1] = x1 * cs[m] + x0 * sn[m];
  }
}

}  // namespace dsinfer::backend::cuda
