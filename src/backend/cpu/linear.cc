// linear and grouped_linear: y = x W^T with float32 accumulation, W in f32 or bf16; FP8-block and
// W4A8 weights are widened to float32 first (W4A8 also rounds the activations to e4m3 as the GPU
// does: the reference, not a fast path).
//
// The hot loop of the CPU backend. Work is split over output features (and over token blocks for
// long prompts); inside, a 2 x 4 register tile (2 token rows, 4 weight rows) reuses every loaded
// weight vector twice and every activation vector four times. bf16 weights are widened on the fly
// (a shift), so a bf16 checkpoint is used straight from the mmap without a float32 copy.
// Roofline at decode (T = 1): bytes = N*K*sizeof(W); the loop is memory bound.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/ops.h"
#include "core/parallel.h"

namespace dsinfer::backend::cpu {
namespace {

constexpr int kTileT = 2;
constexpr int kTileN = 4;

// Eight weights from row pointer w at column k, as float32.
template <typename W>
inline __m256 load8(const W* w, int64_t k);

template <>
inline __m256 load8<float>(const float* w, int64_t k) {
  return _mm256_loadu_ps(w + k);
}

template <>
inline __m256 load8<uint16_t>(const uint16_t* w, int64_t k) {
  __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + k));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16));
}

inline float to_f32(float value) { return value; }
inline float to_f32(uint16_t bits) { return bf16_to_f32(bits); }

inline float horizontal_sum(__m256 v) {
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
  sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
  return _mm_cvtss_f32(sum);
}

// y[t][n] for t in [t0, t0 + tt), n in [n0, n0 + tn), tt <= 2, tn <= 4.
template <typename W>
void tile(const float* x, const W* w, float* y, int64_t K, int64_t N, int64_t t0, int tt, int64_t n0,
          int tn) {
  __m256 acc[kTileT][kTileN];
  for (auto& row : acc)
    for (auto& a : row) a = _mm256_setzero_ps();
  const float* xr[kTileT];
  const W* wr[kTileN];
  for (int i = 0; i < kTileT; ++i) xr[i] = x + (t0 + std::min(i, tt - 1)) * K;
  for (int j = 0; j < kTileN; ++j) wr[j] = w + (n0 + std::min(j, tn - 1)) * K;
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 xv0 = _mm256_loadu_ps(xr[0] + k);
    __m256 xv1 = _mm256_loadu_ps(xr[1] + k);
    for (int j = 0; j < kTileN; ++j) {
      __m256 wv = load8(wr[j], k);
      acc[0][j] = _mm256_fmadd_ps(xv0, wv, acc[0][j]);
      acc[1][j] = _mm256_fmadd_ps(xv1, wv, acc[1][j]);
    }
  }
  for (int i = 0; i < tt; ++i) {
    for (int j = 0; j < tn; ++j) {
      float sum = horizontal_sum(acc[i][j]);
      for (int64_t r = k; r < K; ++r) sum += xr[i][r] * to_f32(wr[j][r]);
      y[(t0 + i) * N + n0 + j] = sum;
    }
  }
}

template <typename W>
void matmul(const float* x, const W* w, float* y, int64_t T, int64_t N, int64_t K) {
  int64_t n_tiles = (N + kTileN - 1) / kTileN;
  // Token blocks of 32 rows keep a block of x in L1/L2 while the weights stream past.
  constexpr int64_t kTokenBlock = 32;
  int64_t t_blocks = (T + kTokenBlock - 1) / kTokenBlock;
  int64_t work = n_tiles * t_blocks;
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, K * std::min<int64_t>(T, kTokenBlock)));
  parallel_for(work, grain, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      int64_t tb = item / n_tiles;
      int64_t nt = item % n_tiles;
      int64_t n0 = nt * kTileN;
      int tn = static_cast<int>(std::min<int64_t>(kTileN, N - n0));
      int64_t t_end = std::min(T, (tb + 1) * kTokenBlock);
      for (int64_t t0 = tb * kTokenBlock; t0 < t_end; t0 += kTileT) {
        int tt = static_cast<int>(std::min<int64_t>(kTileT, t_end - t0));
        tile(x, w, y, K, N, t0, tt, n0, tn);
      }
    }
  });
}

void matmul_any(const float* x, const Tensor& weight, const void* w, float* y, int64_t T, int64_t N,
                int64_t K) {
  if (weight.dtype() == DType::kF32) {
    matmul(x, static_cast<const float*>(w), y, T, N, K);
  } else {
    matmul(x, static_cast<const uint16_t*>(w), y, T, N, K);
  }
}

void expect_weight(const Tensor& weight, const char* op, int rank) {
  DSINFER_CHECK(weight.rank() == rank && (weight.dtype() == DType::kF32 || weight.dtype() == DType::kBF16),
                op, ": weight must be rank-", rank, " f32 or bf16, got ", dtype_name(weight.dtype()), " ",
                weight.shape().to_string());
}

