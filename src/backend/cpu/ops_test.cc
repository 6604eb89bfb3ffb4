// The CPU ops against naive double-precision loops, and the two MLA forms against each other.
#include "backend/cpu/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <algorithm>
#include <numeric>
#include <random>

namespace dsinfer::backend::cpu {
namespace {

Tensor random_tensor(Shape shape, std::mt19937& rng, float scale = 1.0f) {
  Tensor t = Tensor::empty(DType::kF32, shape);
  std::normal_distribution<float> normal(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = normal(rng);
  return t;
}

Tensor to_bf16(const Tensor& t) {
  Tensor out = Tensor::empty(DType::kBF16, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) out.data<uint16_t>()[i] = f32_to_bf16(t.data<float>()[i]);
  return out;
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  float worst = 0.0f;
  for (int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, std::fabs(a.data<float>()[i] - b.data<float>()[i]));
  return worst;
}

TEST(CpuOps, LinearMatchesNaiveForOddShapesAndBf16) {
  std::mt19937 rng(1);
  for (auto [T, N, K] : {std::tuple{1, 7, 13}, {3, 33, 64}, {37, 129, 200}, {64, 16, 7168}}) {
    Tensor x = random_tensor({T, K}, rng);
    Tensor w = random_tensor({N, K}, rng, 0.05f);
    Tensor wb = to_bf16(w);
    Tensor y = linear(x, {w}), yb = linear(x, {wb});
    for (int t = 0; t < T; ++t) {
      for (int n = 0; n < N; ++n) {
        double exact = 0, exact_bf16 = 0;
        for (int k = 0; k < K; ++k) {
          exact += double(x.data<float>()[t * K + k]) * w.data<float>()[n * K + k];
          exact_bf16 += double(x.data<float>()[t * K + k]) * bf16_to_f32(wb.data<uint16_t>()[n * K + k]);
        }
        ASSERT_NEAR(y.data<float>()[t * N + n], exact, 1e-4 * std::sqrt(K)) << T << "x" << N << "x" << K;
        ASSERT_NEAR(yb.data<float>()[t * N + n], exact_bf16, 1e-4 * std::sqrt(K));
      }
    }
  }
}

TEST(CpuOps, Fp8BlockLinearEqualsLinearOverTheDequantizedWeight) {
  std::mt19937 rng(11);
  for (auto [T, N, K] : {std::tuple{3, 200, 300}, {1, 128, 128}, {5, 64, 7168}}) {
    Tensor x = random_tensor({T, K}, rng);
    int64_t blocks_n = (N + 127) / 128, blocks_k = (K + 127) / 128;
    Tensor q = Tensor::empty(DType::kF8E4M3, {N, K});
    Tensor scale = random_tensor({blocks_n, blocks_k}, rng, 0.01f);
    Tensor dense = Tensor::empty(DType::kF32, {N, K});
    std::uniform_real_distribution<float> value(-300.0f, 300.0f);
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < K; ++k) {
        uint8_t bits = f32_to_fp8e4m3(value(rng));
        q.data<uint8_t>()[n * K + k] = bits;
        dense.data<float>()[n * K + k] = fp8e4m3_to_f32(bits) * scale.data<float>()[(n / 128) * blocks_k + k / 128];
      }
    }
    Tensor y = linear(x, {q, scale, WeightFormat::kFp8Block});
    Tensor expected = linear(x, {dense});
    EXPECT_EQ(max_abs_diff(y, expected), 0.0f) << T << "x" << N << "x" << K;
  }
}

// A W4A8 weight from int4 values and group scales (docs/w4a8.md's layout), and the dense matrix it is.
struct Int4Weight {
  LinearWeight weight;
  Tensor dense;
};

Int4Weight random_int4(int64_t N, int64_t K, int64_t group, std::mt19937& rng) {
  Int4Weight out;
  out.weight.format = WeightFormat::kW4A8;
  out.weight.data = Tensor::empty(DType::kU8, {N, K / 2});
  out.weight.scale = Tensor::empty(DType::kF32, {N, K / group});
  out.dense = Tensor::empty(DType::kF32, {N, K});
  std::uniform_int_distribution<int> value(-8, 7);
  std::uniform_real_distribution<float> scale(0.001f, 0.01f);
  for (int64_t i = 0; i < out.weight.scale.numel(); ++i) out.weight.scale.data<float>()[i] = scale(rng);
  std::memset(out.weight.data.raw(), 0, out.weight.data.nbytes());
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const int q = value(rng);
      out.weight.data.data<uint8_t>()[n * (K / 2) + k / 2] |= static_cast<uint8_t>((q + 8) << (4 * (k % 2)));
      out.dense.data<float>()[n * K + k] = static_cast<float>(q) * out.weight.scale.data<float>()[n * (K / group) + k / group];
    }
  }
  return out;
}

