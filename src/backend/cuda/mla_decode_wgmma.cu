// MLA decode attention with Hopper warpgroup MMA (wgmma.mma_async) and TMA: MlaDecodeKernel::kWgmma.
// Same contract, chunks and scratch as the other fast kernels (mla_decode.h, mla_decode_internal.cuh).
//
//   out[t, h, :] = softmax_j(scale * q[t, h, :] . row_j) @ row_j[:512],  j over the token's chunk
//
// Shapes: q [T, H, 576] bf16, cache [pages, 64, 576] bf16, out [T, H, 512] bf16. A block takes 64
// heads; with fewer (H = 16 or 32 under tensor parallelism, or the last block of H = 96) the MMA rows
// past them score whatever q rows follow (the next tokens' heads, or TMA's zero fill past the end)
// and are never written: at 16 heads the kernel is bound by the cache read, not the wasted MMAs.
// Roofline per token: bytes = kv_len * 576 * 2 (the two 64-head blocks of a chunk run side by side and
// share the page through L2) + H * 576 * 2 + H * 512 * 2; FLOPs = 2 * H * kv_len * (576 + 512), about
// 240 FLOP per cache byte at H = 128: compute-bound on H200 (~4.3 TB/s against ~800 TFLOP/s dense).
//
// Launch: grid (H / 64, splits, T), 256 threads = two warpgroups, one block per SM (~219 KB of shared
// memory). A block owns 64 heads of one token and walks its chunk two pages (blocks of 64 keys) at a
// time: warpgroup 0 scores the even page, warpgroup 1 the odd one, and each warpgroup owns half of the
// output (WG 0 dims 0..255 "L", WG 1 dims 256..511 "R"), so every warpgroup needs both pages' P:
//
//   WG 0                                         WG 1
//   softmax S0 -> m_a, scale0 = 2^(m - m_a)
//     --- Scale0Ready --->                       softmax S1 against m_a -> m_b, scale1 = 2^(m_a - m_b)
//   OL = OL * scale0 + P0 V0L  (P0 in registers)      <--- Scale1Ready ---
//   (waits for it, then asks for V0L's next page) OR = OR * scale0 * scale1 + P1 V1R  (P1 in registers;
//   P0 * scale1 -> shared (page 0's rope tile)        also to shared, page 1's rope tile)
//     --- P0Ready --->                           OR += P0 V0R  (P0 from shared)
//                                                     <--- P1Ready --- (both P V queued)
//   OL = OL * scale1 + P1 V1L  (P1 from shared)
//   S0 of the next even page                     S1 of the next odd page
//
// so that one warpgroup's softmax runs while the other's MMAs do (the order FlashMLA's deep-dive
// describes). The softmax masks only a chunk's last page and exponentiates with ex2.approx.ftz (the
// scale folded into one FFMA a score, as FlashMLA does: no separate scaling pass);
// the cache's tiles are loaded with an evict-first L2 policy. Those four together measured 3-5%
// faster on H200 (T = 64 and 256, 4K context), each alone within noise. S = Q K^T is 36 x wgmma m64n64k16
// (A = Q, B = the page, both K-major from shared memory); P V is 4 x m64n256k16 with V MN-major.
// The running max lives in shared memory and is advanced in that order (m -> m_a -> m_b); each
// warpgroup keeps its own row sums, rescaled by every factor, and adds the other's at the end.
//
// Shared memory, every operand in the 128-byte-swizzled K-major layout TMA writes (SWIZZLE_128B):
//   Q        [9 tiles][64 heads][64 dims]    73,728 B, loaded once
//   K0, K1   [9 tiles][64 keys][64 dims]     2 x 73,728 B: the even and the odd page
//   P0 / P1  bf16 [64 heads][64 keys] in the rope tile (tile 8) of K0 / K1, once S has read it
//   stats    row max, scale0, scale1, final row sums; mbarriers, one per tile of Q, K0 and K1 (Q and
//            page 0 are requested tile by tile, interleaved, so that the first S starts on the first pair).
// Pipeline: each 64-dim tile of a page has its own mbarrier, so S starts on a page's first tile while
// the rest lands, and a tile is refilled as soon as its last reader is done: K0 tiles 0-3 (V0L) by
// WG 0 after OL += P0 V0L, K0 tiles 4-8 (V0R and P0) by WG 1 after OR += P0 V0R, K1 tiles 0-3 and 8
// (V1L, P1) by WG 0 after OL += P1 V1L, K1 tiles 4-7 (V1R) by WG 1 after OR += P1 V1R. WG 1 scores
// its page starting with tiles 4-7 (its own, refilled first). (Asking the next pages into L2 ahead
// of their loads, cp.async.bulk.prefetch one or two pairs ahead, measured 0-12% slower on H200.)
// Keys past the context in the chunk's last page (stale or never written) get -inf scores by select,
// and each warpgroup zeroes its half of that page's V rows before P V, so garbage cannot become NaN;
// a missing odd page (odd page count) is never read. A token with position < 0 has an empty chunk:
// zero output (unsplit) or stats (-inf, 0). The output leaves through shared memory in whole rows
// (the epilogue at the kernel's end).
//
// Where the time goes (Nsight Compute, H200, T = 64 at 4K, before the epilogue's staging): 29% of
// the warps' stall samples wait for a page tile's TMA, nearly all of it in S of the next page on the
// tiles refilled just before (K1 tiles 4 and 0, K0 tile 4): each warpgroup scores the page after next
// in the buffer it has just freed, so the refill's latency is exposed; 16% wait for wgmma, 16% at
// the hand-off barriers. FlashMLA's sm90 kernel (the same schedule) built from its source with its
// flags (--use_fast_math) ran 0.87-0.91x of this kernel's time in the same run at 128 heads (B = 64
// and 128, 4K and 8K; 1 and 2 q tokens) and 0.98x at 16 heads; built without fast math (its exp2f
// then takes the slow path) it ran 1.0-1.1x. Tried, and no faster: a cluster pair of the two head
// blocks loading each page once by TMA multicast (0.70x: the refill waits for the slower block),
// the odd head block a pair ahead so the other finds pages in L2 (1.02x slower), warpgroup 0 storing
// P0 while P0 V0L runs (within noise), the tile waits as one PTX loop (within noise).
#include "backend/cuda/mla_decode_wgmma.h"

