// W4A8 routed-expert products (moe_w4a8_rows.h): tensor-core products on the packed int4 weights, with
// the weights streamed through a per-warp cp.async ring, and the reference kernel.
//
// Shapes (V3: E = 256, I = 2048, H = 7168, top-8; G = 128 from dsinfer quantize, 32 for Kimi-K2):
// gate_up W [E, 2I, H / 2] bytes + scales [E, 2I, H / G] f32; down D [E, H, I / 2] + [E, H, I / G];
// activations q [rows, K] (e4m3 values as f16, permuted by 8 columns) + scales [rows] f32.
//
// Roofline. At decode every weight of every touched expert is read once: 22 MB of int4 per expert
// (+ 1.4 MB of scales at G = 128, 5.5 MB at G = 32), 176 MB at T = 1 (8 experts), 5.6 GB (+0.35 / 1.4 GB)
// from T ~ 100 on: half of FP8's bytes plus the scales (FP8 / W4A8 bytes: 1.88 at G = 128, 1.60 at G =
// 32). FLOPs are 4 per weight byte per row: at 32 rows 128 FLOP/byte, still far below mma.sync's f16
// rate over HBM's bytes, so the kernel is memory bound up to about 32 rows per expert; past that
// an expert is cut into items of chunk_rows rows that each read (mostly from L2: the items of one weight
// tile are consecutive) and unpack its weights again, so prefill-sized steps are bound by the unpacking
// and the mma.sync issue rate (correct, not fast: a grouped wgmma kernel would be the next step).
//
// Why this layout. mma.sync.m16n8k16 (f16 in, f32 accumulate) with A = weights (16 rows of a weight tile,
// K-contiguous: the row-major A operand) and B = activation rows (the col operand): the weights reach the
// tensor cores as they are stored. The reduction over K does not care about the order of K, so A and B
// use the same permutation of K inside each k16 step (moe_fp8_rows.cu does the same): lane (g = lane / 4,
// c = lane % 4) takes 32-bit word c of each 16-byte chunk (32 columns) of its weight rows g and g + 8:
// eight int4 values, columns 8c .. 8c + 7 of the chunk. The unpacking below turns a word into four f16
// pairs, columns (0, 4), (1, 5), (2, 6), (3, 7), one lop3 and one sub or fma each, plus a shift per word
// (exact: int4 -> f16 is exact); pairs (0, 4) and (1, 5) are a0 / a2 of one k16 mma (row g; row g + 8's word gives a1 / a3),
// pairs (2, 6) and (3, 7) of a second. So the B operand needs the same columns, which is why the
// activations are stored permuted by 8 columns (0 4 1 5 2 6 3 7): one 16-byte load is a lane's b0 b1 of
// both mmas. All four lanes of a group read the same 32-column chunk, so every mma sums 16 columns of
// one chunk, and a chunk lies inside one scale group for any G that is a multiple of 32: the per-group
// promotion needs no shuffle. The word-c-of-each-row distribution is exactly what ldmatrix gives
// (register i of lane (g, c) = word c of the row that lane 8i + g addressed), so a warp reads a chunk of
// its 32 rows with one ldmatrix.x4 from shared memory.
// Per 128 columns a warp (32 weight rows) unpacks 16 words a lane (144 instructions), reads 4
// ldmatrix.x4, issues 8 mma per (m16 tile, n8 tile) and promotes 128 / G times (16 FFMA per n8 tile):
// from the SASS (nvcc 13.0), ~235 instructions per 2 KB of int4 with one n8 tile (1..8 rows) and G =
// 128, ~290 with two, ~50-100 more at G = 32. At H200's 4.3 TB/s copy rate an SM must take 2 KB every
// ~125 clocks: ~1.9-2.3 warp instructions per clock of the 4 an SM issues (FP8's kernel needs ~0.7), so
// the unpacking, not the bytes, may be what limits this kernel; moe_w4a8_rows_check tells.
//
// Kernels, in stream order from moe.cu:
//   w4a8_quantize_kernel (x or h): one block of 256 threads per row: the row (times its expert's AWQ
//     factors, where given: the pre-scale fused into this pass, read as 32 bytes a unit) and its amax (or
//     its expert's static scale), then the row in 16-byte units, each 8 columns permuted.
//   w4a8_rows_kernel<gate_up, kMaxNt, kGroupChunks>: persistent, 2 blocks x 128 threads per SM (launch
//     bounds: up to 255 registers; the grid
//     is SMs x resident blocks, at most the work). Every block lists the experts with rows from the device
//     offsets (expert order) and walks work items item = blockIdx.x + n * gridDim.x of (expert, 128-row
//     weight tile, chunk of up to 8 kMaxNt rows), the chunks of one tile consecutive (they share the tile in
//     L2): gate_up, 64 gate rows and the matching 64 up rows (outputs i0 .. i0 + 63); down, 128 output
//     rows. Warp w takes 32 weight rows of the tile as two m16 tiles (gate_up: gate rows i0 + 16w .. +15
//     and up rows I + i0 + 16w .. +15, so silu(g) * u pairs the same register of both; down: rows 32w ..
//     32w + 31) and all of the chunk's rows as up to kMaxNt n8 tiles, over the whole of K (no split-K).
//     Per 32-column chunk: 2 k16 mmas per (m16, n8) into an f32 partial; at the end of each scale group
//     the partial times the weight rows' group scales is added to the running sum (zeroed partial after);
//     at the end of K the sum times the row's activation scale is the output. The body of a 128-column
//     block is compiled once per n8 tile count (consume_block_of) and picked per item, so an item of
//     8 rows issues no instruction for the tiles it does not have.
//   Weight pipeline: each warp owns a ring slice of kStages stages x 32 rows x 64 bytes (128 columns) in
//     shared memory (96 KB a block: 12 stages), filled by its own lanes with cp.async.cg (L2 only,
//     evict-first, a 256-byte L2 prefetch: each DRAM page opened serves four 128-column blocks of a row),
//     kStages - 1 stages in flight, across work items (the producer walks ahead into the next item): 176
//     KB in flight per SM. Chunk q of row r sits at 16-byte position q ^ ((r >> 1) & 3) of the row's 64
//     bytes, so the 8 rows of each ldmatrix phase hit 8 distinct 16-byte bank groups. A lane's
//     wait_group then a __syncwarp publishes a stage to the warp (and orders the warp's reads of the
//     previous stage before its slot is refilled): no block barrier. The weight scales come through L1,
//     requested before the wait for the stage's weights; the activation fragments (f16, 16 bytes per lane,
//     n8 tile and chunk; shared by the block's 4 warps, which walk K in step) through L1 too, each block's
//     lines prefetched into L1 one block ahead (prefetch.global.L1: no registers held).
//   w4a8_reference_kernel<gate_up>: one thread per output, grid (outputs / 128, E), each expert's rows 8 at a
//     time.
#include "backend/cuda/moe_w4a8_rows.h"