// x rounded to e4m3 with scale a per row (a[t]) as the W4A8 product defines it.
Tensor e4m3_rows(const Tensor& x, const std::vector<float>& a) {
  Tensor out = x.clone();
  const int64_t K = x.dim(1);
  for (int64_t t = 0; t < x.dim(0); ++t)
    for (int64_t k = 0; k < K; ++k) {
      float& v = out.data<float>()[t * K + k];
      v = fp8e4m3_to_f32(f32_to_fp8e4m3(v / a[t])) * a[t];
    }
  return out;
}

TEST(CpuOps, W4A8LinearIsTheDequantizedProductOfE4m3Activations) {
  std::mt19937 rng(12);
  for (auto [T, N, K, group] : {std::tuple{3, 24, 256, 128}, {1, 8, 64, 32}, {5, 40, 7168, 128}}) {
    Int4Weight w = random_int4(N, K, group, rng);
    ASSERT_EQ(w.weight.in_features(), K);
    ASSERT_EQ(w.weight.group_size(), group);
    Tensor x = random_tensor({T, K}, rng);
    x.data<float>()[0] = 0.0f;  // zeros stay zero
    // Without an input scale: each row's own, amax / 448; a zero row keeps scale 1.
    std::vector<float> per_row(T);
    for (int64_t t = 0; t < T; ++t) {
      float amax = 0.0f;
      for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(x.data<float>()[t * K + k]));
      per_row[t] = amax / 448.0f;
    }
    Tensor dynamic = linear(x, w.weight);
    EXPECT_EQ(max_abs_diff(dynamic, linear(e4m3_rows(x, per_row), {w.dense})), 0.0f) << T << "x" << N << "x" << K;
    // The e4m3 rounding is there: the product differs from the unrounded one, by a few tenths of a percent.
    const float unrounded = max_abs_diff(dynamic, linear(x, {w.dense}));
    EXPECT_GT(unrounded, 0.0f);
    EXPECT_LT(unrounded, 0.05f * std::sqrt(static_cast<float>(K)) * 0.01f * 8);
    // A static input scale: one for every row; values past 448 a saturate.
    LinearWeight fixed = w.weight;
    fixed.input_scale = Tensor::empty(DType::kF32, {});
    fixed.input_scale.data<float>()[0] = 0.004f;
    Tensor y = linear(x, fixed);
    EXPECT_EQ(max_abs_diff(y, linear(e4m3_rows(x, std::vector<float>(T, 0.004f)), {w.dense})), 0.0f);
  }
}

// AWQ's pre_scale (P.pre_quant_scale): the input times it, then the e4m3 rounding of that product.
TEST(CpuOps, W4A8PreScaleMultipliesTheInputBeforeItsE4m3Rounding) {
  std::mt19937 rng(14);
  const int64_t T = 3, N = 16, K = 256;
  Int4Weight w = random_int4(N, K, 128, rng);
  Tensor x = random_tensor({T, K}, rng);
  LinearWeight scaled = w.weight;
  scaled.pre_scale = Tensor::empty(DType::kF32, {K});
  std::uniform_real_distribution<float> factor(0.25f, 4.0f);
  for (int64_t k = 0; k < K; ++k) scaled.pre_scale.data<float>()[k] = factor(rng);
  Tensor product = x.clone();  // x * p
  std::vector<float> per_row(T, 0.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      float& v = product.data<float>()[t * K + k];
      v *= scaled.pre_scale.data<float>()[k];
      per_row[t] = std::max(per_row[t], std::fabs(v) / 448.0f);
    }
  EXPECT_EQ(max_abs_diff(linear(x, scaled), linear(e4m3_rows(product, per_row), {w.dense})), 0.0f);
  // Ones change nothing; a pre_scale of the wrong width is refused.
  std::fill_n(scaled.pre_scale.data<float>(), K, 1.0f);
  EXPECT_EQ(max_abs_diff(linear(x, scaled), linear(x, w.weight)), 0.0f);
  scaled.pre_scale = Tensor::empty(DType::kF32, {K / 2});
  EXPECT_THROW(linear(x, scaled), Error);
}

