// Private to the CUDA kernels: warp-level tensor-core, ldmatrix and cp.async wrappers (sm_80+ PTX,
// valid on sm_90a), shared by mla_decode.cu, prefill_attention.cu and moe.cu, and the one-row online
// softmax step of the CUDA-core attention kernels. Device code only; include from .cu files.
//
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, with g = lane / 4, c = lane % 4:
//   A (16 x 16, row-major), 4 x b32, each two bf16 with the lower column in the low half:
//     a0 = A[g][2c, 2c+1]   a1 = A[g+8][2c, 2c+1]   a2 = A[g][2c+8, 2c+9]   a3 = A[g+8][2c+8, 2c+9]
//   B (16 x 8, "col": k-pairs packed), 2 x b32:
//     b0 = B[2c, 2c+1][g]   b1 = B[2c+8, 2c+9][g]
//   C/D (16 x 8 f32): d0, d1 = C[g][2c, 2c+1]   d2, d3 = C[g+8][2c, 2c+1]
// ldmatrix.m8n8.x4 (.x2): lanes 8i..8i+7 give the row addresses of matrix i (16 B each); register i
// receives matrix i's [lane / 4][2 (lane % 4), +1]. With .trans it receives [2 (lane % 4), +1][lane / 4].
// So: A from a row-major [m][k] tile: row = m0 + (lane & 15), col = k0 + (lane >> 4) * 8 (x4).
//     B from a [n][k] tile (keys as rows, Q K^T): row = n0 + (lane & 7), col = k0 + ((lane >> 3) & 1) * 8 (x2),
//       or two n-tiles at once (x4): row = n0 + (lane & 7) + (lane >> 4) * 8, same col
//       -> regs {0, 1} = (b0, b1) of n-tile n0, regs {2, 3} = (b0, b1) of n-tile n0 + 8.
//     B from a [k][n] tile (values as rows, P V) with .trans, two n-tiles at once (x4):
//       row = k0 + (lane & 7) + ((lane >> 3) & 1) * 8, col = n0 + (lane >> 4) * 8
//       -> regs {0, 1} = (b0, b1) of n-tile n0, regs {2, 3} = (b0, b1) of n-tile n0 + 8.
// The C fragments of two adjacent n-tiles of S (keys 16k.., in bf16) are exactly the A fragment of
// k-step k of P V.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace dsinfer::backend::cuda {

// 2^x by the MUFU unit alone: one instruction where exp2f without --use_fast_math adds a range check
// and two scalings around it (denormal results flush to zero: probabilities below 2^-126 of the
// running max add nothing to a bf16 output). The softmaxes of the wgmma attention kernels use it.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t smem_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __nv_bfloat16* pointer) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(pointer)));
}

__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const __nv_bfloat16* pointer) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_address(pointer)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const __nv_bfloat16* pointer) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(pointer)));
}

// d += a (16 x 16, row major) * b (16 x 8, column major), bf16 in, f32 accumulate.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 16 bytes global -> shared, asynchronously; zero-fills instead of reading when !valid (the source
// must still be a mapped address).
__device__ __forceinline__ void cp_async_16(void* shared, const void* global, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(shared)), "l"(global),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// Two floats as one b32 of two bf16 (round to nearest even), low in the low half: an mma A/B register.
__device__ __forceinline__ uint32_t pack_bf16(float low, float high) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<uint32_t*>(&pair);
}

// One row of an online softmax in log2 units, for the kernels where a warp scores one key at a time:
// the lanes' partial dot products are summed over the warp, scaled by scale_log2 (scale * log2(e)),
// and folded into (running_max, running_sum). The caller rescales its accumulators by `correction`
// and adds the row's values times `weight`. The first row makes the max finite; exp2f(-inf) = 0 then
// clears the empty start.
struct SoftmaxStep {
  float correction;
  float weight;
};

__device__ __forceinline__ SoftmaxStep online_softmax_step(float dot, float scale_log2, float& running_max,
                                                           float& running_sum) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
  const float score = dot * scale_log2;
  const float new_max = fmaxf(running_max, score);
  const float correction = exp2f(running_max - new_max);
  const float weight = exp2f(score - new_max);
  running_sum = running_sum * correction + weight;
  running_max = new_max;
  return {correction, weight};
}

}  // namespace dsinfer::backend::cuda