#include <cuda_fp8.h>

#include <algorithm>
#include <climits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/expert_list.cuh"
#include "backend/cuda/mma.cuh"
#include "core/dtype.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kKBlock = 128;                      // columns per ring stage
constexpr int kKBlockBytes = kKBlock / 2;         // 64 bytes of a weight row
constexpr int kChunkCols = 32;                    // one 16-byte chunk of a weight row: two k16 mmas
constexpr int kChunksPerKBlock = kKBlock / kChunkCols;
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kWarpRows = 32;                     // weight rows per warp: two m16 tiles
constexpr int kTileRows = kWarps * kWarpRows;     // weight rows per work item
constexpr int kGateUpTileOutputs = kTileRows / 2;  // gate_up: 64 gate rows + their 64 up rows
constexpr int kBlocksPerSm = 2;                   // launch bounds: registers for two blocks (the ring allows two)
constexpr int kMaxExperts = 1024;
constexpr int kRingBytes = 96 * 1024;
constexpr uint32_t kWarpStageBytes = kWarpRows * kKBlockBytes;  // 2 KB
constexpr uint32_t kStageBytes = kWarps * kWarpStageBytes;      // 8 KB
constexpr int kStages = kRingBytes / static_cast<int>(kStageBytes);
constexpr int kQuantThreads = 256;
constexpr int kReferenceThreads = 128;
constexpr int kReferenceRows = 8;  // an expert's rows per pass over its weights (reference kernel)
static_assert(kStages >= 2, "the ring needs a stage in flight while one is read");

struct Params {
  const uint8_t* weight;      // [E, weight_rows, k / 2]
  const float* weight_scale;  // [E, weight_rows, groups]
  const __half* act;          // [act rows, k], e4m3 values as f16, permuted by 8 columns
  const float* act_scale;     // [act rows]
  const int32_t* offsets;     // [E + 1]
  const int32_t* row_source;  // [rows] token * top_k + slot (act_per_token)
  bf16* out;                  // [rows, outputs]
  int top_k;
  int num_experts;
  int k;             // H (gate_up) or I (down)
  int k_blocks;      // k / 128 (tensor-core kernel)
  int groups;        // k / G
  int group_size;    // G
  int group_blocks;  // G / 128 (tensor-core kernel, G a multiple of 128)
  int weight_rows;   // 2I or H
  int outputs;       // I or H
  int inter;         // I: gate_up's up rows start here
  int tiles;         // work tiles per expert chunk: I / 64 or H / 128 (tensor-core kernel)
  bool act_per_token;
};

// ---- device helpers ----

__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// 16 bytes global -> shared, L2 only, the line marked evict-first, its 256-byte neighbourhood prefetched into L2.
__device__ __forceinline__ void copy_weights_16(uint32_t shared, const void* global, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2;\n" ::"r"(shared), "l"(global),
               "l"(policy)
               : "memory");
}
// The 128-byte line holding `global` into L1 (no registers, no wait).
__device__ __forceinline__ void prefetch_l1(const void* global) {
  asm volatile("prefetch.global.L1 [%0];\n" ::"l"(global));
}
__device__ __forceinline__ void commit_group() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// ldmatrix.x4 at a shared-memory address (mma.cuh's layout: register i of lane (g, c) is word c of the
// 16 bytes that lane 8i + g addressed).
__device__ __forceinline__ void ldmatrix_x4_at(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

// d += a (16 x 16 f16, row major) * b (16 x 8 f16, column major), f32 accumulate (mma.cuh's layout).
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t b, uint32_t c) {  // (a & b) | c, one lop3
  uint32_t out;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;\n" : "=r"(out) : "r"(a), "r"(b), "r"(c));
  return out;
}