TEST(CpuOps, W4A8RowsDoNotDependOnTheirBatch) {
  std::mt19937 rng(13);
  Int4Weight w = random_int4(16, 256, 128, rng);
  Tensor x = random_tensor({4, 256}, rng);
  x.data<float>()[3 * 256] = 100.0f;  // an outlier in the last row only
  Tensor batch = linear(x, w.weight);
  for (int64_t t = 0; t < 4; ++t) {
    Tensor alone = linear(x.slice(t, t + 1).clone(), w.weight);
    for (int64_t n = 0; n < 16; ++n) EXPECT_EQ(alone.data<float>()[n], batch.data<float>()[t * 16 + n]) << t;
  }
}

TEST(CpuOps, GroupedLinearIsOneLinearPerGroup) {
  std::mt19937 rng(2);
  Tensor x = random_tensor({5, 3, 24}, rng);
  Tensor w = random_tensor({3, 10, 24}, rng);
  Tensor y = grouped_linear(x, w);
  for (int g = 0; g < 3; ++g) {
    Tensor xg = Tensor::empty(DType::kF32, {5, 24});
    for (int t = 0; t < 5; ++t)
      std::copy_n(x.data<float>() + (t * 3 + g) * 24, 24, xg.data<float>() + t * 24);
    Tensor yg = linear(xg, {w.slice(g, g + 1).view({10, 24})});
    for (int t = 0; t < 5; ++t)
      for (int n = 0; n < 10; ++n) EXPECT_FLOAT_EQ(y.data<float>()[(t * 3 + g) * 10 + n], yg.data<float>()[t * 10 + n]);
  }
}

TEST(CpuOps, RmsNormAndResidual) {
  std::mt19937 rng(3);
  Tensor x = random_tensor({4, 96}, rng);
  Tensor w = random_tensor({96}, rng);
  Tensor y = rms_norm(x, w, 1e-6f);
  for (int t = 0; t < 4; ++t) {
    double ss = 0;
    for (int i = 0; i < 96; ++i) ss += double(x.data<float>()[t * 96 + i]) * x.data<float>()[t * 96 + i];
    double inv = 1.0 / std::sqrt(ss / 96 + 1e-6);
    for (int i = 0; i < 96; ++i)
      EXPECT_NEAR(y.data<float>()[t * 96 + i], w.data<float>()[i] * x.data<float>()[t * 96 + i] * inv, 1e-5);
  }
  Tensor residual = x.clone();
  Tensor delta = random_tensor({4, 96}, rng);
  Tensor normed = add_rms_norm_inplace(residual, delta, w, 1e-6f);
  for (int i = 0; i < 4 * 96; ++i)
    EXPECT_FLOAT_EQ(residual.data<float>()[i], x.data<float>()[i] + delta.data<float>()[i]);
  EXPECT_EQ(max_abs_diff(normed, rms_norm(residual, w, 1e-6f)), 0.0f);
}