#include <cmath>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/hopper.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/tensor_map.h"
#include "core/error.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kHeads = kMlaWgmmaHeads;       // 64: M of every MMA
constexpr int kKeys = kMlaPageSize;          // 64 keys a page
constexpr int kSwizzleDims = 64;             // bf16 in one 128-byte swizzled row
constexpr int kTiles = kMlaCacheWidth / kSwizzleDims;  // 9 tiles of 64 dims in a row
constexpr int kRopeTile = kTiles - 1;        // dims 512..575; P's home once S is done
constexpr int kRowBytes = kSwizzleDims * 2;  // 128
constexpr int kTileBytes = 64 * kRowBytes;   // 8,192: one [64 rows][64 dims] box
constexpr int kPageBytes = kTiles * kTileBytes;  // 73,728: Q, or one page
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kWgThreads = 128;
constexpr int kDimsPerWg = kMlaLatentDim / 2;             // 256: O columns of a warpgroup
constexpr int kVTilesPerWg = kDimsPerWg / kSwizzleDims;   // 4
static_assert(kTiles * kSwizzleDims == kMlaCacheWidth && kRopeTile * kSwizzleDims == kMlaLatentDim);
static_assert(kKeys == 64 && kHeads == 64, "one page is one 64-key step; M of wgmma is 64");

// Shared memory offsets from the 1024-byte aligned base (the 128-byte swizzle repeats every 1024 B,
// and both TMA and wgmma compute it from address bits, so every box starts 1024-aligned).
constexpr int kQOffset = 0;
constexpr int kKOffset = kPageBytes;  // + b * kPageBytes for K0 (b = 0) and K1 (b = 1)
constexpr int kStatsOffset = kKOffset + 2 * kPageBytes;
// float arrays of 64 rows: the running max, scale0, scale1, and the two warpgroups' final row sums.
constexpr int kMaxRow = 0, kScale0Row = 1, kScale1Row = 2, kSumRow = 3;  // kSumRow + wg
constexpr int kStatsBytes = 5 * kHeads * 4;
constexpr int kBarrierOffset = kStatsOffset + kStatsBytes;
// One barrier a tile of Q (kQBarrier + tile) and of K0, K1 (kKBarrier + b * kTiles + tile).
constexpr int kQBarrier = 0, kKBarrier = kTiles;
constexpr int kNumBarriers = 3 * kTiles;
constexpr int kSmemBytes = kBarrierOffset + kNumBarriers * 8 + 1024;  // + alignment slack
static_assert(kSmemBytes <= 227 * 1024, "must fit Hopper's 227 KB of shared memory a block");

// Named barriers (bar.sync ids; 0 is __syncthreads). The four hand-offs have one warpgroup arriving
// and the other waiting (256 threads each); kWgBarrier + wg is a warpgroup's own (128 threads).
constexpr int kScale0Ready = 1, kScale1Ready = 2, kP0Ready = 3, kP1Ready = 4, kWgBarrier = 5;

// ---- wgmma shapes of this kernel (hopper.cuh has the common wrappers) ----