// One 32-bit word of a packed weight row (8 int4 values, column j in bits 4j .. 4j + 3, stored as q + 8) as
// four f16 pairs of q, the first of each pair in the low half: pair[0] = columns (0, 4), pair[1] = (1, 5),
// pair[2] = (2, 6), pair[3] = (3, 7). Exact: a nibble n or'ed into the mantissa of f16 1024 is 1024 + n
// (1024 + 16 n one position up), and 1024 + n - 1032 = (1024 + 16 n) / 16 - 72 = n - 8 = q.
__device__ __forceinline__ void int4x8_to_f16x2x4(uint32_t word, uint32_t (&pair)[4]) {
  constexpr uint32_t kLow = 0x000f000fu, kHigh = 0x00f000f0u;
  constexpr uint32_t kMagic = 0x64006400u;     // f16 1024, twice
  constexpr uint32_t kOffset = 0x64086408u;    // 1032
  constexpr uint32_t kSixteenth = 0x2c002c00u;  // 1 / 16
  constexpr uint32_t kMinus72 = 0xd480d480u;   // -72
  const uint32_t shifted = word >> 8;
  const uint32_t p04 = and_or(word, kLow, kMagic), p15 = and_or(word, kHigh, kMagic);
  const uint32_t p26 = and_or(shifted, kLow, kMagic), p37 = and_or(shifted, kHigh, kMagic);
  asm("sub.f16x2 %0, %1, %2;\n" : "=r"(pair[0]) : "r"(p04), "r"(kOffset));
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(pair[1]) : "r"(p15), "r"(kSixteenth), "r"(kMinus72));
  asm("sub.f16x2 %0, %1, %2;\n" : "=r"(pair[2]) : "r"(p26), "r"(kOffset));
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(pair[3]) : "r"(p37), "r"(kSixteenth), "r"(kMinus72));
}

__device__ __forceinline__ float silu_times(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

// The expert whose rows [offsets[e], offsets[e + 1]) hold `row` (row < offsets[num_experts]).
__device__ __forceinline__ int expert_of_row(const int32_t* offsets, int num_experts, int64_t row) {
  int lo = 0, hi = num_experts - 1;  // the last expert whose first row is <= row
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= row) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Where column k of an activation row sits in the permuted layout (8 columns stored as 0 4 1 5 2 6 3 7).
__host__ __device__ constexpr int64_t permuted_column(int64_t k) { return (k & ~int64_t{7}) + 2 * (k % 4) + (k / 4) % 2; }

// A work item: weight tile `tile` of `expert` times the expert's rows [first, first + count).
struct Item {
  int expert, tile, first, count;
};

// Item `item` of the list: the expert is found by binary search; within it, the chunks of one tile are
// consecutive (the blocks working on them at once share the tile's weights in L2).
__device__ __forceinline__ Item decode_item(const Params& p, int item, int chunk_rows, const int* active,
                                            const int* first_item, int listed) {
  int lo = 0, hi = listed - 1;  // the last expert whose first item is <= item
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (first_item[mid] <= item) lo = mid;
    else hi = mid - 1;
  }
  const int expert = active[lo], local = item - first_item[lo];
  const int begin = p.offsets[expert], rows = p.offsets[expert + 1] - begin;
  const int chunks = (rows + chunk_rows - 1) / chunk_rows;
  const int chunk = local % chunks;
  Item it;
  it.expert = expert;
  it.tile = local / chunks;
  it.first = begin + chunk * chunk_rows;
  it.count = min(rows - chunk * chunk_rows, chunk_rows);
  return it;
}

// ---- the tensor-core product kernel ----

// Groups that end in a 128-column block (at most, for kGroupChunks 4; see w4a8_rows_kernel).
template <int kGroupChunks>
constexpr int kGroupsPerBlock = kGroupChunks == 4 ? 1 : kChunksPerKBlock / kGroupChunks;

// One 128-column block of a work item whose activation rows fill kTiles n8 tiles (a compile-time count, so
// that no instruction is issued for an empty tile): this lane's activation fragments at column0, the
// warp's weights in `stage` (landed), the mmas into part, and the promotion of the groups that end in the
// block into sum. act_lane[jn]: the lane's activation row of n8 tile jn at column 8c.
template <int kGroupChunks, int kMaxNt, int kTiles>
__device__ __forceinline__ void consume_block_of(const __half* const (&act_lane)[kMaxNt], int64_t column0,
                                                 bool prefetch_next, uint32_t stage, int read_swizzle,
                                                 bool block_ends_group,
                                                 const float (&weight_scale)[kGroupsPerBlock<kGroupChunks>][2][2],
                                                 float (&part)[2][kMaxNt][4], float (&sum)[2][kMaxNt][4]) {
  const int c = static_cast<int>(threadIdx.x) % 4;
  uint4 b[kChunksPerKBlock][kTiles];  // this lane's 8 permuted columns 32 j + 8c .. +7 of n8 tile jn
#pragma unroll
  for (int jn = 0; jn < kTiles; ++jn) {
    const __half* block = act_lane[jn] + column0;
#pragma unroll
    for (int j = 0; j < kChunksPerKBlock; ++j) b[j][jn] = __ldg(reinterpret_cast<const uint4*>(block + j * kChunkCols));
    // The next block's two 128-byte lines of this row into L1 (lanes c = 0, 1 of each row): its loads then
    // wait for L1, not L2, without holding registers.
    if (c < 2 && prefetch_next) prefetch_l1(block + kKBlock + 64 * c);
  }
#pragma unroll
  for (int j = 0; j < kChunksPerKBlock; ++j) {
    uint32_t words[4];  // [2 m + h]: word c of chunk j of slice row 16 m + 8 h + g
    ldmatrix_x4_at(words, stage + 16 * (j ^ read_swizzle));
    uint32_t a[2][2][4];  // [m16 tile][mma of the chunk][a0..a3]
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      uint32_t row_g[4], row_g8[4];
      int4x8_to_f16x2x4(words[2 * m], row_g);
      int4x8_to_f16x2x4(words[2 * m + 1], row_g8);
      // First mma: columns (0, 4) as a0 / a1 (rows g / g + 8), (1, 5) as a2 / a3; second: (2, 6), (3, 7).
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        a[m][q][0] = row_g[2 * q];
        a[m][q][1] = row_g8[2 * q];
        a[m][q][2] = row_g[2 * q + 1];
        a[m][q][3] = row_g8[2 * q + 1];
      }
    }