TEST(CpuOps, RopeRotatesPairsAndPreservesNorms) {
  std::mt19937 rng(4);
  RopeTable table{Tensor::empty(DType::kF32, {16, 4}), Tensor::empty(DType::kF32, {16, 4}), true};
  for (int p = 0; p < 16; ++p)
    for (int i = 0; i < 4; ++i) {
      table.cos.data<float>()[p * 4 + i] = std::cos(p * std::pow(10.0f, -float(i)));
      table.sin.data<float>()[p * 4 + i] = std::sin(p * std::pow(10.0f, -float(i)));
    }
  Tensor x = random_tensor({2, 3, 12}, rng);
  Tensor before = x.clone();
  rope_inplace(x, 4, {0, 5}, table);
  for (int g = 0; g < 3; ++g) {
    for (int d = 0; d < 12; ++d) EXPECT_EQ(x.data<float>()[g * 12 + d], before.data<float>()[g * 12 + d]);  // position 0
    const float* a = before.data<float>() + (36 + g * 12);
    const float* b = x.data<float>() + (36 + g * 12);
    for (int d = 0; d < 4; ++d) EXPECT_EQ(a[d], b[d]);  // outside the rope slice
    for (int i = 0; i < 4; ++i) {
      float c = std::cos(5 * std::pow(10.0f, -float(i))), s = std::sin(5 * std::pow(10.0f, -float(i)));
      EXPECT_NEAR(b[4 + 2 * i], a[4 + 2 * i] * c - a[5 + 2 * i] * s, 1e-5);
      EXPECT_NEAR(b[5 + 2 * i], a[5 + 2 * i] * c + a[4 + 2 * i] * s, 1e-5);
    }
  }
  EXPECT_THROW(rope_inplace(x, 4, {0, 16}, table), Error);
}

// One sequence of `context` tokens of which the last `queries` are new, cached in shuffled pages.
AttentionBatch make_batch(int context, int queries, int page_size, std::mt19937& rng) {
  AttentionBatch batch;
  batch.page_size = page_size;
  batch.query_start = {0, queries};
  batch.context_lens = {context};
  int pages = (context + page_size - 1) / page_size;
  std::vector<int32_t> table(pages);
  std::iota(table.begin(), table.end(), 1);
  std::shuffle(table.begin(), table.end(), rng);
  batch.add_pages(table);
  for (int t = 0; t < queries; ++t) {
    int position = context - queries + t;
    batch.positions.push_back(position);
    batch.slot_mapping.push_back(int64_t(table[position / page_size]) * page_size + position % page_size);
  }
  return batch;
}