// An FP8 block-scaled weight as float32: w[n, k] = fp8(n, k) * scale[n / 128, k / 128].
Tensor dequantize_fp8_block(const LinearWeight& weight) {
  int64_t N = weight.data.dim(0), K = weight.data.dim(1);
  int64_t blocks_k = (K + kWeightBlock - 1) / kWeightBlock;
  DSINFER_CHECK(weight.data.dtype() == DType::kF8E4M3 && weight.scale.dtype() == DType::kF32 &&
                    weight.scale.dim(0) == (N + kWeightBlock - 1) / kWeightBlock && weight.scale.dim(1) == blocks_k,
                "linear: FP8 weight ", weight.data.shape().to_string(), " has scales ",
                weight.scale.shape().to_string());
  Tensor out = Tensor::empty(DType::kF32, {N, K});
  parallel_for(N, 16, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const uint8_t* row = weight.data.data<uint8_t>() + n * K;
      const float* scales = weight.scale.data<float>() + (n / kWeightBlock) * blocks_k;
      float* target = out.data<float>() + n * K;
      for (int64_t k = 0; k < K; ++k) target[k] = fp8e4m3_to_f32(row[k]) * scales[k / kWeightBlock];
    }
  });
  return out;
}

// A W4A8 weight as float32 (docs/w4a8.md): w[n, k] = (nibble k of row n - 8) * scale[n, k / G].
Tensor dequantize_w4a8(const LinearWeight& weight) {
  const int64_t N = weight.out_features(), K = weight.in_features();
  DSINFER_CHECK(weight.data.dtype() == DType::kU8 && weight.data.rank() == 2 && weight.scale.defined() &&
                    weight.scale.dtype() == DType::kF32 && weight.scale.rank() == 2 && weight.scale.dim(0) == N &&
                    weight.scale.dim(1) > 0 && K % weight.scale.dim(1) == 0,
                "linear: W4A8 weight ", weight.data.shape().to_string(), " ", dtype_name(weight.data.dtype()),
                " has scales ", weight.scale.defined() ? weight.scale.shape().to_string() : std::string("(none)"));
  const int64_t groups = weight.scale.dim(1), G = weight.group_size();
  Tensor out = Tensor::empty(DType::kF32, {N, K});
  parallel_for(N, 16, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const uint8_t* row = weight.data.data<uint8_t>() + n * (K / 2);
      const float* scales = weight.scale.data<float>() + n * groups;
      float* target = out.data<float>() + n * K;
      for (int64_t k = 0; k < K; ++k) {
        const int nibble = (row[k / 2] >> (4 * (k % 2))) & 0xf;
        target[k] = static_cast<float>(nibble - 8) * scales[k / G];
      }
    }
  });
  return out;
}

// The activations of a W4A8 product as the e4m3 values they become, times their scale (docs/w4a8.md):
// v = x * pre_scale (AWQ's per-column factors; v = x without them), then with input_scale one static
// scale a, else a = amax(|v_row|) / 448 per row (1 for a zero row); v_q = e4m3(v / a), saturating;
// returns v_q * a.
Tensor quantize_w4a8_activations(const Tensor& x, const Tensor& input_scale, const Tensor& pre_scale) {
  const int64_t T = x.dim(0), K = x.dim(1);
  if (pre_scale.defined()) {
    DSINFER_CHECK(pre_scale.dtype() == DType::kF32 && pre_scale.device() == Device::kCpu && pre_scale.rank() == 1 &&
                      pre_scale.dim(0) == K,
                  "linear: a W4A8 pre_scale must be float32 [", K, "], got ", dtype_name(pre_scale.dtype()), " ",
                  pre_scale.shape().to_string());
    Tensor scaled = Tensor::empty(DType::kF32, {T, K});
    const float* factors = pre_scale.data<float>();
    parallel_for(T, 16, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const float* row = x.data<float>() + t * K;
        float* target = scaled.data<float>() + t * K;
        for (int64_t k = 0; k < K; ++k) target[k] = row[k] * factors[k];
      }
    });
    return quantize_w4a8_activations(scaled, input_scale, Tensor());
  }
  float fixed = 0.0f;
  if (input_scale.defined()) {
    DSINFER_CHECK(input_scale.dtype() == DType::kF32 && input_scale.numel() == 1,
                  "linear: a W4A8 input scale must be one float32, got ", input_scale.shape().to_string(), " ",
                  dtype_name(input_scale.dtype()));
    fixed = input_scale.data<float>()[0];
    DSINFER_CHECK(fixed > 0.0f && std::isfinite(fixed), "linear: W4A8 input scale ", fixed, " is not positive");
  }
  Tensor out = Tensor::empty(DType::kF32, {T, K});
  parallel_for(T, 4, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* row = x.data<float>() + t * K;
      float scale = fixed;
      if (!input_scale.defined()) {
        float amax = 0.0f;
        for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(row[k]));
        scale = amax / kFp8E4M3Max;
        if (!(scale > 0.0f)) scale = 1.0f;
      }
      float* target = out.data<float>() + t * K;
      for (int64_t k = 0; k < K; ++k) target[k] = fp8e4m3_to_f32(f32_to_fp8e4m3(row[k] / scale)) * scale;
    }
  });
  return out;
}

}  // namespace

