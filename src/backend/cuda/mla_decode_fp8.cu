// MLA decode attention over an FP8 (e4m3) latent cache with Hopper FP8 warpgroup MMAs for Q K^T and
// P V. Same contract, chunks, scratch and combine as the BF16 kernels (mla_decode.h,
// mla_decode_internal.cuh); the cache holds every value in e4m3 times kFp8CacheScale (cache_layout.h).
//
//   out[t, h, :] = softmax_j(scale * q[t, h, :] . row_j) @ row_j[:512],  j over the token's chunk
//
// Shapes: q [T, H, 576] bf16, cache [pages, 64, 576] e4m3, out [T, H, 512] bf16. A block takes 64
// heads of one token and one chunk. Roofline per token: bytes = kv_len * 576 (half the BF16
// cache's; the 64-head blocks of a token share each page through L2) + H * 576 * 2 + H * 512 * 2;
// FLOPs = 2 * H * kv_len * (576 + 512), ~480 FLOP per cache byte at H = 128: compute-bound against
// the FP8 MMA rate (~1,980 TFLOP/s dense on H200) at ~4.3 TB/s.
//
// Quantization (what the FP8 MMAs cost in accuracy, and why this way):
//   - Q: one scale per (token, head) row, its largest magnitude / 448, applied to that row's scores
//     in f32. A row's scores share it, so the softmax sees each row's own full e4m3 range; a scale per
//     tensor would let one large head flatten the others into e4m3's subnormals. The block quantizes
//     its own 64 rows from the bf16 q into shared memory (no extra kernel, no scratch).
//   - P: exp2(s - max + 8) in e4m3, i.e. probabilities scaled by 256, so that the largest is 256 (<=
//     448) and values down to 2^-17 of the row's max stay representable (unscaled, everything under
//     2^-9 would flush to zero). The row sums add the same rounded e4m3 values, so the scale cancels
//     in out = sum p v / sum p, and the combine of split chunks sees it in every chunk alike.
//   - Two-level accumulation: each page's P V (64 keys) goes into fresh accumulators (the tensor
//     cores' FP8 accumulation keeps fewer than f32's bits), then is added in f32 FFMA to the running
//     output, rescaled by the page's max correction in the same instruction. The error then does not
//     grow with the context (mla_decode_fp8_check asserts it from 1K to 128K).
//   - Scores: 18 k32 steps over 576 dims in one MMA chain (short enough that the tensor cores'
//     accumulation costs far less than Q's rounding).
//
// Launch: grid (ceil(H / 64), splits, T), 256 threads = two warpgroups, one block per SM (~195 KB of
// shared memory). Per page (64 keys), warpgroup w (w = 0, 1):
//   S_w = Q K[32 w .. 32 w + 31]^T        18 x wgmma m64n32k32 (Q and the page K-major in shared memory)
//   row max of its 32 keys -> shared; barrier; both take the page's max and the same correction
//   P[:, 32 w ..] in e4m3 -> shared; barrier (P of the whole page is ready)
//   F = P V^T[dims 256 w + 64 c ..]        c = 0..3: 2 x wgmma m64n64k32 each, into F0 / F1 in turn
//   O[:, 256 w + 64 c ..] = O * correction + F  (f32, as each F completes)
// FP8 MMAs take both operands K-major; P V's K is the keys, and the cache stores a page [keys][dims],
// so each warpgroup transposes its 256 dims of the page into V^T [dims][keys] in shared memory (8 x 8
// byte blocks: eight 8-byte loads, 32 byte permutes, eight 8-byte stores; each lane rotates its
// block's dims by lane % 8 so that a warp's stores spread over 8 of the 128-byte swizzle's chunks),
// while the page's S runs on the tensor cores. The loop per page i:
//   softmax(S_i) -> P_i; barrier; TMA page i + 2 into page i's stage; issue S_{i+1}; transpose
//   V_{i+1}; issue P_i V_i chunks 0, 1; as each MMA group completes, add its F and issue the next chunk.
// Keys past the context in a chunk's last page (stale or never written: e4m3 NaN codes are possible)
// get -inf scores by select and zero V^T rows, so garbage cannot become NaN. A token with position < 0
// has an empty chunk: zero output (unsplit) or stats (-inf, 0).
//
// Measured on an H200 (kernels_bench, bench/results/kernels_mla_h200.json): correct (conformance row
// nmse 1.2e-3..2.5e-3; error vs an f64 reference 0.026..0.039 rms, flat from 1K to 128K), but slower
// than the BF16 kernel: 0.76-0.83x at 128 heads (h128 b128 c4096: 346 us against 272), 0.98-0.99x at
// 16 heads. ~2.7 us a page a block: each warpgroup's transpose, softmax, scores and four chained P V
// products run one after another, with two block barriers a page, and the tensor cores idle between.
// The next step (branch fp8-mla-wg-transposer, not yet run correctly on a GPU): a third warpgroup that
// loads and transposes the pages ahead of the two that score and multiply.
//
// Shared memory, every operand in the 128-byte-swizzled K-major layout (128 bytes of K a row, 8-row
// atoms 1024 B apart; TMA's SWIZZLE_128B for the pages):
//   Q        [5 tiles][64 heads][128 B] e4m3   40,960 B (tile 4: dims 512..575, bytes 64.. unused)
//   K0, K1   [5 tiles][64 keys][128 B] e4m3    2 x 40,960 B: pages i and i + 1 (TMA; tile 4's box
//            reads columns 512..639 of a 576-wide row: the 64 past the row are TMA's zero fill)
//   V^T      [512 dims][128 B]: keys of an even page in bytes 0..63, of an odd page in 64..127
//   P        [64 heads][128 B]: keys in bytes 0..63
//   stats    row maxima of both warpgroups, Q's row scales, final row sums; two mbarriers (one a stage)
#include "backend/cuda/mla_decode_fp8.h"