TEST(CpuOps, ExpandedAndAbsorbedMlaAgree) {
  // Real DeepSeek head widths: latent 512, rope 64, nope 128, v 128; few heads to stay quick.
  const int H = 4, L = 512, dr = 64, dn = 128, dv = 128, context = 70, queries = 5, page = 16;
  std::mt19937 rng(5);
  AttentionBatch batch = make_batch(context, queries, page, rng);
  Tensor cache = Tensor::empty(DType::kF32, {8, page, L + dr});
  // Fill every cached row of the sequence through write_cache, one token at a time.
  AttentionBatch all = make_batch(context, context, page, rng);
  all.page_table_start = batch.page_table_start;
  all.page_ids = batch.page_ids;
  for (int t = 0; t < context; ++t)
    all.slot_mapping[t] = int64_t(batch.pages(0)[t / page]) * page + t % page;
  write_cache(cache, random_tensor({context, L + dr}, rng), all);

  Tensor kv_b = random_tensor({H * (dn + dv), L}, rng, 0.05f);  // kv_b_proj.weight
  Tensor q = random_tensor({queries, H, dn + dr}, rng);
  float scale = 0.07f;

  Tensor latent = gather_cache(cache, batch);  // [context, L + dr]
  Tensor c = Tensor::empty(DType::kF32, {context, L});
  Tensor k_rope = Tensor::empty(DType::kF32, {context, dr});
  for (int j = 0; j < context; ++j) {
    std::copy_n(latent.data<float>() + j * (L + dr), L, c.data<float>() + j * L);
    std::copy_n(latent.data<float>() + j * (L + dr) + L, dr, k_rope.data<float>() + j * dr);
  }
  Tensor kv = linear(c, {kv_b}).view({context, H, dn + dv});
  Tensor expanded = attention_expanded(q, kv, k_rope, batch, scale);  // [queries, H, dv]

  // Absorb: q_latent[h] = W_UK[h]^T q_nope[h]; out[h] = W_UV[h] o_latent[h].
  Tensor w_uk_t = Tensor::empty(DType::kF32, {H, L, dn});
  Tensor w_uv = Tensor::empty(DType::kF32, {H, dv, L});
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < dn; ++i)
      for (int l = 0; l < L; ++l) w_uk_t.data<float>()[(h * L + l) * dn + i] = kv_b.data<float>()[(h * (dn + dv) + i) * L + l];
    std::copy_n(kv_b.data<float>() + (h * (dn + dv) + dn) * L, dv * L, w_uv.data<float>() + h * dv * L);
  }
  Tensor q_nope = Tensor::empty(DType::kF32, {queries, H, dn});
  Tensor q_abs = Tensor::empty(DType::kF32, {queries, H, L + dr});
  for (int t = 0; t < queries; ++t)
    for (int h = 0; h < H; ++h) std::copy_n(q.data<float>() + (t * H + h) * (dn + dr), dn, q_nope.data<float>() + (t * H + h) * dn);
  Tensor q_latent = grouped_linear(q_nope, w_uk_t);  // [queries, H, L]
  for (int t = 0; t < queries; ++t)
    for (int h = 0; h < H; ++h) {
      std::copy_n(q_latent.data<float>() + (t * H + h) * L, L, q_abs.data<float>() + (t * H + h) * (L + dr));
      std::copy_n(q.data<float>() + (t * H + h) * (dn + dr) + dn, dr, q_abs.data<float>() + (t * H + h) * (L + dr) + L);
    }
  Tensor o_latent = attention_absorbed(q_abs, cache, batch, scale, L);
  Tensor absorbed = grouped_linear(o_latent, w_uv);
  EXPECT_LT(max_abs_diff(expanded, absorbed), 1e-4f);

  // Causality: the first query sees keys up to its own position only, so changing a later row of
  // the cache leaves it unchanged.
  float* later = cache.data<float>() + all.slot_mapping[context - 1] * (L + dr);
  later[0] += 100.0f;
  Tensor after = attention_absorbed(q_abs, cache, batch, scale, L);
  for (int h = 0; h < H; ++h)
    for (int l = 0; l < L; ++l)
      EXPECT_EQ(after.data<float>()[h * L + l], o_latent.data<float>()[h * L + l]);
}

