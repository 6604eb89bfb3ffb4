// MLA decode attention with Hopper warpgroup MMA (wgmma.mma_async) and TMA: MlaDecodeKernel::kWgmma.
// Same contract, chunks and scratch as the other fast kernels (mla_decode.h, mla_decode_internal.cuh).
//
//   out[t, h, :] = softmax_j(scale * q[t, h, :] . row_j) @ row_j[:512],  j over the token's chunk
//
// Shapes: q [T, H, 576] bf16 (H a multiple of 64), cache [pages, 64, 576] bf16, out [T, H, 512] bf16.
// Roofline per token: bytes = kv_len * 576 * 2 (the two 64-head blocks of a chunk run side by side and
// share the page through L2) + H * 576 * 2 + H * 512 * 2; FLOPs = 2 * H * kv_len * (576 + 512), about
// 240 FLOP per cache byte at H = 128: compute-bound on H200 (~4.3 TB/s against ~990 TFLOP/s dense).
//
// Launch: grid (H / 64, splits, T), 256 threads = two warpgroups (WG 0, WG 1), one block per SM
// (~218 KB of shared memory). A block owns 64 heads of one token and walks its chunk one page (64
// keys) at a time:
//   S  = Q K^T      64 heads x 64 keys over 576 dims; WG w computes keys 32w..32w+31
//                   (36 x wgmma m64n32k16, A = Q and B = the page, both from shared memory).
//   softmax         row max exchanged between the WGs through shared memory (barrier A); each WG
//                   exponentiates its 32 keys and writes P (bf16) into shared memory (barrier B).
//   O += P V        V = the first 512 dims of the same page; WG w owns output dims 256w..256w+255
//                   (4 x wgmma m64n256k16: A = P, B = V MN-major), 128 f32 accumulators a thread.
// Shared memory, every operand in the 128-byte-swizzled K-major layout TMA writes (SWIZZLE_128B):
//   Q       [9][64 heads][64 dims]   73,728 B, loaded once
//   page    [2 stages][9][64 keys][64 dims]   2 x 73,728 B, double-buffered TMA (9 boxes of 64 x 64)
//   P       [64 heads][64 keys] bf16 lives in the page's rope block (dims 512..575): S has read it
//           by barrier A, and P's lifetime (until O += P V completes) ends when the stage is freed.
//   exchange float [2][64] row max / row sum; mbarriers.
// Pipeline: thread 0 issues the TMA loads. Pages 0 and 1 (and Q) are requested up front; page i + 1
// is requested as soon as every warp has finished O += P V of page i - 1 (mbarrier "free", 8
// arrivals), i.e. while S of page i runs, so a load has a whole page of compute to land.
// Rows past the context in the chunk's last page (stale or never written) get -inf scores by select
// and their V rows are zeroed in shared memory before P V, so garbage cannot become NaN. A token with
// position < 0 has an empty chunk: zero output (unsplit) or stats (-inf, 0).
#include "backend/cuda/mla_decode_wgmma.h"

#include <cmath>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/hopper.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/tensor_map.h"
#include "core/error.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kHeads = kMlaWgmmaHeads;       // 64: M of every MMA
constexpr int kKeys = kMlaPageSize;          // 64 keys a step: one page
constexpr int kSwizzleDims = 64;             // bf16 in one 128-byte swizzled row
constexpr int kDimBlocks = kMlaCacheWidth / kSwizzleDims;  // 9 column blocks of a row
constexpr int kRopeBlock = kDimBlocks - 1;   // dims 512..575; P's home once S is done
constexpr int kRowBytes = kSwizzleDims * 2;  // 128
constexpr int kBlockBytes = 64 * kRowBytes;  // 8,192: one [64 rows][64 dims] box
constexpr int kTileBytes = kDimBlocks * kBlockBytes;  // 73,728: Q, or one page
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kKeysPerWg = kKeys / 2;                     // 32: S columns of a warpgroup
constexpr int kDimsPerWg = kMlaLatentDim / 2;             // 256: O columns of a warpgroup
constexpr int kVBlocksPerWg = kDimsPerWg / kSwizzleDims;  // 4
static_assert(kDimBlocks * kSwizzleDims == kMlaCacheWidth && kRopeBlock * kSwizzleDims == kMlaLatentDim);
static_assert(kKeys == 64 && kHeads == 64, "one page is one 64-key step; M of wgmma is 64");