#pragma unroll
    for (int jn = 0; jn < kTiles; ++jn) {
      const uint4 bj = b[j][jn];  // (x0, x4) (x1, x5) (x2, x6) (x3, x7)
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        mma_f16(part[m][jn], a[m][0], bj.x, bj.y);
        mma_f16(part[m][jn], a[m][1], bj.z, bj.w);
      }
    }
    // Promotion at the end of a group: c0, c1 are weight row g, c2, c3 row g + 8.
    if ((j + 1) % kGroupChunks == 0 && block_ends_group) {
      const int group = kGroupChunks == 4 ? 0 : j / kGroupChunks;
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int jn = 0; jn < kTiles; ++jn)
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            sum[m][jn][r] = fmaf(part[m][jn][r], weight_scale[group][m][r / 2], sum[m][jn][r]);
            part[m][jn][r] = 0.0f;
          }
    }
  }
}

// kGroupChunks: the scale groups' layout in 32-column chunks, known at compile time so that the promotions
// and the scale loads unroll: 1 (G = 32: four groups a 128-column block), 2 (G = 64: two), 4 (G a
// multiple of 128: a group ends with some blocks, at their last chunk).
template <bool kGateUp, int kMaxNt, int kGroupChunks>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) w4a8_rows_kernel(const Params p) {
  static_assert(kGroupChunks == 1 || kGroupChunks == 2 || kGroupChunks == 4, "G = 32, 64 or a multiple of 128");
  constexpr int kGroups = kGroupsPerBlock<kGroupChunks>;
  // [kStages][kWarps][32 rows][64 bytes]; chunk q of row r at 16-byte position q ^ ((r >> 1) & 3).
  extern __shared__ uint4 ring[];
  __shared__ int active[kMaxExperts];
  __shared__ int first_item[kMaxExperts];
  __shared__ int warp_sums[kWarps];
  constexpr int kChunkRows = 8 * kMaxNt;

  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, c = lane % 4;
  int listed;
  // Every expert with rows, each of its ceil(rows / kChunkRows) chunks `tiles` items (expert_list.cuh).
  const int items = list_experts<kThreads>(p.offsets, p.num_experts, 1, INT_MAX, kChunkRows, p.tiles, active, first_item,
                                           warp_sums, &listed);
  const int grid = static_cast<int>(gridDim.x);
  const int my_first = static_cast<int>(blockIdx.x);
  const int my_items = my_first < items ? (items - 1 - my_first) / grid + 1 : 0;
  const int total = my_items * p.k_blocks;  // this thread's stages
  if (total == 0) return;  // uniform over the block; no barrier follows

  const int64_t row_bytes = p.k / 2;
  const uint64_t policy = evict_first_policy();
  const uint32_t warp_ring = smem_address(ring) + static_cast<uint32_t>(warp) * kWarpStageBytes;
  // This lane copies chunk c of slice rows g + 8i (i = 0..3) and reads chunk j of slice row `lane`.
  const uint32_t copy_target = warp_ring + static_cast<uint32_t>(g * kKBlockBytes + 16 * (c ^ ((lane >> 3) & 3)));
  const uint32_t read_row = warp_ring + static_cast<uint32_t>(lane * kKBlockBytes);
  const int read_swizzle = (lane >> 1) & 3;

  // First weight row of m16 tile m (0, 1) of this warp in work tile `tile`.
  auto tile_row = [&](int tile, int m) -> int64_t {
    if constexpr (kGateUp) return int64_t{m} * p.inter + int64_t{tile} * kGateUpTileOutputs + 16 * warp;
    else return int64_t{tile} * kTileRows + kWarpRows * warp + 16 * m;
  };
  // The activation row of an item's row r (rows past the count repeat the last: computed, never stored).
  auto act_row = [&](const Item& it, int r) -> int64_t {
    const int row = it.first + min(r, it.count - 1);
    return p.act_per_token ? p.row_source[row] / p.top_k : row;
  };

  // ---- producer side: stage `produced` of this thread's sequence (item by item, 128-column blocks in order)
  const uint8_t* copy_source[4];  // slice row g + 8i, byte 16c
  int produce_item = my_first, produce_block = 0, produced = 0;
  uint32_t produce_slot = 0;
  auto producer_item = [&]() {
    const Item it = decode_item(p, produce_item, kChunkRows, active, first_item, listed);
    const uint8_t* base = p.weight + int64_t{it.expert} * p.weight_rows * row_bytes;
#pragma unroll
    for (int i = 0; i < 4; ++i)  // slice row g + 8i: m16 tile i / 2, row g + 8 (i % 2) in it
      copy_source[i] = base + (tile_row(it.tile, i / 2) + g + 8 * (i % 2)) * row_bytes + 16 * c;
  };
  // Queues the next stage (if any) and commits a group either way, so that wait_group counts stay uniform.
  auto produce = [&]() {
    if (produced < total) {
      const uint32_t stage = copy_target + produce_slot * kStageBytes;
      const int64_t byte = int64_t{produce_block} * kKBlockBytes;
#pragma unroll
      for (int i = 0; i < 4; ++i) copy_weights_16(stage + i * 8 * kKBlockBytes, copy_source[i] + byte, policy);
      ++produced;
      produce_slot = produce_slot + 1 == kStages ? 0 : produce_slot + 1;
      if (++produce_block == p.k_blocks) {
        produce_block = 0;
        produce_item += grid;
        if (produced < total) producer_item();
      }
    }
    commit_group();
  };

  // ---- consumer side
  int consume_item = my_first, consume_block = 0, n_tiles = 0;
  int group_index = 0;   // the scale group of the block's first column
  int group_blocks = 0;  // kGroupChunks 4: blocks of the current group done
  Item current{};
  const __half* act_lane[kMaxNt];   // activation row of column g of n8 tile j, at column 8c
  float act_scale[kMaxNt][2];       // activation scales of columns 2c and 2c + 1 of n8 tile j
  const float* scale_row[2][2];     // [m16 tile][h]: group scales of weight row g + 8h of the tile
  auto consumer_item = [&]() {
    current = decode_item(p, consume_item, kChunkRows, active, first_item, listed);
    n_tiles = (current.count + 7) / 8;
    group_index = group_blocks = 0;
#pragma unroll
    for (int j = 0; j < kMaxNt; ++j) {
      act_lane[j] = p.act + act_row(current, 8 * j + g) * p.k + 8 * c;
#pragma unroll
      for (int e = 0; e < 2; ++e) act_scale[j][e] = __ldg(p.act_scale + act_row(current, 8 * j + 2 * c + e));
    }
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        scale_row[m][h] = p.weight_scale +
                          (int64_t{current.expert} * p.weight_rows + tile_row(current.tile, m) + 8 * h + g) * p.groups;
  };

  float sum[2][kMaxNt][4], part[2][kMaxNt][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int j = 0; j < kMaxNt; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) sum[m][j][r] = part[m][j][r] = 0.0f;

  producer_item();
  for (int s = 0; s < kStages - 1; ++s) produce();
  consumer_item();

  uint32_t consume_slot = 0;
  for (int s = 0; s < total; ++s) {
    // The scales of the groups that end in this block, requested before the wait for its weights.
    // kGroupChunks 4: whether the current group ends with this block.
    const bool block_ends_group = kGroupChunks != 4 || ++group_blocks == p.group_blocks;
    float weight_scale[kGroups][2][2];  // [group ending in this block][m16 tile][h]
    if (block_ends_group) {
#pragma unroll
      for (int e = 0; e < kGroups; ++e)
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int h = 0; h < 2; ++h) weight_scale[e][m][h] = __ldg(scale_row[m][h] + group_index + e);
      group_index += kGroups;
      group_blocks = 0;
    }
    wait_group<kStages - 2>();  // this thread's stage s has landed
    __syncwarp();               // and every lane's of this warp; the warp's reads of slot s - 1 are done
    produce();                  // into the slot read in iteration s - 1
    const uint32_t stage = read_row + consume_slot * kStageBytes;
    const int64_t column0 = int64_t{consume_block} * kKBlock;
    const bool prefetch = consume_block + 1 < p.k_blocks;
    static_assert(kMaxNt == 2 || kMaxNt == 4, "16- or 32-row items");
    switch (n_tiles) {  // uniform over the warp
      case 1:
        consume_block_of<kGroupChunks, kMaxNt, 1>(act_lane, column0, prefetch, stage, read_swizzle, block_ends_group,
                                                  weight_scale, part, sum);
        break;
      case 2:
        consume_block_of<kGroupChunks, kMaxNt, 2>(act_lane, column0, prefetch, stage, read_swizzle, block_ends_group,
                                                  weight_scale, part, sum);
        break;
      case 3:
        if constexpr (kMaxNt == 4)
          consume_block_of<kGroupChunks, kMaxNt, 3>(act_lane, column0, prefetch, stage, read_swizzle,
                                                    block_ends_group, weight_scale, part, sum);
        break;
      default:
        if constexpr (kMaxNt == 4)
          consume_block_of<kGroupChunks, kMaxNt, 4>(act_lane, column0, prefetch, stage, read_swizzle,
                                                    block_ends_group, weight_scale, part, sum);
        break;
    }
    consume_slot = consume_slot + 1 == kStages ? 0 : consume_slot + 1;

    if (++consume_block == p.k_blocks) {  // the item's last block: store its rows, start the next
#pragma unroll
      for (int jn = 0; jn < kMaxNt; ++jn) {
        if (jn >= n_tiles) continue;
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int row = 8 * jn + 2 * c + r % 2;  // the chunk's row (the mma's column)
          if (row >= current.count) continue;
          const float a_scale = act_scale[jn][r % 2];
          bf16* target = p.out + int64_t{current.first + row} * p.outputs;
          const int in_tile = g + 8 * (r / 2);  // the mma's row within each m16 tile
          if constexpr (kGateUp) {
            target[current.tile * kGateUpTileOutputs + 16 * warp + in_tile] =
                __float2bfloat16(silu_times(sum[0][jn][r] * a_scale, sum[1][jn][r] * a_scale));
          } else {
#pragma unroll
            for (int m = 0; m < 2; ++m)
              target[current.tile * kTileRows + kWarpRows * warp + 16 * m + in_tile] =
                  __float2bfloat16(sum[m][jn][r] * a_scale);
          }
        }
      }
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int jn = 0; jn < kMaxNt; ++jn)
#pragma unroll
          for (int r = 0; r < 4; ++r) sum[m][jn][r] = 0.0f;
      consume_block = 0;
      consume_item += grid;
      if (s + 1 < total) consumer_item();
    }
  }
  wait_group<0>();  // only empty groups remain; leave nothing outstanding at exit
}