// The FP8 cache formats (cache_layout.h) hold what their definitions say, at known values: e4m3 with
// the cache's scale of 1, saturating at 448; DeepSeek V3.2's rows with a scale a 128-value tile
// (its largest magnitude / 448) at bytes 512.., and the rope in bf16 at bytes 528...
TEST(CpuOps, Fp8CacheRowsHoldTheirFormatsValues) {
  const int L = 512, dr = 64, page = 4;
  std::mt19937 rng(3);
  AttentionBatch batch = make_batch(1, 1, page, rng);
  Tensor row = Tensor::empty(DType::kF32, {1, L + dr});
  float* x = row.data<float>();
  for (int i = 0; i < L + dr; ++i) x[i] = 0.0f;
  x[0] = 1.0f, x[1] = 0.3f, x[2] = 500.0f, x[3] = -1000.0f;  // tile 0: amax 1000
  x[128] = 7.0f, x[129] = 0.5f, x[130] = -0.25f;            // tile 1: amax 7, scale 2^-6
  x[L] = 1.00390625f, x[L + 1] = -3.0f;                     // rope: 1 + 2^-8 rounds to 1 in bf16

  Tensor e4m3 = Tensor::empty(DType::kF8E4M3, {2, page, L + dr});
  write_cache(e4m3, row, batch);
  Tensor back = gather_cache(e4m3, batch);
  EXPECT_EQ(back.data<float>()[0], 1.0f);
  EXPECT_EQ(back.data<float>()[1], 0.3125f);  // 1.25 x 2^-2, the nearest e4m3
  EXPECT_EQ(back.data<float>()[2], 448.0f);   // saturated
  EXPECT_EQ(back.data<float>()[3], -448.0f);
  EXPECT_EQ(back.data<float>()[128], 7.0f);
  EXPECT_EQ(back.data<float>()[L], 1.0f);

  Tensor ds = Tensor::empty(DType::kU8, {2, page, ds_mla_row_bytes(L)});
  ASSERT_EQ(ds.dim(2), 656);
  write_cache(ds, row, batch);
  back = gather_cache(ds, batch);
  const uint8_t* bytes = ds.data<uint8_t>() + batch.slot_mapping[0] * 656;
  float scale0, scale1;
  std::memcpy(&scale0, bytes + 512, 4);
  std::memcpy(&scale1, bytes + 516, 4);
  EXPECT_EQ(scale0, 1000.0f / 448.0f);
  EXPECT_EQ(scale1, 0.015625f);
  EXPECT_EQ(back.data<float>()[129], 0.5f);  // 32 x 2^-6, exact
  EXPECT_EQ(back.data<float>()[130], -0.25f);
  EXPECT_EQ(back.data<float>()[128], 7.0f);  // 448 x 2^-6
  EXPECT_NEAR(back.data<float>()[3], -1000.0f, 1e-3f);
  EXPECT_EQ(back.data<float>()[256], 0.0f);  // an all-zero tile
  EXPECT_EQ(back.data<float>()[L], 1.0f);
  EXPECT_EQ(back.data<float>()[L + 1], -3.0f);
  uint16_t rope0;
  std::memcpy(&rope0, bytes + 528, 2);
  EXPECT_EQ(rope0, f32_to_bf16(1.0f));

  // A byte row that is no fp8_ds_mla row is refused by name.
  Tensor odd = Tensor::empty(DType::kU8, {2, page, 600});
  try {
    write_cache(odd, row, batch);
    ADD_FAILURE() << "a 600-byte row was taken";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("not an fp8_ds_mla row"), std::string::npos) << error.what();
  }
}

// Absorbed attention over an FP8 cache is attention over its rows dequantized: bit for bit the same
// as over an f32 cache holding gather_cache's values.
TEST(CpuOps, AbsorbedMlaOverAnFp8CacheIsMlaOverItsDequantizedRows) {
  const int H = 4, L = 512, dr = 64, context = 70, queries = 3, page = 16;
  for (DType dtype : {DType::kF8E4M3, DType::kU8}) {
    std::mt19937 rng(11);
    AttentionBatch batch = make_batch(context, queries, page, rng);
    AttentionBatch all = batch;
    all.positions.clear(), all.slot_mapping.clear();
    all.query_start = {0, context};
    for (int t = 0; t < context; ++t) {
      all.positions.push_back(t);
      all.slot_mapping.push_back(int64_t(batch.pages(0)[t / page]) * page + t % page);
    }
    const int64_t row = dtype == DType::kU8 ? ds_mla_row_bytes(L) : L + dr;
    Tensor fp8 = Tensor::empty(dtype, {8, page, row});
    write_cache(fp8, random_tensor({context, L + dr}, rng, 2.0f), all);
    Tensor f32 = Tensor::empty(DType::kF32, {8, page, L + dr});
    write_cache(f32, gather_cache(fp8, all), all);
    Tensor q = random_tensor({queries, H, L + dr}, rng);
    Tensor a = attention_absorbed(q, fp8, batch, 0.05f, L), b = attention_absorbed(q, f32, batch, 0.05f, L);
    ASSERT_EQ(a.shape(), b.shape());
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << dtype_name(dtype);
  }
}