#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>

#include "backend/cache_layout.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/hopper.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/vector.cuh"
#include "backend/cuda/wgmma_fp8.cuh"
#include "core/error.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kHeads = kMlaFp8Heads;         // 64: M of every MMA
constexpr int kKeys = kMlaPageSize;          // 64 keys a page
constexpr int kRowBytes = 128;               // one swizzled row: 128 e4m3 values
constexpr int kTileBytes = 64 * kRowBytes;   // 8,192: one [64 rows][128 B] box
constexpr int kTiles = 5;                    // 4 latent tiles + the rope tile (half used)
constexpr int kLatentTiles = kMlaLatentDim / kRowBytes;  // 4
constexpr int kRopeSteps = kMlaRopeDim / 32;             // k32 steps in the rope tile: 2
constexpr int kPageBytes = kTiles * kTileBytes;          // 40,960
constexpr int kThreads = 256;
constexpr int kWgThreads = 128;
constexpr int kKeysPerWg = kKeys / 2;                    // 32: N of S
constexpr int kDimsPerWg = kMlaLatentDim / 2;            // 256: O columns of a warpgroup
constexpr int kChunkDims = 64;                           // N of one P V product
constexpr int kChunks = kDimsPerWg / kChunkDims;         // 4
constexpr float kPScaleLog2 = 8.0f;                      // P in e4m3 is probability * 2^8
static_assert(kLatentTiles * kRowBytes == kMlaLatentDim && kMlaRopeDim % 32 == 0 && kMlaRopeDim <= kRowBytes);
static_assert(kKeys == 64 && kHeads == 64, "one page is one 64-key step; M of wgmma is 64");

// Shared memory offsets from the 1024-byte aligned base.
constexpr int kQOffset = 0;
constexpr int kKOffset = kPageBytes;                     // + stage * kPageBytes
constexpr int kVtOffset = kKOffset + 2 * kPageBytes;     // [512][128 B]
constexpr int kPOffset = kVtOffset + kMlaLatentDim * kRowBytes;
constexpr int kStatsOffset = kPOffset + kHeads * kRowBytes;
// float arrays of 64 rows: warpgroup 0's and 1's page maxima, Q's scales, the two final row sums.
constexpr int kMaxRow = 0, kQScaleRow = 2, kSumRow = 3;  // kMaxRow + wg, kSumRow + wg
constexpr int kStatsBytes = 5 * kHeads * 4;
constexpr int kBarrierOffset = kStatsOffset + kStatsBytes;
constexpr int kSmemBytes = kBarrierOffset + 2 * 8 + 1024;  // + alignment slack
static_assert(kSmemBytes <= 227 * 1024, "must fit Hopper's 227 KB of shared memory a block");