Tensor linear(const Tensor& x, const LinearWeight& linear_weight) {
  if (linear_weight.format == WeightFormat::kW4A8) {
    expect_f32(x, "linear", "x", 2);
    DSINFER_CHECK(x.dim(1) == linear_weight.in_features(), "linear: x ", x.shape().to_string(),
                  " does not match a W4A8 weight of ", linear_weight.in_features(), " inputs");
    Tensor weight = dequantize_w4a8(linear_weight);
    Tensor activations = quantize_w4a8_activations(x, linear_weight.input_scale, linear_weight.pre_scale);
    Tensor y = Tensor::empty(DType::kF32, {x.dim(0), weight.dim(0)});
    matmul(activations.data<float>(), weight.data<float>(), y.data<float>(), x.dim(0), weight.dim(0), x.dim(1));
    return y;
  }
  Tensor weight = linear_weight.format == WeightFormat::kFp8Block ? dequantize_fp8_block(linear_weight)
                                                                  : linear_weight.data;
  expect_f32(x, "linear", "x", 2);
  expect_weight(weight, "linear", 2);
  int64_t T = x.dim(0), K = x.dim(1), N = weight.dim(0);
  DSINFER_CHECK(weight.dim(1) == K, "linear: x ", x.shape().to_string(), " does not match weight ",
                weight.shape().to_string());
  Tensor y = Tensor::empty(DType::kF32, {T, N});
  matmul_any(x.data<float>(), weight, weight.raw(), y.data<float>(), T, N, K);
  return y;
}

Tensor grouped_linear(const Tensor& x, const Tensor& weight) {
  expect_f32(x, "grouped_linear", "x", 3);
  expect_weight(weight, "grouped_linear", 3);
  int64_t T = x.dim(0), G = x.dim(1), K = x.dim(2), N = weight.dim(1);
  DSINFER_CHECK(weight.dim(0) == G && weight.dim(2) == K, "grouped_linear: x ", x.shape().to_string(),
                " does not match weight ", weight.shape().to_string());
  // Gather each group's rows into a contiguous [T, K] block, multiply, scatter back.
  Tensor y = Tensor::empty(DType::kF32, {T, G, N});
  Tensor xg = Tensor::empty(DType::kF32, {T, K});
  Tensor yg = Tensor::empty(DType::kF32, {T, N});
  size_t weight_group_bytes = static_cast<size_t>(N * K) * dtype_size(weight.dtype());
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(xg.data<float>() + t * K, x.data<float>() + (t * G + g) * K, K * sizeof(float));
    const void* w = static_cast<const char*>(weight.raw()) + g * weight_group_bytes;
    matmul_any(xg.data<float>(), weight, w, yg.data<float>(), T, N, K);
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(y.data<float>() + (t * G + g) * N, yg.data<float>() + t * N, N * sizeof(float));
  }
  return y;
}

// The definition: the slice, the per-head product and the concatenation, as separate ops.
Tensor absorb_query(const Tensor& q, const Tensor& w_uk_t) {
  expect_f32(q, "absorb_query", "q", 3);
  expect_weight(w_uk_t, "absorb_query", 3);
  DSINFER_CHECK(w_uk_t.dim(0) == q.dim(1) && w_uk_t.dim(2) < q.dim(2), "absorb_query: q ", q.shape().to_string(),
                " does not match w_uk_t ", w_uk_t.shape().to_string());
  const int64_t T = q.dim(0), H = q.dim(1), D = q.dim(2), dn = w_uk_t.dim(2), L = w_uk_t.dim(1);
  Tensor flat = q.view({T * H, D});
  Tensor q_latent = grouped_linear(slice_last(flat, 0, dn).view({T, H, dn}), w_uk_t);
  return concat_last(q_latent.view({T * H, L}), slice_last(flat, dn, D)).view({T, H, L + D - dn});
}

void expect_f32(const Tensor& t, const char* op, const char* what, int rank) {
  DSINFER_CHECK(t.dtype() == DType::kF32 && t.device() == Device::kCpu, op, ": ", what,
                " must be a float32 CPU tensor, got ", dtype_name(t.dtype()));
  DSINFER_CHECK(rank < 0 || t.rank() == rank, op, ": ", what, " must have rank ", rank, ", got ",
                t.shape().to_string());
}

}  // namespace dsinfer::backend::cpu