TEST(CpuOps, NoauxRoutingPicksFromBestGroupsAndWeighsUnbiased) {
  // 8 experts in 4 groups of 2; keep 2 groups; pick 2 experts.
  Tensor logits = Tensor::empty(DType::kF32, {1, 8});
  float values[8] = {3.0f, -3.0f, 0.5f, 0.4f, -1.0f, 2.5f, 0.0f, 0.1f};
  std::copy_n(values, 8, logits.data<float>());
  Tensor bias = Tensor::empty(DType::kF32, {8});
  bias.data<float>()[6] = 5.0f;  // expert 6 chosen through the bias, weighed without it
  RouterParams params{Scoring::kSigmoid, ExpertSelection::kNoauxTc, 2, 4, 2, true, 2.5f};
  Routing r = route(logits, bias, params);
  // Group sums (biased): g0 = s(3)+s(-3) = 1.0, g1 = s(.5)+s(.4) = 1.22, g2 = s(-1)+s(2.5) = 1.19, g3 = 5+s(0)+s(.1) = 6.02.
  // Kept groups: g3 and g1; top-2 biased: expert 6, then expert 2 (0.62 beats 0.60 for 3, 0.52 for 7).
  auto sig = [](float v) { return 1.0f / (1.0f + std::exp(-v)); };
  int first = r.expert_ids.data<int32_t>()[0], second = r.expert_ids.data<int32_t>()[1];
  EXPECT_EQ(first, 6);
  EXPECT_EQ(second, 2);
  float total = sig(0.0f) + sig(0.5f);
  EXPECT_NEAR(r.weights.data<float>()[0], sig(0.0f) / total * 2.5f, 1e-6);
  EXPECT_NEAR(r.weights.data<float>()[1], sig(0.5f) / total * 2.5f, 1e-6);
}