// MN-major V ([keys][64 dims] boxes; N = dims contiguous): leading offset = the next 64 dims (the
// next box, 8 KB on), stride offset = the next 8 keys (1024 B on). A k16 step (16 keys) advances the
// start address by 2 KB.
constexpr uint32_t kVLeadingBytes = kTileBytes;

// S[64 x 64] (+)= A[64 x 16] B[16 x 64]^T, both K-major in shared memory. The accumulator fragment:
// d[4 j + 2 h + e] = S[16 (warp % 4) + g + 8 h][8 j + 2 c + e] (g = lane / 4, c = lane % 4).
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], uint64_t a, uint64_t b, int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, "
      "%8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),
        "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(accumulate));
}

// O[64 x 256] += A[64 x 16] B[16 x 256]: A K-major and B MN-major (transpose bit set) in shared
// memory. Same fragment order as above with j < 32.
__device__ __forceinline__ void wgmma_m64n256k16_ss(float (&d)[128], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, 1, 1, 1, 0, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),
        "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
        "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
        "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]),
        "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]),
        "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]),
        "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]),
        "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]),
        "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]),
        "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]),
        "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),
        "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b));
}

// O[64 x 256] += A[64 x 16] B[16 x 256]: A in registers (the m16n8k16 A fragment of each warp's 16
// rows: a0 = A[g][2c, 2c+1], a1 = A[g+8][2c, 2c+1], a2 = A[g][2c+8, 2c+9], a3 = A[g+8][2c+8, 2c+9]),
// B MN-major in shared memory.
__device__ __forceinline__ void wgmma_m64n256k16_rs(float (&d)[128], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "{%128, %129, %130, %131}, %132, 1, 1, 1, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),
        "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
        "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
        "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]),
        "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]),
        "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]),
        "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]),
        "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]),
        "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]),
        "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]),
        "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),
        "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// ---- the kernel's pieces ----

// An L2 policy that lets these lines go first: the cache streams through once (the other 64-head
// block of the token reads the same page at about the same time, from L2 before it is evicted).
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// tma_load_2d with an L2 cache policy.
__device__ __forceinline__ void tma_load_2d_hint(uint32_t dst, const CUtensorMap* map, int column, int row,
                                                 uint32_t bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, "
      "%3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(column), "r"(row), "r"(bar), "l"(policy)
      : "memory");
}

// Where a block's shared memory lies (32-bit shared-window addresses) and its generic pointer.
struct Smem {
  uint32_t base;
  unsigned char* data;
  __device__ uint32_t k_buffer(int b) const { return base + kKOffset + b * kPageBytes; }
  __device__ uint32_t tile(uint32_t buffer, int t) const { return buffer + t * kTileBytes; }
  __device__ uint32_t barrier(int index) const { return base + kBarrierOffset + 8u * index; }
  __device__ uint32_t k_barrier(int b, int t) const { return barrier(kKBarrier + b * kTiles + t); }
  __device__ uint32_t q_barrier(int t) const { return barrier(kQBarrier + t); }
  __device__ float* stats(int row) const { return reinterpret_cast<float*>(data + kStatsOffset) + row * kHeads; }
  __device__ unsigned char* at(uint32_t address) const { return data + (address - base); }
};

// Tiles [first, last) of page `page_id` into buffer b, each counted on its own barrier. One thread.
__device__ __forceinline__ void load_tiles(const Smem& sm, const CUtensorMap* cache_map, int b, int page_id,
                                           int first, int last) {
  const uint64_t policy = evict_first_policy();
  for (int t = first; t < last; ++t) {
    const uint32_t bar = sm.k_barrier(b, t);
    mbarrier_arrive_expect_tx(bar, kTileBytes);
    tma_load_2d_hint(sm.tile(sm.k_buffer(b), t), cache_map, t * kSwizzleDims, page_id * kKeys, bar, policy);
  }
}