// Named barriers (0 is __syncthreads): both warpgroups, 256 threads each.
constexpr int kMaxReady = 1, kPReady = 2;

struct Smem {
  uint32_t base;
  unsigned char* data;
  uint32_t desc;  // descriptor_base(base): the K-major tiles' descriptors are offsets from it
  __device__ uint32_t q_tile(int t) const { return base + kQOffset + t * kTileBytes; }
  __device__ uint32_t k_tile(int stage, int t) const { return base + kKOffset + stage * kPageBytes + t * kTileBytes; }
  __device__ uint32_t vt() const { return base + kVtOffset; }
  __device__ uint32_t p() const { return base + kPOffset; }
  __device__ uint32_t barrier(int stage) const { return base + kBarrierOffset + 8u * stage; }
  __device__ float* stats(int row) const { return reinterpret_cast<float*>(data + kStatsOffset) + row * kHeads; }
  __device__ unsigned char* at(uint32_t address) const { return data + (address - base); }
};

// Byte offset of (row, byte) in a 128-byte-swizzled [rows][128 B] region: the 16-byte chunk byte / 16
// of row r sits at chunk (byte / 16) ^ (r % 8).
__device__ __forceinline__ uint32_t swizzled(int row, int byte) {
  return row * kRowBytes + ((((byte >> 4) ^ row) & 7) << 4) + (byte & 15);
}

// ---- Q: the block's 64 rows to e4m3, one scale a row ----

// Warp w quantizes rows 8 w .. 8 w + 7 (heads head0 + row; rows past block_heads are zeros with
// scale 1). Lane l holds the 16-byte units (8 dims) l, l + 32, l + 64 (< 72) of each row.
__device__ __forceinline__ void quantize_q(const Smem& sm, const bf16* q_token, int head0, int block_heads, int warp,
                                           int lane) {
  constexpr int kUnits = kMlaCacheWidth / 8;  // 72
  constexpr int kRows = kHeads / 8;           // rows a warp
  uint4 raw[kRows][3];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = 8 * warp + r;
    const uint4* src = reinterpret_cast<const uint4*>(q_token + static_cast<size_t>(head0 + row) * kMlaCacheWidth);
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      const int u = lane + 32 * k;
      raw[r][k] = row < block_heads && u < kUnits ? src[u] : make_uint4(0u, 0u, 0u, 0u);
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = 8 * warp + r;
    float v[3][8];
    float amax = 0.f;
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      unpack_bf16_words(raw[r][k], v[k]);
#pragma unroll
      for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(v[k][e]));
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    const float scale = amax > 0.f ? amax / kFp8E4M3Max : 1.f;
    const float inverse = amax > 0.f ? kFp8E4M3Max / amax : 1.f;
    if (lane == 0) sm.stats(kQScaleRow)[row] = scale;
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      const int u = lane + 32 * k;
      if (u < kUnits) {
        uint32_t word[2];
#pragma unroll
        for (int w = 0; w < 2; ++w) {
          const __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(
              make_float2(v[k][4 * w] * inverse, v[k][4 * w + 1] * inverse), __NV_SATFINITE, __NV_E4M3);
          const __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(
              make_float2(v[k][4 * w + 2] * inverse, v[k][4 * w + 3] * inverse), __NV_SATFINITE, __NV_E4M3);
          word[w] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
        }
        const int tile = u / 16, byte = 8 * (u % 16);
        *reinterpret_cast<uint2*>(sm.at(sm.q_tile(tile)) + swizzled(row, byte)) = make_uint2(word[0], word[1]);
      }
    }
  }
}

// ---- TMA ----

// A page's 5 boxes into stage `stage`, counted on its barrier. One thread.
__device__ __forceinline__ void load_page(const Smem& sm, const CUtensorMap* cache_map, int stage, int page_id) {
  const uint32_t bar = sm.barrier(stage);
  mbarrier_arrive_expect_tx(bar, kPageBytes);
  for (int t = 0; t < kTiles; ++t) tma_load_2d(sm.k_tile(stage, t), cache_map, t * kRowBytes, page_id * kKeys, bar);
}