// Shared memory offsets from the 1024-byte aligned base (the 128-byte swizzle repeats every 1024 B,
// and both TMA and wgmma compute it from address bits, so every box starts 1024-aligned).
constexpr int kQOffset = 0;
constexpr int kPageOffset = kTileBytes;                    // + stage * kTileBytes
constexpr int kExchangeOffset = kPageOffset + 2 * kTileBytes;  // float [2 WGs][64 rows]
constexpr int kBarrierOffset = kExchangeOffset + 2 * kHeads * 4;  // uint64 [5]
constexpr int kQFull = 0, kPageFull = 1, kPageFree = 3;  // barrier indices (full/free: + stage)
constexpr int kNumBarriers = 5;
constexpr int kSmemBytes = kBarrierOffset + kNumBarriers * 8 + 1024;  // + alignment slack
static_assert(kSmemBytes <= 227 * 1024, "must fit Hopper's 227 KB of shared memory a block");

constexpr int kNamedBarrier = 1;  // bar.sync id of the two-warpgroup barriers (0 is __syncthreads)

// ---- wgmma shapes of this kernel (hopper.cuh has the common wrappers) ----

// MN-major V ([keys][64 dims] boxes; N = dims contiguous): leading offset = the next 64 dims (the
// next box, 8 KB on), stride offset = the next 8 keys (1024 B on). A k16 step (16 keys) advances the
// start address by 2 KB.
__device__ __forceinline__ uint64_t v_descriptor(uint32_t address) {
  return smem_descriptor(address, kBlockBytes, 1024);
}

// S[64 x 32] (+)= A[64 x 16] B[16 x 32]^T, both K-major in shared memory. The accumulator fragment:
// d[4 j + 2 h + e] = S[16 (warp % 4) + g + 8 h][8 j + 2 c + e] (g = lane / 4, c = lane % 4).
__device__ __forceinline__ void wgmma_m64n32k16(float (&d)[16], uint64_t a, uint64_t b, int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "%16, %17, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b), "r"(accumulate));
}

// O[64 x 256] += A[64 x 16] B[16 x 256]: A K-major, B MN-major (transpose bit set) in shared memory.
// Same fragment order as above with j < 32.
__device__ __forceinline__ void wgmma_m64n256k16_b_mn(float (&d)[128], uint64_t a, uint64_t b) {
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
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]),
        "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]),
        "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]),
        "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b));
}

// ---- the kernel ----