// ---- the reference product kernel ----

// Block (128 outputs, expert e), one thread per output: the expert's rows kReferenceRows at a time (each
// weight code is read once per batch), each row's sums in the definition's order: per group, the products
// summed in column order in f32, then promoted in group order; times the row's activation scale. The
// order per row does not depend on the batching.
template <bool kGateUp>
__global__ void __launch_bounds__(kReferenceThreads) w4a8_reference_kernel(const Params p) {
  constexpr int kWeights = kGateUp ? 2 : 1;  // gate_up: the gate and the up row of output n
  const int n = static_cast<int>(blockIdx.x) * kReferenceThreads + static_cast<int>(threadIdx.x);
  const int expert = static_cast<int>(blockIdx.y);
  if (n >= p.outputs) return;
  const int begin = p.offsets[expert], end = p.offsets[expert + 1];
  const int64_t row_bytes = p.k / 2;
  const uint8_t* w[kWeights];
  const float* scales[kWeights];
#pragma unroll
  for (int i = 0; i < kWeights; ++i) {
    const int64_t index = int64_t{expert} * p.weight_rows + (i == 0 ? n : p.inter + int64_t{n});
    w[i] = p.weight + index * row_bytes;
    scales[i] = p.weight_scale + index * p.groups;
  }
  for (int first = begin; first < end; first += kReferenceRows) {
    const int rows = min(kReferenceRows, end - first);
    const __half* act[kReferenceRows];
#pragma unroll
    for (int r = 0; r < kReferenceRows; ++r) {
      const int row = first + min(r, rows - 1);
      act[r] = p.act + (p.act_per_token ? p.row_source[row] / p.top_k : row) * int64_t{p.k};
    }
    float total[kReferenceRows][kWeights];
#pragma unroll
    for (int r = 0; r < kReferenceRows; ++r)
#pragma unroll
      for (int i = 0; i < kWeights; ++i) total[r][i] = 0.0f;
    for (int group = 0; group < p.groups; ++group) {
      float part[kReferenceRows][kWeights];
#pragma unroll
      for (int r = 0; r < kReferenceRows; ++r)
#pragma unroll
        for (int i = 0; i < kWeights; ++i) part[r][i] = 0.0f;
      for (int64_t k = int64_t{group} * p.group_size; k < int64_t{group + 1} * p.group_size; ++k) {
        float q[kWeights];
#pragma unroll
        for (int i = 0; i < kWeights; ++i) q[i] = static_cast<float>(((w[i][k / 2] >> (4 * (k % 2))) & 0xf) - 8);
        const int64_t column = permuted_column(k);
#pragma unroll
        for (int r = 0; r < kReferenceRows; ++r) {
          const float x = __half2float(act[r][column]);
#pragma unroll
          for (int i = 0; i < kWeights; ++i) part[r][i] = fmaf(q[i], x, part[r][i]);
        }
      }
#pragma unroll
      for (int r = 0; r < kReferenceRows; ++r)
#pragma unroll
        for (int i = 0; i < kWeights; ++i) total[r][i] = fmaf(part[r][i], scales[i][group], total[r][i]);
    }
#pragma unroll
    for (int r = 0; r < kReferenceRows; ++r) {
      if (r >= rows) continue;
      const int64_t row = first + r;
      const float act_scale = p.act_scale[p.act_per_token ? p.row_source[row] / p.top_k : row];
      bf16* target = p.out + row * p.outputs + n;
      if constexpr (kGateUp) *target = __float2bfloat16(silu_times(total[r][0] * act_scale, total[r][1] * act_scale));
      else *target = __float2bfloat16(total[r][0] * act_scale);
    }
  }
}