// ---- the transpose of V ----

// The 4 x 4 byte transpose: out[j] byte r = in[r] byte j.
__device__ __forceinline__ void transpose4(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, uint32_t (&out)[4]) {
  const uint32_t x0 = __byte_perm(w0, w2, 0x5410), x1 = __byte_perm(w1, w3, 0x5410);
  const uint32_t x2 = __byte_perm(w0, w2, 0x7632), x3 = __byte_perm(w1, w3, 0x7632);
  out[0] = __byte_perm(x0, x1, 0x6240);
  out[1] = __byte_perm(x0, x1, 0x7351);
  out[2] = __byte_perm(x2, x3, 0x6240);
  out[3] = __byte_perm(x2, x3, 0x7351);
}

// This warpgroup's 256 dims of the page in `stage` -> V^T rows 256 wg .., key bytes 64 half + key;
// keys >= valid become zeros. Thread i of the warpgroup takes the 8 x 8 blocks i and i + 128: dim
// block i % 32 (lanes: 32 consecutive dim blocks, one key row = 256 contiguous bytes a load), key
// block i / 32. Lane l rotates its 8 dims by s = l % 8 before the transpose, so its j-th store goes to
// dim 8 db + (j + s) % 8 and the warp's stores land in 8 different swizzle chunks.
__device__ __forceinline__ void transpose_v(const Smem& sm, int stage, int half, int valid, int wg, int wg_thread) {
  const int lane = wg_thread % 32, s = lane % 8;
#pragma unroll
  for (int b = 0; b < 2; ++b) {
    const int block = wg_thread + kWgThreads * b;
    const int dim0 = kDimsPerWg * wg + 8 * (block % 32), key0 = 8 * (block / 32);
    const unsigned char* tile = sm.at(sm.k_tile(stage, dim0 / kRowBytes));
    uint32_t lo[8], hi[8];
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      const int key = key0 + r;
      uint2 v = *reinterpret_cast<const uint2*>(tile + swizzled(key, dim0 % kRowBytes));
      if (key >= valid) v = make_uint2(0u, 0u);
      // Rotate right by s bytes: byte j <- byte (j + s) % 8.
      uint32_t a = v.x, c = v.y;
      if (s & 4) {
        const uint32_t swap = a;
        a = c;
        c = swap;
      }
      const int shift = 8 * (s & 3);
      lo[r] = __funnelshift_r(a, c, shift);
      hi[r] = __funnelshift_r(c, a, shift);
    }
    // column j (a dim) of the 8 x 8 block: keys 0..3 in the low word, 4..7 in the high one.
    uint32_t col_lo[8], col_hi[8];
    {
      uint32_t t[4];
      transpose4(lo[0], lo[1], lo[2], lo[3], t);
#pragma unroll
      for (int j = 0; j < 4; ++j) col_lo[j] = t[j];
      transpose4(lo[4], lo[5], lo[6], lo[7], t);
#pragma unroll
      for (int j = 0; j < 4; ++j) col_hi[j] = t[j];
      transpose4(hi[0], hi[1], hi[2], hi[3], t);
#pragma unroll
      for (int j = 0; j < 4; ++j) col_lo[4 + j] = t[j];
      transpose4(hi[4], hi[5], hi[6], hi[7], t);
#pragma unroll
      for (int j = 0; j < 4; ++j) col_hi[4 + j] = t[j];
    }
    unsigned char* vt = sm.at(sm.vt());
    const int key_byte = kKeys * half + key0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int dim = dim0 + ((j + s) & 7);
      *reinterpret_cast<uint2*>(vt + swizzled(dim, key_byte)) = make_uint2(col_lo[j], col_hi[j]);
    }
  }
}

// ---- the MMAs ----