// S (+)= Q K_b^T over tiles [first, last) of buffer b, each after its barrier's phase `parity` has
// completed. Issues the wgmmas; the caller commits and waits. `zero`: the first MMA starts S from 0.
// kWaitQ (the first page only): also wait for each tile of Q, which lands beside page 0's.
template <int kFirst, int kLast, bool kWaitQ = false>
__device__ __forceinline__ void issue_scores(const Smem& sm, int b, uint32_t parity, float (&s)[32], bool zero) {
  const uint32_t k = sm.k_buffer(b);
  // The descriptors' bases are made in each issue function, not kept in Smem: held across the
  // kernel, they took it from 239 registers to 255 and 440 bytes of spills.
  const uint32_t desc = descriptor_base(sm.base);
#pragma unroll
  for (int t = kFirst; t < kLast; ++t) {
    if (kWaitQ) mbarrier_wait(sm.q_barrier(t), 0);
    mbarrier_wait(sm.k_barrier(b, t), parity);
    __syncwarp();  // the lanes leave the spin loop at different times; wgmma needs the warp converged
    wgmma_fence();  // after the wait's branches, or ptxas injects its own and serialises (C7519/C7520)
#pragma unroll
    for (int kk = 0; kk < kSwizzleDims / 16; ++kk) {
      const uint64_t a = descriptor_at(desc, kQOffset + t * kTileBytes + 32 * kk);
      const uint64_t bd = descriptor_at(desc, k - sm.base + t * kTileBytes + 32 * kk);
      wgmma_m64n64k16(s, a, bd, (zero && t == kFirst && kk == 0) ? 0 : 1);
    }
  }
}

// The row maxima of the scores in log2 units, scale * max(s) (scale > 0), with keys >= valid masked
// to -inf in s; this thread's two rows, reduced over the quad that shares them. s itself stays
// unscaled: exponentiate folds the scale into its FFMA.
__device__ __forceinline__ void mask_and_max(float (&s)[32], int valid, float scale_log2, int c, float (&row_max)[2]) {
  row_max[0] = row_max[1] = -INFINITY;
  if (valid == kKeys) {  // every page but a chunk's last: no mask
#pragma unroll
    for (int i = 0; i < 32; ++i) row_max[(i / 2) % 2] = fmaxf(row_max[(i / 2) % 2], s[i]);
  } else {
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& value = s[4 * j + 2 * h + e];
          value = 8 * j + 2 * c + e < valid ? value : -INFINITY;
          row_max[h] = fmaxf(row_max[h], value);
        }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(0xffffffffu, row_max[h], 1));
    row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(0xffffffffu, row_max[h], 2));
    row_max[h] *= scale_log2;
  }
}

// s <- exp2(scale * s - max) in place, one FFMA and one MUFU a score (max in log2 units); returns the
// thread's partial row sums.
__device__ __forceinline__ void exponentiate(float (&s)[32], float scale_log2, const float (&max)[2], float (&sum)[2]) {
  sum[0] = sum[1] = 0.f;
#pragma unroll
  for (int j = 0; j < kKeys / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& value = s[4 * j + 2 * h + e];
        value = fast_exp2(fmaf(value, scale_log2, -max[h]));
        sum[h] += value;
      }
}

// P (the S fragment) as the register A operand of P V, k16 step kk = keys 16 kk .. 16 kk + 15.
__device__ __forceinline__ void pack_p(const float (&p)[32], uint32_t (&a)[kKeys / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    a[kk][0] = pack_bf16(p[8 * kk + 0], p[8 * kk + 1]);
    a[kk][1] = pack_bf16(p[8 * kk + 2], p[8 * kk + 3]);
    a[kk][2] = pack_bf16(p[8 * kk + 4], p[8 * kk + 5]);
    a[kk][3] = pack_bf16(p[8 * kk + 6], p[8 * kk + 7]);
  }
}

// P * factor[h] as bf16 into the rope tile at `tile`, K-major [64 heads][64 keys] with the 128-byte
// swizzle: the 16-byte chunk (key / 8) of row r sits at chunk (key / 8) ^ (r % 8).
__device__ __forceinline__ void store_p(unsigned char* tile, const float (&p)[32], const float (&factor)[2], int row,
                                        int c) {
#pragma unroll
  for (int j = 0; j < kKeys / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row + 8 * h;
      *reinterpret_cast<uint32_t*>(tile + r * kRowBytes + ((j ^ (r & 7)) * 16) + 4 * c) =
          pack_bf16(p[4 * j + 2 * h] * factor[h], p[4 * j + 2 * h + 1] * factor[h]);
    }
}

// Zeroes V rows valid..63 of tiles [first, first + 4) of a page (whole 128-byte rows, so the swizzle
// does not matter), by the 128 threads of one warpgroup, then makes them visible to that warpgroup's
// wgmma. Only the chunk's last page can be partial.
__device__ __forceinline__ void zero_v_rows(const Smem& sm, uint32_t buffer, int first, int valid, int wg) {
  const int wg_thread = threadIdx.x % kWgThreads;
  const int pieces = (kKeys - valid) * kVTilesPerWg * 8;  // 16-byte pieces
  for (int i = wg_thread; i < pieces; i += kWgThreads) {
    const int r = valid + i / (kVTilesPerWg * 8);
    const int t = first + (i / 8) % kVTilesPerWg;
    *reinterpret_cast<uint4*>(sm.at(sm.tile(buffer, t)) + r * kRowBytes + (i % 8) * 16) = make_uint4(0u, 0u, 0u, 0u);
  }
  fence_proxy_async();
  named_barrier_sync(kWgBarrier + wg, kWgThreads);
}