// ---- activation quantization ----

struct QuantParams {
  const bf16* x;
  int64_t width;
  int64_t rows;
  const int32_t* row_source;
  int top_k;
  const int32_t* offsets;
  int num_experts;
  const float* input_scale;
  const float* pre_scale;  // [num_experts, width] or null
  __half* q;
  float* scale;
};

// A unit's 8 bf16 values (columns 8u .. 8u + 7 of a row) as floats, each times its AWQ factor when the
// row's expert has them (v = x * p: the CPU's order, then amax and division as without them).
__device__ __forceinline__ void unit_values(const uint4 raw, const float* factors, int64_t unit, float (&v)[8]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = __uint_as_float(words[i] << 16);
    v[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
  if (factors == nullptr) return;
  const float4 lo = __ldg(reinterpret_cast<const float4*>(factors + unit * 8));
  const float4 hi = __ldg(reinterpret_cast<const float4*>(factors + unit * 8 + 4));
  v[0] *= lo.x, v[1] *= lo.y, v[2] *= lo.z, v[3] *= lo.w;
  v[4] *= hi.x, v[5] *= hi.y, v[6] *= hi.z, v[7] *= hi.w;
}

// One block per row (grid-stride): the row's scale, then its values in units of 8 columns, each unit stored
// permuted (0 4 1 5 2 6 3 7) as the product kernels read it.
__global__ void __launch_bounds__(kQuantThreads) w4a8_quantize_kernel(const QuantParams q) {
  __shared__ float warp_amax[kQuantThreads / 32];
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int64_t units = q.width / 8;
  for (int64_t row = blockIdx.x; row < q.rows; row += gridDim.x) {  // uniform over the block
    if (q.offsets != nullptr && row >= q.offsets[q.num_experts]) return;  // and every later row
    const int64_t source = q.row_source != nullptr ? q.row_source[row] / q.top_k : row;
    const uint4* x = reinterpret_cast<const uint4*>(q.x + source * q.width);
    const int expert = q.offsets != nullptr && (q.input_scale != nullptr || q.pre_scale != nullptr)
                           ? expert_of_row(q.offsets, q.num_experts, row)
                           : 0;
    const float* factors = q.pre_scale != nullptr ? q.pre_scale + expert * q.width : nullptr;
    float scale;
    if (q.input_scale != nullptr) {
      scale = q.input_scale[expert];
    } else {
      float amax = 0.0f;
      for (int64_t u = tid; u < units; u += kQuantThreads) {
        float v[8];
        unit_values(__ldg(x + u), factors, u, v);
#pragma unroll
        for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(v[i]));
      }
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, offset));
      if (lane == 0) warp_amax[warp] = amax;
      __syncthreads();
      amax = warp_amax[0];
#pragma unroll
      for (int w = 1; w < kQuantThreads / 32; ++w) amax = fmaxf(amax, warp_amax[w]);
      __syncthreads();  // warp_amax is rewritten for the next row
      scale = amax / kFp8E4M3Max;
      if (!(scale > 0.0f)) scale = 1.0f;  // a zero row (or an underflowing scale): any scale gives zeros
    }
    uint4* out = reinterpret_cast<uint4*>(q.q + row * q.width);
    for (int64_t u = tid; u < units; u += kQuantThreads) {
      float v[8];
      unit_values(__ldg(x + u), factors, u, v);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] /= scale;  // a division, as the CPU divides
      uint32_t pairs[4];  // columns (0, 4), (1, 5), (2, 6), (3, 7): e4m3 (nearest even, saturating), then f16
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const __nv_fp8x2_storage_t two =
            __nv_cvt_float2_to_fp8x2(make_float2(v[i], v[i + 4]), __NV_SATFINITE, __NV_E4M3);
        const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(two, __NV_E4M3);
        pairs[i] = static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
      }
      out[u] = make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
    }
    if (tid == 0) q.scale[row] = scale;
  }
}