__global__ void __launch_bounds__(kThreads, 1)
    mla_decode_wgmma_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap cache_map,
                            const MlaDecodeParams p) {
  const int head0 = blockIdx.x * kHeads, split = blockIdx.y, t = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wg = warp / 4;                 // warpgroup: key half of S, dim half of O
  const int g = lane / 4, c = lane % 4;
  const int row_in_tile = 16 * (warp % 4) + g;  // this thread's head rows: row_in_tile, row_in_tile + 8

  const int sequence = p.token_sequence[t];
  const MlaRowRange rows = mla_split_rows(mla_visible_rows(p, t, sequence), split, p.num_splits, p.min_split_pages);
  if (rows.empty()) {  // uniform over the block, before any barrier exists
    for (int h = warp; h < kHeads; h += kWarps) mla_finish_empty(p, t, split, head0 + h, lane);
    return;
  }
  const int num_tiles = (rows.end - rows.begin + kKeys - 1) / kKeys;  // chunks start on a page boundary
  const int32_t* pages = p.page_ids + p.page_table_start[sequence] + rows.begin / kKeys;

  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_address = smem_address(smem_raw);
  const uint32_t base = (raw_address + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw_address);
  float* exchange = reinterpret_cast<float*>(smem + kExchangeOffset);  // [2][64]
  const uint32_t barriers = base + kBarrierOffset;
  auto barrier = [&](int index) { return barriers + 8u * index; };

  // Page `tile` of the chunk into stage `stage`: 9 boxes of [64 keys][64 dims].
  auto load_page = [&](int tile, int stage) {
    const uint32_t full = barrier(kPageFull + stage);
    mbarrier_arrive_expect_tx(full, kTileBytes);
    const int row = pages[tile] * kKeys;
    const uint32_t target = base + kPageOffset + stage * kTileBytes;
#pragma unroll
    for (int block = 0; block < kDimBlocks; ++block)
      tma_load_2d(target + block * kBlockBytes, &cache_map, block * kSwizzleDims, row, full);
  };

  if (threadIdx.x == 0) {
    mbarrier_init(barrier(kQFull), 1);
    mbarrier_init(barrier(kPageFull), 1);
    mbarrier_init(barrier(kPageFull + 1), 1);
    mbarrier_init(barrier(kPageFree), kWarps);
    mbarrier_init(barrier(kPageFree + 1), kWarps);
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(barrier(kQFull), kTileBytes);
    const int q_row = t * p.heads + head0;
#pragma unroll
    for (int block = 0; block < kDimBlocks; ++block)
      tma_load_2d(base + kQOffset + block * kBlockBytes, &q_map, block * kSwizzleDims, q_row, barrier(kQFull));
    load_page(0, 0);
    if (num_tiles > 1) load_page(1, 1);
  }

  // Accumulators, zeroed through opaque moves: with plain `= 0.f` the compiler shares one zero
  // register among them and ptxas then serialises the wgmmas (C7515).
  float o[4 * kDimsPerWg / 8];  // O[row_in_tile + 8 h][256 wg + 8 j + 2 c + e] = o[4 j + 2 h + e]
  zero_registers(o);
  float s[4 * kKeysPerWg / 8];  // S[row_in_tile + 8 h][32 wg + 8 j + 2 c + e] = s[4 j + 2 h + e]
  zero_registers(s);
  float running_max[2] = {-INFINITY, -INFINITY};  // log2 units; identical in both warpgroups
  float partial_sum[2] = {0.f, 0.f};              // this thread's keys only; reduced at the end

  mbarrier_wait(barrier(kQFull), 0);
  __syncwarp();

  for (int tile = 0; tile < num_tiles; ++tile) {
    const int stage = tile & 1;
    const uint32_t page = base + kPageOffset + stage * kTileBytes;
    // O += P V of the previous page is complete: its stage may be refilled (with page tile + 1,
    // requested below once all 8 warps have said so). Waiting here, rather than with
    // wgmma.wait_group 1 after issuing S, keeps ptxas from serialising every wgmma (C7514: it cannot
    // follow a group left pending across the loop's back edge through a wait_group 1).
    wgmma_wait<0>();
    fence_registers(o);
    if (tile > 0 && lane == 0) mbarrier_arrive(barrier(kPageFree + (stage ^ 1)));
    mbarrier_wait(barrier(kPageFull + stage), (tile >> 1) & 1);
    __syncwarp();  // the lanes leave the spin loop at different times; wgmma needs the warp converged

    // S = Q K^T for this warpgroup's 32 keys (rows 32 wg.. of every box), 36 k16 steps.
    fence_registers(s);
    wgmma_fence();
#pragma unroll
    for (int block = 0; block < kDimBlocks; ++block) {
#pragma unroll
      for (int k = 0; k < kSwizzleDims / 16; ++k) {
        const uint64_t a = k_major_descriptor(base + kQOffset + block * kBlockBytes + 32 * k);
        const uint64_t b = k_major_descriptor(page + block * kBlockBytes + wg * kKeysPerWg * kRowBytes + 32 * k);
        wgmma_m64n32k16(s, a, b, block | k);
      }
    }
    wgmma_commit();
    fence_registers(s);

    // Page tile + 1 into the stage page tile - 1 used, once every warp has finished with it. Issued
    // after this warp's S so that warpgroup 0 does not wait for warpgroup 1 before its MMAs.
    if (threadIdx.x == 0 && tile > 0 && tile + 1 < num_tiles) {
      mbarrier_wait(barrier(kPageFree + (stage ^ 1)), ((tile - 1) >> 1) & 1);
      load_page(tile + 1, stage ^ 1);
    }
    __syncwarp();
    wgmma_wait<0>();
    fence_registers(s);

    // Scores in log2 units; keys past the chunk's end are -inf by select (their rows may hold NaN).
    const int valid = rows.end - (rows.begin + tile * kKeys);  // >= 1; > 64 except on the last page
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kKeysPerWg / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = wg * kKeysPerWg + 8 * j + 2 * c + e;
          float& value = s[4 * j + 2 * h + e];
          value = key < valid ? value * p.scale_log2 : -INFINITY;
          tile_max[h] = fmaxf(tile_max[h], value);
        }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
      if (c == 0) exchange[wg * kHeads + row_in_tile + 8 * h] = tile_max[h];
    }
    // Barrier A: both halves' maxima are written, and both warpgroups' S reads of this page are
    // done (each waited for its own S above), so the rope block may now take P.
    named_barrier_sync(kNamedBarrier, kThreads);

    float correction[2], new_max[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float other = exchange[(wg ^ 1) * kHeads + row_in_tile + 8 * h];
      // Finite: key 0 of every page is valid, and it lies in warpgroup 0's half.
      new_max[h] = fmaxf(running_max[h], fmaxf(tile_max[h], other));
      correction[h] = exp2f(running_max[h] - new_max[h]);  // 0 on the first page (-inf - finite)
      running_max[h] = new_max[h];
      partial_sum[h] *= correction[h];
    }

    // P = exp2(S - max) as bf16 into the rope block, K-major [64 heads][64 keys] with the 128-byte
    // swizzle: the 16-byte chunk (key / 8) of row r sits at chunk (key / 8) ^ (r % 8).
    const uint32_t p_address = page + kRopeBlock * kBlockBytes;
    unsigned char* p_tile = smem + (p_address - base);