// O (+)= P V over this warpgroup's 4 V tiles starting at `v_tile` of buffer `buffer`: P from registers.
__device__ __forceinline__ void issue_pv_registers(const Smem& sm, float (&o)[128], const uint32_t (&a)[kKeys / 16][4],
                                                   uint32_t v_tile) {
  const uint32_t desc = descriptor_base(sm.base, kVLeadingBytes);
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk)
    wgmma_m64n256k16_rs(o, a[kk], descriptor_at(desc, v_tile - sm.base + 16 * kk * kRowBytes));
}

// The same with P from shared memory (K-major [64 heads][64 keys] at p_tile).
__device__ __forceinline__ void issue_pv_shared(const Smem& sm, float (&o)[128], uint32_t p_tile, uint32_t v_tile) {
  const uint32_t p_desc = descriptor_base(p_tile), v_desc = descriptor_base(v_tile, kVLeadingBytes);
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk)
    wgmma_m64n256k16_ss(o, descriptor_at(p_desc, 32 * kk), descriptor_at(v_desc, 16 * kk * kRowBytes));
}

__device__ __forceinline__ void rescale(float (&o)[128], const float (&factor)[2]) {
  if (!__any_sync(0xffffffffu, factor[0] != 1.f || factor[1] != 1.f)) return;  // most pages after the first
#pragma unroll
  for (int j = 0; j < kDimsPerWg / 8; ++j) {
    o[4 * j] *= factor[0];
    o[4 * j + 1] *= factor[0];
    o[4 * j + 2] *= factor[1];
    o[4 * j + 3] *= factor[1];
  }
}

// ---- the kernel ----