// ---- host side ----

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// The group sizes the tensor-core kernel takes (kGroupChunks): 32, 64 and multiples of 128, dividing K.
bool group_fits(int64_t k, int64_t group) {
  return group > 0 && k % group == 0 && (group == 32 || group == 64 || group % kKBlock == 0);
}

template <bool kGateUp, int kMaxNt, int kGroupChunks>
void launch_tensor_core(const Params& p, int64_t max_items, cudaStream_t stream) {
  const auto kernel = w4a8_rows_kernel<kGateUp, kMaxNt, kGroupChunks>;
  // Function attributes, not stream operations: legal during graph capture.
  DSINFER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kRingBytes));
  // Two ~105 KB blocks per SM need the largest shared-memory carveout (the L1 keeps the rest).
  DSINFER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          cudaSharedmemCarveoutMaxShared));
  int device = 0, multiprocessors = 0, resident = 0;
  DSINFER_CUDA_CHECK(cudaGetDevice(&device));
  DSINFER_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  DSINFER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kThreads, kRingBytes));
  // Persistent: every block resident at once (any grid is correct: blocks never wait for each other).
  const int64_t blocks = std::min<int64_t>(int64_t{multiprocessors} * std::max(resident, 1), max_items);
  kernel<<<static_cast<unsigned>(std::max<int64_t>(blocks, 1)), kThreads, kRingBytes, stream>>>(p);
  DSINFER_CUDA_CHECK_LAUNCH();
}

template <bool kGateUp, int kMaxNt>
void launch_tensor_core(const Params& p, int64_t max_items, cudaStream_t stream) {
  if (p.group_size == 32) launch_tensor_core<kGateUp, kMaxNt, 1>(p, max_items, stream);
  else if (p.group_size == 64) launch_tensor_core<kGateUp, kMaxNt, 2>(p, max_items, stream);
  else launch_tensor_core<kGateUp, kMaxNt, 4>(p, max_items, stream);
}

template <bool kGateUp>
void launch_reference(const Params& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((p.outputs + kReferenceThreads - 1) / kReferenceThreads),
                  static_cast<unsigned>(p.num_experts));
  w4a8_reference_kernel<kGateUp><<<grid, kReferenceThreads, 0, stream>>>(p);
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool w4a8_rows_supported(bool gate_up, int64_t hidden, int64_t inter, int64_t group_size) {
  const int64_t k = gate_up ? hidden : inter;
  const bool whole_tiles = gate_up ? inter % kGateUpTileOutputs == 0 : hidden % kTileRows == 0;
  return hidden > 0 && inter > 0 && hidden <= (1 << 16) && inter <= (1 << 16) && k % kKBlock == 0 && whole_tiles &&
         group_fits(k, group_size);
}