// S (16 floats: S[row + 8 h][32 wg + 8 j + 2 c + e] = s[4 j + 2 h + e]) = Q K[32 wg ..]^T over the
// 576 dims of the page in `stage`. Issues the wgmmas; the caller commits and waits.
__device__ __forceinline__ void issue_scores(const Smem& sm, int stage, int wg, float (&s)[16]) {
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
#pragma unroll
    for (int kk = 0; kk < (t < kLatentTiles ? kRowBytes / 32 : kRopeSteps); ++kk) {
      const uint64_t a = descriptor_at(sm.desc, kQOffset + t * kTileBytes + 32 * kk);
      const uint64_t b = descriptor_at(
          sm.desc, kKOffset + stage * kPageBytes + t * kTileBytes + kKeysPerWg * wg * kRowBytes + 32 * kk);
      WgmmaFp8<kKeysPerWg>::run(s, a, b, (t == 0 && kk == 0) ? 0 : 1);
    }
  }
}

// F = P V^T[dims 256 wg + 64 chunk ..] over the page's 64 keys (V^T half `half`).
__device__ __forceinline__ void issue_pv(const Smem& sm, int half, int wg, int chunk, float (&f)[32]) {
  const uint32_t vt = kVtOffset + (kDimsPerWg * wg + kChunkDims * chunk) * kRowBytes + kKeys * half;
#pragma unroll
  for (int kk = 0; kk < kKeys / 32; ++kk)
    WgmmaFp8<kChunkDims>::run(f, descriptor_at(sm.desc, kPOffset + 32 * kk), descriptor_at(sm.desc, vt + 32 * kk), kk);
}

// o = o * correction[row half] + f, the fragment's row half h = (i / 2) % 2.
__device__ __forceinline__ void accumulate(float (&o)[32], const float (&f)[32], const float (&correction)[2]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i] = fmaf(o[i], correction[(i / 2) % 2], f[i]);
}

// ---- the kernel ----

