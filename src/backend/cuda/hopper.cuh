// Private to the CUDA kernels: Hopper (sm_90a) PTX wrappers for the TMA + wgmma kernels, shared by
// mla_decode_wgmma.cu and the FP8 wgmma GEMMs. Device code only; include from .cu files.
//
// - mbarrier: init, arrive, arrive with an expected transaction count, wait on a phase parity.
// - TMA: one 2D/3D box of a CUtensorMap into shared memory, its bytes counted on an mbarrier; a 3D
//   box out of shared memory (bulk-group stores).
// - cp.async of 4 bytes whose landing is an mbarrier arrival; setmaxnreg.
// - wgmma: fence / commit / wait, the shared-memory matrix descriptor (128-byte swizzle) and its
//   base-plus-offset form for issue loops, and register fences that keep the compiler from moving
//   accumulator accesses across issue and wait.
// Every shared-memory address here is a 32-bit shared-window address (smem_address in mma.cuh).
#pragma once

#include <cuda.h>  // CUtensorMap (the type only)

#include <cstdint>

namespace dsinfer::backend::cuda {

// ---- mbarrier ----

__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

// Makes the initialised barriers visible to the async proxy (TMA's complete_tx) and other threads.
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// Waits for the completion of the barrier's phase with this parity.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// ---- TMA ----

// Fetches a tensor map (a __grid_constant__ parameter) into the TMA unit's descriptor cache ahead of
// its first box.
__device__ __forceinline__ void tma_prefetch_descriptor(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

// One box of a 2D tensor map at (column, row) into shared memory at `dst`; the bytes are counted on
// `bar` (whose expected transaction count the caller has raised).
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int column, int row, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(column), "r"(row), "r"(bar)
      : "memory");
}

// The same for a 3D tensor map at (c0, c1, c2), innermost first.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int c0, int c1, int c2, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// ---- TMA stores (bulk groups) ----

// One box of shared memory at `src` to a 3D tensor map at (c0, c1, c2), innermost first; rows and
// columns past the map's extents are not written.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Waits until this thread's committed bulk stores have read their shared memory (it may be rewritten).
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
// Waits until this thread's committed bulk stores are complete.
__device__ __forceinline__ void bulk_wait_group() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// ---- cp.async into an mbarrier's phase ----

// 4 bytes from global to shared memory at `dst` (zeros, and no read, when !valid).
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0) : "memory");
}

// Adds to a counter in global memory and returns its old value, with release (this thread's earlier
// writes, and those ordered before them by a barrier, are visible before the add) and acquire (what
// the other adders released is visible after it) at GPU scope.
__device__ __forceinline__ int atomic_add_acq_rel_gpu(int* counter, int value) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n" : "=r"(old) : "l"(counter), "r"(value) : "memory");
  return old;
}

// An arrival on `bar` once every cp.async this thread issued before has landed. noinc: the arrival
// is one of those the barrier was initialised to expect.
__device__ __forceinline__ void cp_async_mbarrier_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// ---- register reallocation between warpgroups (every warp of the warpgroup executes it) ----

template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// ---- barriers and proxies ----

// bar.sync on a named barrier (id 1..15; 0 is __syncthreads) by `threads` threads (a multiple of 32).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Signals a named barrier without waiting (a producer side of bar.sync with the same thread count).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Orders this thread's generic-proxy shared-memory writes before later async-proxy accesses
// (wgmma operand reads, TMA writes) of the same bytes.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// ---- wgmma ----

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving accesses of accumulator registers across wgmma issue and wait.
template <int kN>
__device__ __forceinline__ void fence_registers(float (&r)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// Zeroes accumulators through opaque moves: with plain `= 0.f` the compiler shares one zero register
// among them and ptxas then serialises the wgmmas (C7515).
template <int kN>
__device__ __forceinline__ void zero_registers(float (&r)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("mov.b32 %0, 0;\n" : "=f"(r[i]));
}

// Shared-memory matrix descriptor (PTX ISA "matrix descriptor"): start address >> 4 in bits 0-13,
// leading byte offset >> 4 in 16-29, stride byte offset >> 4 in 32-45, base offset 0 (every swizzle
// atom must be 1024-aligned), layout 1 = 128-byte swizzle in bits 62-63.
__device__ __forceinline__ uint64_t smem_descriptor(uint32_t address, uint32_t leading_bytes, uint32_t stride_bytes) {
  return static_cast<uint64_t>((address & 0x3FFFF) >> 4) | static_cast<uint64_t>(leading_bytes >> 4) << 16 |
         static_cast<uint64_t>(stride_bytes >> 4) << 32 | uint64_t{1} << 62;
}

// Descriptors in two steps, for loops that issue many wgmmas: descriptor_base is the low word of
// smem_descriptor(address, leading_bytes, 1024) for a base address, made warp-uniform (read from lane
// 0: the whole warp calls it), and descriptor_at the descriptor `bytes` past that base: one uniform
// add a wgmma, which the compiler keeps in uniform registers. Rebuilt from the address per wgmma, a
// descriptor took a chain of four or five dependent integer instructions (in the tiled FP8 GEMM also
// an R2UR) between the MMAs. The start address field (bits 0-13: address / 16) holds every
// shared-memory address (< 256 KB), so adding bytes / 16 never carries into the other fields.
//   K-major operands in 128-byte-swizzled rows (TMA's SWIZZLE_128B: 128 bytes of K a row, 8-row
//   atoms 1024 B apart): the leading offset is unused with this swizzle (16, i.e. 1, by convention),
//   the stride offset one atom; a step of k elements inside the row advances the start address by
//   their bytes (32 B: a bf16 k16 or an fp8 k32 step). MN-major operands pass their leading offset.
__device__ __forceinline__ uint32_t descriptor_base(uint32_t address, uint32_t leading_bytes = 16) {
  return __shfl_sync(0xffffffffu, static_cast<uint32_t>(smem_descriptor(address, leading_bytes, 1024)), 0);
}
__device__ __forceinline__ uint64_t descriptor_at(uint32_t base, uint32_t bytes) {
  constexpr uint64_t kHighWord = 0xFFFFFFFF00000000ull;  // the stride and the swizzle: the same for every base
  return (smem_descriptor(0, 0, 1024) & kHighWord) | (base + (bytes >> 4));
}

}  // namespace dsinfer::backend::cuda