__global__ void __launch_bounds__(kThreads, 1)
    mla_decode_wgmma_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap cache_map,
                            const MlaDecodeParams p) {
  const int head0 = blockIdx.x * kHeads, split = blockIdx.y, t = blockIdx.z;
  const int block_heads = min(kHeads, p.heads - head0);  // rows of this block that are real heads
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wg = warp / 4;  // 0: even pages' S, O dims 0..255; 1: odd pages' S, O dims 256..511
  const int g = lane / 4, c = lane % 4;
  const int row = 16 * (warp % 4) + g;  // this thread's head rows: row, row + 8
  const bool issuer = threadIdx.x % kWgThreads == 0;  // the warpgroup's TMA thread

  const int sequence = p.token_sequence[t];
  const MlaRowRange rows = mla_split_rows(mla_visible_rows(p, t, sequence), split, p.num_splits, p.min_split_pages);
  // Programmatic launch: the step's metadata above was uploaded before the step's first kernel; q,
  // this token's cache row and the scratch (read by the previous layer's combine) belong to the
  // kernels before, so every load of them and every write waits here. The combine after it (or the
  // value up-projection) may launch once the last wave's blocks are in.
  wait_for_previous_kernel();
  allow_dependent_launch();
  if (rows.empty()) {  // uniform over the block, before any barrier exists
    for (int h = warp; h < block_heads; h += kWarps) mla_finish_empty(p, t, split, head0 + h, lane);
    return;
  }
  const int num_pages = (rows.end - rows.begin + kKeys - 1) / kKeys;  // chunks start on a page boundary
  const int num_pairs = (num_pages + 1) / 2;
  const int32_t* pages = p.page_ids + p.page_table_start[sequence] + rows.begin / kKeys;
  auto valid_keys = [&](int page) { return min(kKeys, rows.end - (rows.begin + page * kKeys)); };

  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_address = smem_address(smem_raw);
  const uint32_t base = (raw_address + 1023u) & ~1023u;
  const Smem sm{base, smem_raw + (base - raw_address)};
  float* running_max = sm.stats(kMaxRow);
  float* scale0_row = sm.stats(kScale0Row);
  float* scale1_row = sm.stats(kScale1Row);

  if (threadIdx.x == 0) {
    for (int i = 0; i < kNumBarriers; ++i) mbarrier_init(sm.barrier(i), 1);
    mbarrier_init_fence();
  }
  if (threadIdx.x < kHeads) running_max[threadIdx.x] = -INFINITY;
  __syncthreads();
  if (threadIdx.x == 0) {  // Q and page 0 tile by tile, so that S of page 0 starts on the first pair
    const int q_row = t * p.heads + head0;
    for (int tile = 0; tile < kTiles; ++tile) {
      mbarrier_arrive_expect_tx(sm.q_barrier(tile), kTileBytes);
      tma_load_2d(sm.tile(base + kQOffset, tile), &q_map, tile * kSwizzleDims, q_row, sm.q_barrier(tile));
      load_tiles(sm, &cache_map, 0, pages[0], tile, tile + 1);
    }
    if (num_pages > 1) {  // in the order warpgroup 1 scores it
      load_tiles(sm, &cache_map, 1, pages[1], kVTilesPerWg, kRopeTile);
      load_tiles(sm, &cache_map, 1, pages[1], 0, kVTilesPerWg);
      load_tiles(sm, &cache_map, 1, pages[1], kRopeTile, kTiles);
    }
  }

  float o[4 * kDimsPerWg / 8];  // O[row + 8 h][256 wg + 8 j + 2 c + e] = o[4 j + 2 h + e]
  zero_registers(o);
  float s[4 * kKeys / 8];  // S[row + 8 h][8 j + 2 c + e] = s[4 j + 2 h + e] of this warpgroup's page
  zero_registers(s);
  uint32_t pa[kKeys / 16][4];  // P of this warpgroup's page in bf16, the A operand of its P V
  float sum[2] = {0.f, 0.f};   // this thread's keys of both pages, relative to the running max

  // Prologue: S of pages 0 (WG 0) and 1 (WG 1). Each branch issues, commits and waits on its own:
  // one group shared by both paths makes ptxas serialise the wgmmas (C7520).
  if (wg == 0) {
    fence_registers(s);
    wgmma_fence();
    issue_scores<0, kTiles, true>(sm, 0, 0, s, true);
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(s);
  } else if (num_pages > 1) {
    fence_registers(s);
    wgmma_fence();
    issue_scores<kVTilesPerWg, kRopeTile, true>(sm, 1, 0, s, true);
    issue_scores<0, kVTilesPerWg, true>(sm, 1, 0, s, false);
    issue_scores<kRopeTile, kTiles, true>(sm, 1, 0, s, false);
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(s);
  }

  const uint32_t k0 = sm.k_buffer(0), k1 = sm.k_buffer(1);
  const uint32_t p0_tile = sm.tile(k0, kRopeTile), p1_tile = sm.tile(k1, kRopeTile);
  for (int pair = 0; pair < num_pairs; ++pair) {
    const int page0 = 2 * pair, page1 = page0 + 1;
    const bool has1 = page1 < num_pages;
    const bool next0 = page0 + 2 < num_pages, next1 = page1 + 2 < num_pages;
    const uint32_t next_parity = (pair + 1) & 1;
    if (wg == 0) {
      // Softmax of page 0 against the running max m -> m_a.
      float m_a[2], scale0[2], page_sum[2];
      mask_and_max(s, valid_keys(page0), p.scale_log2, c, m_a);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float m = running_max[row + 8 * h];
        m_a[h] = fmaxf(m, m_a[h]);       // finite: key 0 of every page is valid
        scale0[h] = fast_exp2(m - m_a[h]);  // 0 on the first page (-inf - finite)
      }
      __syncwarp();  // every lane has read the old max before lane c == 0 overwrites it
      if (c == 0)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          scale0_row[row + 8 * h] = scale0[h];
          running_max[row + 8 * h] = m_a[h];
        }
      named_barrier_arrive(kScale0Ready, kThreads);
      exponentiate(s, p.scale_log2, m_a, page_sum);
#pragma unroll
      for (int h = 0; h < 2; ++h) sum[h] = sum[h] * scale0[h] + page_sum[h];
      pack_p(s, pa);
      rescale(o, scale0);
      if (valid_keys(page0) < kKeys) zero_v_rows(sm, k0, 0, valid_keys(page0), wg);
      // OL = OL * scale0 + P0 V0L.
      fence_registers(o);
      wgmma_fence();
      issue_pv_registers(sm, o, pa, sm.tile(k0, 0));
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(o);

      // P0, rescaled to m_b, for WG 1's OR += P0 V0R.
      named_barrier_sync(kScale1Ready, kThreads);
      if (issuer && next0) load_tiles(sm, &cache_map, 0, pages[page0 + 2], 0, kVTilesPerWg);  // V0L is free
      float scale1[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        scale1[h] = scale1_row[row + 8 * h];
        sum[h] *= scale1[h];
      }
      store_p(sm.at(p0_tile), s, scale1, row, c);
      fence_proxy_async();
      named_barrier_arrive(kP0Ready, kThreads);

      if (has1) {  // OL = OL * scale1 + P1 V1L
        named_barrier_sync(kP1Ready, kThreads);
        rescale(o, scale1);
        if (valid_keys(page1) < kKeys) zero_v_rows(sm, k1, 0, valid_keys(page1), wg);
        fence_registers(o);
        wgmma_fence();
        issue_pv_shared(sm, o, p1_tile, sm.tile(k1, 0));
        wgmma_commit();
      }
      if (next0) {  // S of the next even page; its tiles 0-3 were requested above
        fence_registers(s);
        wgmma_fence();
        issue_scores<0, kVTilesPerWg>(sm, 0, next_parity, s, true);
        wgmma_commit();
        wgmma_wait<1>();  // P1 V1L is done: V1L and P1 are free
        fence_registers(o);
        if (issuer && next1) {
          load_tiles(sm, &cache_map, 1, pages[page1 + 2], 0, kVTilesPerWg);
          load_tiles(sm, &cache_map, 1, pages[page1 + 2], kRopeTile, kTiles);
        }
        issue_scores<kVTilesPerWg, kTiles>(sm, 0, next_parity, s, false);
        wgmma_commit();
      }
      wgmma_wait<0>();
      fence_registers(o);
      fence_registers(s);
    } else {
      // Softmax of page 1 against m_a -> m_b.
      named_barrier_sync(kScale0Ready, kThreads);
      float m_b[2], scale0[2], scale1[2], page_sum[2] = {0.f, 0.f};
      if (has1) {
        mask_and_max(s, valid_keys(page1), p.scale_log2, c, m_b);
      } else {
        m_b[0] = m_b[1] = -INFINITY;
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float m_a = running_max[row + 8 * h];
        scale0[h] = scale0_row[row + 8 * h];
        m_b[h] = fmaxf(m_a, m_b[h]);
        scale1[h] = fast_exp2(m_a - m_b[h]);
      }
      __syncwarp();
      if (c == 0)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          scale1_row[row + 8 * h] = scale1[h];
          running_max[row + 8 * h] = m_b[h];
        }
      named_barrier_arrive(kScale1Ready, kThreads);
      if (has1) exponentiate(s, p.scale_log2, m_b, page_sum);
      float both[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        both[h] = scale0[h] * scale1[h];
        sum[h] = sum[h] * both[h] + page_sum[h];
      }
      rescale(o, both);
      if (has1) {  // P1 to shared for WG 0, then OR += P1 V1R
        const float one[2] = {1.f, 1.f};
        store_p(sm.at(p1_tile), s, one, row, c);
        fence_proxy_async();
        pack_p(s, pa);
        if (valid_keys(page1) < kKeys) zero_v_rows(sm, k1, kVTilesPerWg, valid_keys(page1), wg);
        fence_registers(o);
        wgmma_fence();
        issue_pv_registers(sm, o, pa, sm.tile(k1, kVTilesPerWg));
        wgmma_commit();
      }
      // OR += P0 V0R.
      named_barrier_sync(kP0Ready, kThreads);
      if (valid_keys(page0) < kKeys) zero_v_rows(sm, k0, kVTilesPerWg, valid_keys(page0), wg);
      fence_registers(o);
      wgmma_fence();
      issue_pv_shared(sm, o, p0_tile, sm.tile(k0, kVTilesPerWg));
      wgmma_commit();
      if (has1) named_barrier_arrive(kP1Ready, kThreads);  // after both P V are queued: WG 0's P1 V1L follows them
      wgmma_wait<1>();  // P1 V1R is done (when issued): V1R is free
      fence_registers(o);
      if (issuer && next1) load_tiles(sm, &cache_map, 1, pages[page1 + 2], kVTilesPerWg, kRopeTile);
      wgmma_wait<0>();  // P0 V0R is done: V0R and P0 are free
      fence_registers(o);
      if (issuer && next0) load_tiles(sm, &cache_map, 0, pages[page0 + 2], kVTilesPerWg, kTiles);
      if (next1) {  // S of the next odd page: its own tiles 4-7 first, then those WG 0 requests
        fence_registers(s);
        wgmma_fence();
        issue_scores<kVTilesPerWg, kRopeTile>(sm, 1, next_parity, s, true);
        issue_scores<0, kVTilesPerWg>(sm, 1, next_parity, s, false);
        issue_scores<kRopeTile, kTiles>(sm, 1, next_parity, s, false);
        wgmma_commit();
        wgmma_wait<0>();
        fence_registers(s);
      }
    }
  }

  // Row sums: the quad's keys, then the other warpgroup's.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
    if (c == 0) sm.stats(kSumRow + wg)[row + 8 * h] = sum[h];
  }
  __syncthreads();
  float final_max[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    sum[h] += sm.stats(kSumRow + (wg ^ 1))[row + 8 * h];
    final_max[h] = running_max[row + 8 * h];
  }

  // The output leaves through shared memory (the pages' buffers are free: both warpgroups are past
  // the barrier above, and no load is in flight): each thread's fragment into its warpgroup's staging,
  // [64 rows][256 dims] row-major with each row's 16-byte chunks swizzled by row % 8 (no bank
  // conflicts either way), then every row out whole, a warp a row, 16 bytes a lane. The fragment's
  // own 4- and 8-byte stores, eight rows of half-used sectors an instruction, were 4% of the kernel's
  // stall samples at T = 64, 4K (Nsight Compute), at its tail, where the next block waits for the SM.
  const bool split_out = p.num_splits > 1;
  const int row_bytes = split_out ? kDimsPerWg * 4 : kDimsPerWg * 2;  // f32 partials or the bf16 output
  unsigned char* staging = sm.at(sm.k_buffer(0)) + wg * kDimsPerWg * 4 * kHeads;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = row + 8 * h;
    unsigned char* staged = staging + r * row_bytes;
    if (split_out) {
#pragma unroll
      for (int j = 0; j < kDimsPerWg / 8; ++j)  // dims 8 j + 2 c, + 1: bytes 32 j + 8 c
        *reinterpret_cast<float2*>(staged + (((2 * j + c / 2) ^ (r & 7)) * 16) + 8 * (c % 2)) =
            make_float2(o[4 * j + 2 * h], o[4 * j + 2 * h + 1]);
      if (wg == 0 && c == 0 && r < block_heads)
        p.partial_stats[mla_partial_index(t, split, head0 + r, p)] = make_float2(final_max[h], sum[h]);
    } else {
      const float inverse = 1.f / sum[h];  // >= 1: the max key contributes exp2(0)
#pragma unroll
      for (int j = 0; j < kDimsPerWg / 8; ++j)  // bytes 16 j + 4 c
        *reinterpret_cast<__nv_bfloat162*>(staged + ((j ^ (r & 7)) * 16) + 4 * c) =
            __floats2bfloat162_rn(o[4 * j + 2 * h] * inverse, o[4 * j + 2 * h + 1] * inverse);
    }
  }
  named_barrier_sync(kWgBarrier + wg, kWgThreads);
  const int chunks = row_bytes / 16;  // 64 (f32) or 32 (bf16) a row
  for (int r = warp % 4; r < block_heads && r < kHeads; r += 4) {
    const int head = head0 + r;
    unsigned char* out =
        split_out ? reinterpret_cast<unsigned char*>(p.partial_out + mla_partial_index(t, split, head, p) * kMlaLatentDim +
                                                     wg * kDimsPerWg)
                  : reinterpret_cast<unsigned char*>(p.out + (static_cast<size_t>(t) * p.heads + head) * kMlaLatentDim +
                                                     wg * kDimsPerWg);
    for (int k = lane; k < chunks; k += 32)
      *reinterpret_cast<uint4*>(out + 16 * k) =
          *reinterpret_cast<const uint4*>(staging + r * row_bytes + ((k ^ (r & 7)) * 16));
  }
}