#pragma unroll
    for (int j = 0; j < kKeysPerWg / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float w0 = exp2f(s[4 * j + 2 * h] - new_max[h]);
        const float w1 = exp2f(s[4 * j + 2 * h + 1] - new_max[h]);
        partial_sum[h] += w0 + w1;
        const int r = row_in_tile + 8 * h;
        const int chunk = (wg * kKeysPerWg / 8 + j) ^ (r & 7);
        *reinterpret_cast<uint32_t*>(p_tile + r * kRowBytes + chunk * 16 + 4 * c) = pack_bf16(w0, w1);
      }
    // The chunk's last page may end early: zero this warpgroup's V rows past the end (whole
    // 128-byte rows, so the swizzle does not matter) so that P = 0 never meets NaN.
    if (valid < kKeys) {
      const int wg_thread = threadIdx.x % 128;
      const int pieces = (kKeys - valid) * kVBlocksPerWg * 8;  // 16-byte pieces
      for (int i = wg_thread; i < pieces; i += 128) {
        const int r = valid + i / (kVBlocksPerWg * 8);
        const int block = wg * kVBlocksPerWg + (i / 8) % kVBlocksPerWg;
        *reinterpret_cast<uint4*>(smem + (page - base) + block * kBlockBytes + r * kRowBytes + (i % 8) * 16) =
            make_uint4(0u, 0u, 0u, 0u);
      }
    }
    fence_proxy_async();  // P and the zeroed rows, before wgmma reads them through the async proxy

    // Rescale O (no MMA is in flight: both groups were waited for). Skipped by whole warps when no
    // row max moved, which is most pages after the first.
    if (__any_sync(0xffffffffu, correction[0] != 1.f || correction[1] != 1.f)) {
#pragma unroll
      for (int j = 0; j < kDimsPerWg / 8; ++j) {
        o[4 * j] *= correction[0];
        o[4 * j + 1] *= correction[0];
        o[4 * j + 2] *= correction[1];
        o[4 * j + 3] *= correction[1];
      }
    }
    // Barrier B: all of P (both key halves) and the zeroed rows are in shared memory.
    named_barrier_sync(kNamedBarrier, kThreads);

    // O[64, 256 wg..] += P[64, 64 keys] V[64 keys, 256 wg..], 4 k16 steps of 16 keys.
    fence_registers(o);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kKeys / 16; ++k) {
      const uint64_t a = k_major_descriptor(p_address + 32 * k);
      const uint64_t b = v_descriptor(page + wg * kVBlocksPerWg * kBlockBytes + 16 * k * kRowBytes);
      wgmma_m64n256k16_b_mn(o, a, b);
    }
    wgmma_commit();
    fence_registers(o);
  }
  wgmma_wait<0>();
  fence_registers(o);

  // Row sums: the quad's keys, then the other warpgroup's half (the exchange buffer's last reads
  // were before the final barrier B).
  float sum[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    sum[h] = partial_sum[h];
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
    if (c == 0) exchange[wg * kHeads + row_in_tile + 8 * h] = sum[h];
  }
  named_barrier_sync(kNamedBarrier, kThreads);