TEST(CpuOps, GreedySoftmaxRouting) {
  Tensor logits = Tensor::empty(DType::kF32, {1, 4});
  float values[4] = {1.0f, 3.0f, 2.0f, 0.0f};
  std::copy_n(values, 4, logits.data<float>());
  RouterParams params{Scoring::kSoftmax, ExpertSelection::kGreedy, 2, 1, 1, false, 1.0f};
  Routing r = route(logits, Tensor(), params);
  double z = std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + 1.0;
  EXPECT_EQ(r.expert_ids.data<int32_t>()[0], 1);
  EXPECT_EQ(r.expert_ids.data<int32_t>()[1], 2);
  EXPECT_NEAR(r.weights.data<float>()[0], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(r.weights.data<float>()[1], std::exp(2.0) / z, 1e-6);
}

// Experts [first, first + count) of a stack, sharing its storage: what one rank holds under expert
// parallelism.
ExpertStack expert_slice(const ExpertStack& whole, int64_t first, int64_t count) {
  return {{whole.gate_up.data.slice(first, first + count), {}, whole.gate_up.format},
          {whole.down.data.slice(first, first + count), {}, whole.down.format},
          first};
}

TEST(CpuOps, MoeSlicesCoveringEveryExpertSumToTheWholeStackAndSkipOtherRanksIds) {
  constexpr int64_t T = 6, E = 8, k = 3, H = 32, I = 16;
  std::mt19937 rng(21);
  Tensor x = random_tensor({T, H}, rng);
  ExpertStack whole;  // f32, experts 0..E-1
  whole.gate_up.data = random_tensor({E, 2 * I, H}, rng, 0.2f);
  whole.down.data = random_tensor({E, H, I}, rng, 0.2f);
  // Distinct ids per token; token 5 is routed to experts 0..2 only.
  const int32_t ids[T][k] = {{0, 7, 3}, {5, 4, 1}, {6, 2, 0}, {3, 4, 5}, {7, 6, 1}, {2, 0, 1}};
  Routing routing{Tensor::empty(DType::kI32, {T, k}), random_tensor({T, k}, rng)};
  std::copy_n(&ids[0][0], T * k, routing.expert_ids.data<int32_t>());

  Tensor expected = moe_experts(x, routing, whole);
  Tensor sum = Tensor::empty(DType::kF32, {T, H});
  for (auto [first, count] : {std::pair<int64_t, int64_t>{0, 3}, {3, 2}, {5, 3}}) {
    Tensor part = moe_experts(x, routing, expert_slice(whole, first, count));
    for (int64_t i = 0; i < sum.numel(); ++i) sum.data<float>()[i] += part.data<float>()[i];
    if (first > 2) {  // token 5 has no expert here: exact zeros
      for (int64_t c = 0; c < H; ++c) EXPECT_EQ(part.data<float>()[5 * H + c], 0.0f) << "slice from " << first;
    }
  }
  float scale = 0.0f;
  for (int64_t i = 0; i < expected.numel(); ++i) scale = std::max(scale, std::fabs(expected.data<float>()[i]));
  ASSERT_GT(scale, 0.1f);
  EXPECT_LE(max_abs_diff(sum, expected), 1e-5f * scale);

  // A slice that none of the routed ids falls in gives zeros.
  Routing low{routing.expert_ids.clone(), routing.weights};
  for (int64_t i = 0; i < low.expert_ids.numel(); ++i) low.expert_ids.data<int32_t>()[i] %= 5;  // ids 0..4
  Tensor none = moe_experts(x, low, expert_slice(whole, 5, 3));
  EXPECT_EQ(none.shape(), (Shape{T, H}));
  for (int64_t i = 0; i < none.numel(); ++i) ASSERT_EQ(none.data<float>()[i], 0.0f) << i;

  // A negative id is refused, whatever the slice.
  Routing negative{routing.expert_ids.clone(), routing.weights};
  negative.expert_ids.data<int32_t>()[4] = -1;
  EXPECT_THROW(moe_experts(x, negative, whole), Error);
  EXPECT_THROW(moe_experts(x, negative, expert_slice(whole, 5, 3)), Error);
}

// One token per row of logits, each row with its own parameters and draw, no penalties.
Tensor sample(const Tensor& logits, const std::vector<SamplingParams>& params, const std::vector<float>& uniforms) {
  SamplingBatch batch;
  for (size_t b = 0; b < params.size(); ++b) {
    SamplingRow row;
    row.params = params[b];
    row.uniform = uniforms[b];
    batch.rows.push_back(row);
    batch.history_start.push_back(0);
    batch.banned_start.push_back(0);
  }
  Tensor copy = logits.clone();
  return sample_tokens(copy, batch).tokens;
}

TEST(CpuOps, SamplingIsGreedyOrSeededInverseCdf) {
  Tensor logits = Tensor::empty(DType::kF32, {2, 4});
  float values[8] = {0.0f, 2.0f, 1.0f, -1.0f, 5.0f, 5.0f, 0.0f, 0.0f};
  std::copy_n(values, 8, logits.data<float>());
  Tensor greedy = sample(logits, {SamplingParams{}, SamplingParams{}}, {0.9f, 0.9f});
  EXPECT_EQ(greedy.data<int32_t>()[0], 1);
  EXPECT_EQ(greedy.data<int32_t>()[1], 0);  // ties go to the first
  SamplingParams hot{1.0f, 0, 1.0f, 0.0f};
  // Row 0 probabilities in order 1, 2, 0, 3: e^2, e^1, e^0, e^-1 over their sum.
  double z = std::exp(2.0) + std::exp(1.0) + 1.0 + std::exp(-1.0);
  float just_past_first = static_cast<float>(std::exp(2.0) / z) + 1e-4f;
  EXPECT_EQ(sample(logits.slice(0, 1), {hot}, {0.0f}).data<int32_t>()[0], 1);
  EXPECT_EQ(sample(logits.slice(0, 1), {hot}, {just_past_first}).data<int32_t>()[0], 2);
  EXPECT_EQ(sample(logits.slice(0, 1), {hot}, {0.9999f}).data<int32_t>()[0], 3);
  SamplingParams top2{1.0f, 2, 1.0f, 0.0f};
  EXPECT_EQ(sample(logits.slice(0, 1), {top2}, {0.9999f}).data<int32_t>()[0], 2);
  SamplingParams nucleus{1.0f, 0, 0.5f, 0.0f};  // the first token alone holds > 50%
  EXPECT_EQ(sample(logits.slice(0, 1), {nucleus}, {0.9999f}).data<int32_t>()[0], 1);
}

TEST(CpuOps, EmbeddingRejectsOutOfRangeIds) {
  Tensor table = Tensor::empty(DType::kF32, {4, 2});
  Tensor ids = Tensor::empty(DType::kI32, {1});
  ids.data<int32_t>()[0] = 4;
  EXPECT_THROW(embedding(table, ids), Error);
}

}  // namespace
}  // namespace dsinfer::backend::cpu