// ---- host ----

// A [rows, 576] bf16 matrix (row stride 1152 B) read in 64 x 64 boxes with the 128-byte swizzle.
CUtensorMap make_row_map(const bf16* data, uint64_t rows, const char* what) {
  return make_swizzled_2d_map(data, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, kMlaCacheWidth, rows,
                              uint64_t{kMlaCacheWidth} * sizeof(bf16), kSwizzleDims, 64, what);
}

}  // namespace

void launch_mla_decode_wgmma(const MlaDecodeParams& p, int tokens, cudaStream_t stream) {
  DSINFER_CHECK(int64_t{tokens} * p.heads < (int64_t{1} << 31), "mla_decode (wgmma): ", tokens, " tokens x ",
                p.heads, " heads exceed the TMA row coordinate range");
  const CUtensorMap q_map = make_row_map(p.q, static_cast<uint64_t>(tokens) * p.heads, "q");
  // The cache's page count is not part of the arguments: its rows are bounded by the 32-bit TMA
  // coordinate instead (page ids are int32 and row = page * 64 stays below 2^31 for any real pool).
  const CUtensorMap cache_map = make_row_map(p.cache, uint64_t{1} << 31, "the latent cache");
  // A function attribute, not a stream operation: legal (and cheap) during graph capture.
  DSINFER_CUDA_CHECK(cudaFuncSetAttribute(mla_decode_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          kSmemBytes));
  ProgrammaticLaunch launch(dim3((p.heads + kHeads - 1) / kHeads, p.num_splits, tokens), dim3(kThreads), kSmemBytes,
                            stream);
  DSINFER_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, mla_decode_wgmma_kernel, q_map, cache_map, p));
}

}  // namespace dsinfer::backend::cuda