__global__ void __launch_bounds__(kThreads, 1)
    mla_decode_fp8_kernel(const __grid_constant__ CUtensorMap cache_map, const MlaDecodeParams p) {
  const int head0 = blockIdx.x * kHeads, split = blockIdx.y, t = blockIdx.z;
  const int block_heads = min(kHeads, p.heads - head0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wg = warp / 4, wg_thread = threadIdx.x % kWgThreads;
  const int g = lane / 4, c = lane % 4;
  const int row = 16 * (warp % 4) + g;  // this thread's head rows: row, row + 8

  const int sequence = p.token_sequence[t];
  const MlaRowRange rows = mla_split_rows(mla_visible_rows(p, t, sequence), split, p.num_splits, p.min_split_pages);
  // Programmatic launch: q and this token's cache row come from the kernels before (see the BF16 kernel).
  wait_for_previous_kernel();
  allow_dependent_launch();
  if (rows.empty()) {  // uniform over the block, before any barrier exists
    for (int h = warp; h < block_heads; h += kThreads / 32) mla_finish_empty(p, t, split, head0 + h, lane);
    return;
  }
  const int num_pages = (rows.end - rows.begin + kKeys - 1) / kKeys;
  const int32_t* pages = p.page_ids + p.page_table_start[sequence] + rows.begin / kKeys;
  auto valid_keys = [&](int page) { return min(kKeys, rows.end - (rows.begin + page * kKeys)); };

  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_address = smem_address(smem_raw);
  const uint32_t base = (raw_address + 1023u) & ~1023u;
  const Smem sm{base, smem_raw + (base - raw_address), descriptor_base(base)};

  if (threadIdx.x == 0) {
    mbarrier_init(sm.barrier(0), 1);
    mbarrier_init(sm.barrier(1), 1);
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    load_page(sm, &cache_map, 0, pages[0]);
    if (num_pages > 1) load_page(sm, &cache_map, 1, pages[1]);
  }
  quantize_q(sm, p.q + static_cast<size_t>(t) * p.heads * kMlaCacheWidth, head0, block_heads, warp, lane);
  fence_proxy_async();  // Q's generic stores before the wgmmas read it
  __syncthreads();
  float q_scale[2];  // score scale of the thread's rows: Q's row scale * softmax scale * log2(e) * cache scale^2
#pragma unroll
  for (int h = 0; h < 2; ++h)
    q_scale[h] = sm.stats(kQScaleRow)[row + 8 * h] * p.scale_log2 * (kFp8CacheScale * kFp8CacheScale);

  float o[kChunks][32];  // O[row + 8 h][256 wg + 64 chunk + 8 j + 2 c + e] = o[chunk][4 j + 2 h + e]
#pragma unroll
  for (int k = 0; k < kChunks; ++k) zero_registers(o[k]);
  float s[16];
  zero_registers(s);
  float f0[32], f1[32];
  zero_registers(f0);
  zero_registers(f1);
  float running_max[2] = {-INFINITY, -INFINITY};
  float sum[2] = {0.f, 0.f};  // this thread's keys, relative to running_max, times 2^8

  // Prologue: S and V^T of page 0.
  mbarrier_wait(sm.barrier(0), 0);
  __syncwarp();
  fence_registers(s);
  wgmma_fence();
  issue_scores(sm, 0, wg, s);
  wgmma_commit();
  transpose_v(sm, 0, 0, valid_keys(0), wg, wg_thread);
  wgmma_wait<0>();
  fence_registers(s);

  for (int i = 0; i < num_pages; ++i) {
    const int valid = valid_keys(i);
    // Scores in log2 units, keys >= valid masked; this warpgroup's 32 keys' row maxima to shared.
    float page_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kKeysPerWg / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& value = s[4 * j + 2 * h + e];
          value = kKeysPerWg * wg + 8 * j + 2 * c + e < valid ? value * q_scale[h] : -INFINITY;
          page_max[h] = fmaxf(page_max[h], value);
        }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      page_max[h] = fmaxf(page_max[h], __shfl_xor_sync(0xffffffffu, page_max[h], 1));
      page_max[h] = fmaxf(page_max[h], __shfl_xor_sync(0xffffffffu, page_max[h], 2));
      if (c == 0) sm.stats(kMaxRow + wg)[row + 8 * h] = page_max[h];
    }
    fence_proxy_async();  // this thread's V^T stores (of this page) before the P V wgmmas read them
    named_barrier_sync(kMaxReady, kThreads);
    float correction[2], new_max[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float both = fmaxf(sm.stats(kMaxRow)[row + 8 * h], sm.stats(kMaxRow + 1)[row + 8 * h]);
      new_max[h] = fmaxf(running_max[h], both);  // finite: key 0 of every page is valid
      correction[h] = fast_exp2(running_max[h] - new_max[h]);  // 0 on the first page
      running_max[h] = new_max[h];
      sum[h] *= correction[h];
    }
    // P * 2^8 in e4m3 into shared memory; the sums add the rounded values.
    unsigned char* p_smem = sm.at(sm.p());
#pragma unroll
    for (int j = 0; j < kKeysPerWg / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float offset = new_max[h] - kPScaleLog2;
        const __nv_fp8x2_storage_t two = __nv_cvt_float2_to_fp8x2(
            make_float2(fast_exp2(s[4 * j + 2 * h] - offset), fast_exp2(s[4 * j + 2 * h + 1] - offset)),
            __NV_SATFINITE, __NV_E4M3);
        const float2 rounded = fp8x2_to_float2(two);
        sum[h] += rounded.x + rounded.y;
        const int r = row + 8 * h, key = kKeysPerWg * wg + 8 * j + 2 * c;
        *reinterpret_cast<uint16_t*>(p_smem + swizzled(r, key)) = two;
      }
    fence_proxy_async();
    named_barrier_sync(kPReady, kThreads);  // P complete; page i's stage no longer read by anyone

    const int stage = i & 1, half = i & 1;
    const bool has_next = i + 1 < num_pages;
    if (threadIdx.x == 0 && i + 2 < num_pages) load_page(sm, &cache_map, stage, pages[i + 2]);
    if (has_next) {  // S of the next page, while P V of this one runs
      mbarrier_wait(sm.barrier(stage ^ 1), ((i + 1) >> 1) & 1);
      __syncwarp();
      fence_registers(s);
      wgmma_fence();
      issue_scores(sm, stage ^ 1, wg, s);
      wgmma_commit();
      // Its V^T while the tensor cores score it (before P V's accumulators are live: registers).
      transpose_v(sm, stage ^ 1, half ^ 1, valid_keys(i + 1), wg, wg_thread);
    }
    fence_registers(f0);
    fence_registers(f1);
    wgmma_fence();
    issue_pv(sm, half, wg, 0, f0);
    wgmma_commit();
    issue_pv(sm, half, wg, 1, f1);
    wgmma_commit();
    // As each group completes: add its F, reuse its registers for the next chunk.
    wgmma_wait<1>();  // the next S and chunk 0
    fence_registers(s);
    fence_registers(f0);
    accumulate(o[0], f0, correction);
    fence_registers(f0);
    wgmma_fence();
    issue_pv(sm, half, wg, 2, f0);
    wgmma_commit();
    wgmma_wait<1>();  // chunk 1
    fence_registers(f1);
    accumulate(o[1], f1, correction);
    fence_registers(f1);
    wgmma_fence();
    issue_pv(sm, half, wg, 3, f1);
    wgmma_commit();
    wgmma_wait<1>();  // chunk 2
    fence_registers(f0);
    accumulate(o[2], f0, correction);
    wgmma_wait<0>();  // chunk 3
    fence_registers(f1);
    accumulate(o[3], f1, correction);
  }

  // Row sums: the quad's keys, then the other warpgroup's.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
    if (c == 0) sm.stats(kSumRow + wg)[row + 8 * h] = sum[h];
  }
  __syncthreads();