void w4a8_quantize(const W4a8Quantize& a, cudaStream_t stream) {
  DSINFER_CHECK(a.rows >= 0 && a.rows <= INT32_MAX && a.width > 0 && a.width % 8 == 0, "w4a8_quantize: ", a.rows,
                " rows of width ", a.width, " (the width must be a positive multiple of 8)");
  if (a.rows == 0) return;
  DSINFER_CHECK(a.x && a.q && a.scale, "w4a8_quantize: null pointer");
  DSINFER_CHECK(aligned(a.x, 16) && aligned(a.q, 16) && aligned(a.scale, 4),
                "w4a8_quantize: x and q must be 16-byte aligned, scale 4-byte aligned");
  DSINFER_CHECK(a.offsets != nullptr || (a.input_scale == nullptr && a.pre_scale == nullptr && a.row_source == nullptr),
                "w4a8_quantize: a static input scale, AWQ factors or a row permutation need the plan's offsets");
  DSINFER_CHECK(aligned(a.pre_scale, 16), "w4a8_quantize: the AWQ factors must be 16-byte aligned");
  DSINFER_CHECK(a.offsets == nullptr || (a.num_experts >= 1 && a.num_experts <= kMaxExperts && a.top_k >= 1),
                "w4a8_quantize: ", a.num_experts, " experts (1..", kMaxExperts, "), top_k ", a.top_k);
  QuantParams p{};
  p.x = a.x;
  p.width = a.width;
  p.rows = a.rows;
  p.row_source = a.row_source;
  p.top_k = a.top_k;
  p.offsets = a.offsets;
  p.num_experts = a.num_experts;
  p.input_scale = a.input_scale;
  p.pre_scale = a.pre_scale;
  p.q = a.q;
  p.scale = a.scale;
  w4a8_quantize_kernel<<<static_cast<unsigned>(a.rows), kQuantThreads, 0, stream>>>(p);
  DSINFER_CUDA_CHECK_LAUNCH();
}

void w4a8_rows_product(const W4a8RowsProduct& a, cudaStream_t stream) {
  const int64_t K = a.gate_up ? a.hidden : a.inter;
  DSINFER_CHECK(a.hidden > 0 && a.inter > 0 && a.hidden <= (1 << 16) && a.inter <= (1 << 16) && K % 8 == 0,
                "w4a8_rows_product: hidden ", a.hidden, " and inter ", a.inter,
                " (at most 65536; the product's K a multiple of 8)");
  DSINFER_CHECK(a.group_size > 0 && K % a.group_size == 0, "w4a8_rows_product: group size ", a.group_size,
                " does not divide K = ", K);
  DSINFER_CHECK(a.num_experts >= 1 && a.num_experts <= kMaxExperts && a.top_k >= 1, "w4a8_rows_product: ",
                a.num_experts, " experts (1..", kMaxExperts, "), top_k ", a.top_k);
  DSINFER_CHECK(a.row_bound >= 0 && a.row_bound <= INT32_MAX, "w4a8_rows_product: row bound ", a.row_bound);
  DSINFER_CHECK(a.chunk_rows == 16 || a.chunk_rows == 32, "w4a8_rows_product: chunk_rows ", a.chunk_rows,
                " (16 or 32)");
  const bool tensor_core = a.kernel == W4a8RowsKernel::kTensorCore;
  DSINFER_CHECK(!tensor_core || w4a8_rows_supported(a.gate_up, a.hidden, a.inter, a.group_size),
                "w4a8_rows_product: the tensor-core kernel needs K a multiple of 128, whole output tiles and a "
                "group size of 32, 64 or a multiple of 128 (", a.gate_up ? "gate_up" : "down", ", hidden ", a.hidden,
                ", inter ", a.inter, ", group ", a.group_size, "); the reference kernel takes any");
  if (a.row_bound == 0) return;
  DSINFER_CHECK(a.weight && a.weight_scale && a.act && a.act_scale && a.offsets && a.out &&
                    (!a.act_per_token || a.row_source),
                "w4a8_rows_product: null pointer");
  DSINFER_CHECK(!a.act_per_token || a.gate_up, "w4a8_rows_product: down reads one activation row per expert row");
  DSINFER_CHECK(aligned(a.weight, 16) && aligned(a.act, 16) && aligned(a.weight_scale, 4),
                "w4a8_rows_product: weights and activations must be 16-byte aligned");

  Params p{};
  p.weight = a.weight;
  p.weight_scale = a.weight_scale;
  p.act = a.act;
  p.act_scale = a.act_scale;
  p.offsets = a.offsets;
  p.row_source = a.row_source;
  p.out = a.out;
  p.top_k = a.top_k;
  p.num_experts = a.num_experts;
  p.k = static_cast<int>(K);
  p.k_blocks = p.k / kKBlock;
  p.groups = static_cast<int>(K / a.group_size);
  p.group_size = static_cast<int>(a.group_size);
  p.group_blocks = static_cast<int>(std::max<int64_t>(a.group_size / kKBlock, 1));
  p.weight_rows = static_cast<int>(a.gate_up ? 2 * a.inter : a.hidden);
  p.outputs = static_cast<int>(a.gate_up ? a.inter : a.hidden);
  p.inter = static_cast<int>(a.inter);
  p.tiles = static_cast<int>(a.gate_up ? a.inter / kGateUpTileOutputs : a.hidden / kTileRows);
  p.act_per_token = a.act_per_token;
  if (!tensor_core) {
    a.gate_up ? launch_reference<true>(p, stream) : launch_reference<false>(p, stream);
    return;
  }
  // At most min(E, rows) experts have rows, with at most rows / chunk_rows + min(E, rows) chunks between
  // them, each of `tiles` items (this only sizes the grid).
  const int64_t max_items = (a.row_bound / a.chunk_rows + std::min<int64_t>(a.num_experts, a.row_bound)) * p.tiles;
  DSINFER_CHECK(max_items * p.k_blocks <= INT32_MAX, "w4a8_rows_product: ", a.row_bound,
                " rows are too many for one launch's int32 stage counts");
  if (a.gate_up) {
    a.chunk_rows == 16 ? launch_tensor_core<true, 2>(p, max_items, stream)
                       : launch_tensor_core<true, 4>(p, max_items, stream);
  } else {
    a.chunk_rows == 16 ? launch_tensor_core<false, 2>(p, max_items, stream)
                       : launch_tensor_core<false, 4>(p, max_items, stream);
  }
}

}  // namespace dsinfer::backend::cuda