#pragma unroll
  for (int h = 0; h < 2; ++h) sum[h] += exchange[(wg ^ 1) * kHeads + row_in_tile + 8 * h];

  const int dim0 = wg * kDimsPerWg + 2 * c;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int head = head0 + row_in_tile + 8 * h;
    if (p.num_splits == 1) {
      const float inverse = 1.f / sum[h];  // >= 1: the max key contributes exp2(0)
      bf16* out = p.out + (static_cast<size_t>(t) * p.heads + head) * kMlaLatentDim + dim0;
#pragma unroll
      for (int j = 0; j < kDimsPerWg / 8; ++j)
        *reinterpret_cast<__nv_bfloat162*>(out + 8 * j) =
            __floats2bfloat162_rn(o[4 * j + 2 * h] * inverse, o[4 * j + 2 * h + 1] * inverse);
    } else {
      const size_t index = mla_partial_index(t, split, head, p);
      float* out = p.partial_out + index * kMlaLatentDim + dim0;
#pragma unroll
      for (int j = 0; j < kDimsPerWg / 8; ++j)
        *reinterpret_cast<float2*>(out + 8 * j) = make_float2(o[4 * j + 2 * h], o[4 * j + 2 * h + 1]);
      if (wg == 0 && c == 0) p.partial_stats[index] = make_float2(running_max[h], sum[h]);
    }
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
  DSINFER_CHECK(mla_decode_wgmma_supports(p.heads), "mla_decode (wgmma): ", p.heads,
                " heads are not a multiple of ", kHeads);
  DSINFER_CHECK(int64_t{tokens} * p.heads < (int64_t{1} << 31), "mla_decode (wgmma): ", tokens, " tokens x ",
                p.heads, " heads exceed the TMA row coordinate range");
  const CUtensorMap q_map = make_row_map(p.q, static_cast<uint64_t>(tokens) * p.heads, "q");
  // The cache's page count is not part of the arguments: its rows are bounded by the 32-bit TMA
  // coordinate instead (page ids are int32 and row = page * 64 stays below 2^31 for any real pool).
  const CUtensorMap cache_map = make_row_map(p.cache, uint64_t{1} << 31, "the latent cache");
  // A function attribute, not a stream operation: legal (and cheap) during graph capture.
  DSINFER_CUDA_CHECK(cudaFuncSetAttribute(mla_decode_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          kSmemBytes));
  const dim3 grid(p.heads / kHeads, p.num_splits, tokens);
  mla_decode_wgmma_kernel<<<grid, kThreads, kSmemBytes, stream>>>(q_map, cache_map, p);
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