#pragma unroll
  for (int h = 0; h < 2; ++h) sum[h] += sm.stats(kSumRow + (wg ^ 1))[row + 8 * h];

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (row + 8 * h >= block_heads) continue;
    const int head = head0 + row + 8 * h;
    if (p.num_splits == 1) {
      const float inverse = 1.f / sum[h];  // >= 2^8 * 1 - rounding: the max key contributes 2^8
      bf16* out = p.out + (static_cast<size_t>(t) * p.heads + head) * kMlaLatentDim + kDimsPerWg * wg + 2 * c;
#pragma unroll
      for (int k = 0; k < kChunks; ++k)
#pragma unroll
        for (int j = 0; j < kChunkDims / 8; ++j)
          *reinterpret_cast<__nv_bfloat162*>(out + kChunkDims * k + 8 * j) =
              __floats2bfloat162_rn(o[k][4 * j + 2 * h] * inverse, o[k][4 * j + 2 * h + 1] * inverse);
    } else {
      const size_t index = mla_partial_index(t, split, head, p);
      float* out = p.partial_out + index * kMlaLatentDim + kDimsPerWg * wg + 2 * c;
#pragma unroll
      for (int k = 0; k < kChunks; ++k)
#pragma unroll
        for (int j = 0; j < kChunkDims / 8; ++j)
          *reinterpret_cast<float2*>(out + kChunkDims * k + 8 * j) = make_float2(o[k][4 * j + 2 * h], o[k][4 * j + 2 * h + 1]);
      if (wg == 0 && c == 0) p.partial_stats[index] = make_float2(running_max[h], sum[h]);
    }
  }
}

}  // namespace

void launch_mla_decode_fp8(const MlaDecodeParams& p, int tokens, cudaStream_t stream) {
  // The cache's page count is not part of the arguments: its rows are bounded by the 32-bit TMA
  // coordinate instead (as the BF16 kernel's). Boxes of 128 columns x 64 rows; the last box of a row
  // reaches past its 576 columns and is zero-filled there.
  const CUtensorMap cache_map =
      make_swizzled_2d_map(p.cache_fp8, CU_TENSOR_MAP_DATA_TYPE_UINT8, kMlaCacheWidth, uint64_t{1} << 31,
                           kMlaCacheWidth, kRowBytes, kKeys, "the FP8 latent cache");
  DSINFER_CUDA_CHECK(
      cudaFuncSetAttribute(mla_decode_fp8_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  ProgrammaticLaunch launch(dim3((p.heads + kHeads - 1) / kHeads, p.num_splits, tokens), dim3(kThreads), kSmemBytes,
                            stream);
  DSINFER_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, mla_decode_fp8_kernel, cache_map, p));
}

}  // namespace dsinfer::backend::cuda
