// The CUDA backend against the CPU reference, op by op, through Backend& (backend/conformance):
// the fast kernels at DeepSeek-V3's real shapes, and the reference kernels (CUDA-core attention,
// our own fallback GEMM) at the small tier. Runs on a GPU machine (scripts/gpu-test.sh); without a
// GPU it fails at the first test, it never skips. Label "gpu": not part of `make test`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "backend/conformance/conformance.h"
#include "backend/cuda/cuda_backend.h"
// The fused FP8-quantizing launchers, tested below against the CPU's ops (no Backend op of their own yet).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/rope_cache.h"
#include "core/dtype.h"
#include "core/error.h"

namespace dsinfer::backend::cuda {
namespace {

// The perf column of the report when DSINFER_CONFORMANCE_PERF is set; only the cases of some ops
// when DSINFER_CONFORMANCE_OPS lists them (comma-separated, e.g. "linear,grouped_linear"), and only
// those whose name contains DSINFER_CONFORMANCE_CASES (e.g. "AWQ"), for a quick run while a kernel
// is worked on. DSINFER_CONFORMANCE_SHARD=i/n runs shard i of n of the cases: scripts/gpu-test.sh
// splits the real-shape tier, whose CPU reference takes minutes, into four steps with it.
conformance::ConformanceOptions options_from_environment(conformance::Tier tier) {
  conformance::ConformanceOptions options;
  options.tier = tier;
  options.perf = std::getenv("DSINFER_CONFORMANCE_PERF") != nullptr;
  if (const char* ops = std::getenv("DSINFER_CONFORMANCE_OPS")) {
    std::stringstream list(ops);
    for (std::string op; std::getline(list, op, ',');)
      if (!op.empty()) options.ops.push_back(op);
  }
  if (const char* cases = std::getenv("DSINFER_CONFORMANCE_CASES")) options.name_contains = cases;
  if (const char* shard = std::getenv("DSINFER_CONFORMANCE_SHARD")) {
    char slash = 0;
    std::istringstream in(shard);
    if (!(in >> options.shard >> slash >> options.shards) || slash != '/')
      throw Error(str_cat("DSINFER_CONFORMANCE_SHARD=", shard, ": want i/n, e.g. 0/2"));
  }
  return options;
}

void expect_conformance(const CudaOptions& options, conformance::Tier tier) {
  ASSERT_GT(device_count(), 0) << "no CUDA device: this test needs a GPU";
  auto backend = make_cuda_backend(options);
  conformance::ConformanceReport report =
      conformance::run_conformance(*backend, options_from_environment(tier), std::cout);
  EXPECT_TRUE(report.passed()) << report.num_failed() << " checks failed";
  for (const std::string& op : report.failing_ops()) ADD_FAILURE() << "failing op: " << op;
}

TEST(CudaConformance, FastKernelsMatchTheCpuAtRealDeepSeekShapes) {
  expect_conformance({}, conformance::Tier::kFull);
}

TEST(CudaConformance, FastKernelsMatchTheCpuAtSmallShapes) {
  expect_conformance({}, conformance::Tier::kSmall);
}

TEST(CudaConformance, ReferenceKernelsMatchTheCpuAtSmallShapes) {
  CudaOptions options;
  options.reference_kernels = true;
  expect_conformance(options, conformance::Tier::kSmall);
}

// ---- Fused FP8 quantization: silu_mul_quant_fp8 and add_rms_norm_quant_fp8 (no Backend op yet) ----
// Against the CPU's silu_mul and add_rms_norm_inplace: the bf16 outputs within the elementwise bound,
// q * scale within e4m3's rounding of the CPU's values, and q and the scales exactly
// quantize_fp8_per_token_group's formula applied on the host to the GPU's own bf16 output (padding
// rows zeros with scale 1).

constexpr double kBoundBf16Output = 2e-5;  // conformance.cc's kBoundElementwise
constexpr double kBoundFp8Output = 3e-3;   // e4m3 keeps 3 mantissa bits: <= 2^-4 relative, ~1.3e-3 nmse
constexpr float kQuantEps = 1e-6f;

// Device memory for one test, freed at scope exit; stream 0, synchronous copies.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) { DSINFER_CUDA_CHECK(cudaMalloc(&data_, std::max<size_t>(n, 1) * sizeof(T))); }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return data_; }
  template <typename U>
  U* as() const { return reinterpret_cast<U*>(data_); }
  void upload(const std::vector<T>& host) {
    DSINFER_CHECK(host.size() == n_, "DeviceArray: ", host.size(), " values for ", n_);
    DSINFER_CUDA_CHECK(cudaMemcpy(data_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    DSINFER_CUDA_CHECK(cudaDeviceSynchronize());
    DSINFER_CUDA_CHECK(cudaMemcpy(host.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* data_ = nullptr;
  size_t n_;
};

// bf16 values (bits for the GPU) and the same values as an f32 host tensor (for the CPU).
struct Bf16Values {
  std::vector<uint16_t> bits;
  Tensor host;
};

Bf16Values bf16_values(const std::vector<uint16_t>& bits, Shape shape) {
  Bf16Values values{bits, Tensor::empty(DType::kF32, shape)};
  for (size_t i = 0; i < bits.size(); ++i) values.host.data<float>()[i] = bf16_to_f32(bits[i]);
  return values;
}

Bf16Values random_bf16(Shape shape, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<uint16_t> bits(static_cast<size_t>(shape.numel()));
  for (uint16_t& b : bits) b = f32_to_bf16(normal(rng));
  return bf16_values(bits, shape);
}

void expect_close(const std::string& what, const Tensor& reference, const Tensor& candidate, double bound) {
  const conformance::CheckResult result = conformance::check_nmse(what, reference, candidate, bound);
  EXPECT_TRUE(result.passed) << what << ": nmse " << result.value << " (bound " << bound << ") " << result.detail;
}

// q [padded_rows, cols] and scales [cols / 128, padded_rows] against quantize_fp8_per_token_group's
// formula for `values` [rows, cols] (f32 copies of bf16 values); returns q * scale [rows, cols].
Tensor expect_quantized(const std::string& what, const Tensor& values, int64_t padded_rows,
                        const std::vector<uint8_t>& q, const std::vector<float>& scales) {
  const int64_t rows = values.dim(0), cols = values.dim(1), groups = cols / 128;
  Tensor dequantized = Tensor::empty(DType::kF32, {rows, cols});
  int64_t wrong_scales = 0, wrong_q = 0;
  for (int64_t t = 0; t < padded_rows; ++t) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* group = t < rows ? values.data<float>() + t * cols + g * 128 : nullptr;
      float amax = 0.0f;
      for (int64_t c = 0; group != nullptr && c < 128; ++c) amax = std::max(amax, std::fabs(group[c]));
      float scale = amax / kFp8E4M3Max;
      if (!(scale > 0.0f)) scale = 1.0f;
      wrong_scales += scales[g * padded_rows + t] != scale;
      for (int64_t c = 0; c < 128; ++c) {
        const uint8_t code = q[t * cols + g * 128 + c];
        wrong_q += code != f32_to_fp8e4m3((group != nullptr ? group[c] : 0.0f) / scale);
        if (group != nullptr) dequantized.data<float>()[t * cols + g * 128 + c] = fp8e4m3_to_f32(code) * scale;
      }
    }
  }
  EXPECT_EQ(wrong_scales, 0) << what << ": scales differ from amax / 448";
  EXPECT_EQ(wrong_q, 0) << what << ": e4m3 codes differ from the rounded value / scale";
  return dequantized;
}

TEST(CudaFusedQuantization, SiluMulQuantFp8MatchesTheCpuSiluMul) {
  ASSERT_GT(device_count(), 0) << "no CUDA device: this test needs a GPU";
  auto cpu = make_cpu_backend();
  struct Shape2 { int64_t tokens, inter; };
  // 640 and 256 columns: a warp's 4 groups only partly in the row; 1001 rows: on an H200 some
  // blocks walk two rows, three of them ending in a padding row.
  for (Shape2 shape : {Shape2{1, 2048}, Shape2{37, 2048}, Shape2{64, 18432}, Shape2{5, 640}, Shape2{1001, 256}}) {
    const int64_t T = shape.tokens, I = shape.inter, padded = (T + 3) / 4 * 4;
    const std::string what = str_cat("silu_mul_quant_fp8 T=", T, " I=", I);
    const Bf16Values x = random_bf16({T, 2 * I}, static_cast<uint32_t>(T * 31 + I), 1.5f);
    const Tensor reference = cpu->silu_mul(x.host);  // [T, I] f32
    DeviceArray<uint16_t> device_x(T * 2 * I), device_h(T * I);
    DeviceArray<uint8_t> device_q(padded * I);
    DeviceArray<float> device_scales(I / 128 * padded);
    device_x.upload(x.bits);
    silu_mul_quant_fp8(device_x.as<__nv_bfloat16>(), device_h.as<__nv_bfloat16>(), T, padded, I,
                       device_q.as<__nv_fp8_e4m3>(), device_scales.get(), nullptr);
    const Bf16Values h = bf16_values(device_h.download(), {T, I});
    expect_close(what + " h", reference, h.host, kBoundBf16Output);
    const Tensor dequantized = expect_quantized(what, h.host, padded, device_q.download(), device_scales.download());
    expect_close(what + " q * scale", reference, dequantized, kBoundFp8Output);
  }
}

TEST(CudaFusedQuantization, AddRmsNormQuantFp8MatchesTheCpuAddRmsNorm) {
  ASSERT_GT(device_count(), 0) << "no CUDA device: this test needs a GPU";
  auto cpu = make_cpu_backend();
  const int64_t H = 7168;
  Tensor weight = Tensor::empty(DType::kF32, {H});
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(0.2f, 1.0f);
  for (int64_t i = 0; i < H; ++i) weight.data<float>()[i] = uniform(rng);
  DeviceArray<float> device_weight(H);
  device_weight.upload(std::vector<float>(weight.data<float>(), weight.data<float>() + H));
  // 1 and 37 rows: one block per row; 1024: the persistent schedule too (norm.h).
  for (int64_t T : {1, 37, 1024}) {
    const int64_t padded = (T + 3) / 4 * 4;
    const Bf16Values residual = random_bf16({T, H}, static_cast<uint32_t>(T * 13 + 1), 3.0f);
    const Bf16Values x = random_bf16({T, H}, static_cast<uint32_t>(T * 13 + 2), 1.0f);
    Tensor reference_residual = residual.host.clone();
    const Tensor reference = cpu->add_rms_norm_inplace(reference_residual, x.host, weight, kQuantEps);
    for (NormSchedule schedule : {NormSchedule::kBlockPerRow, NormSchedule::kPersistent}) {
      const std::string what = str_cat("add_rms_norm_quant_fp8 T=", T,
                                       schedule == NormSchedule::kPersistent ? " persistent" : " block/row");
      DeviceArray<uint16_t> device_residual(T * H), device_x(T * H), device_out(T * H);
      DeviceArray<uint8_t> device_q(padded * H);
      DeviceArray<float> device_scales(H / 128 * padded);
      device_residual.upload(residual.bits);
      device_x.upload(x.bits);
      add_rms_norm_quant_fp8(device_residual.as<__nv_bfloat16>(), device_x.as<__nv_bfloat16>(), device_weight.get(),
                             device_out.as<__nv_bfloat16>(), T, padded, H, kQuantEps, device_q.as<__nv_fp8_e4m3>(),
                             device_scales.get(), nullptr, schedule);
      const Bf16Values new_residual = bf16_values(device_residual.download(), {T, H});
      const Bf16Values out = bf16_values(device_out.download(), {T, H});
      expect_close(what + " residual", reference_residual, new_residual.host, kBoundBf16Output);
      expect_close(what + " out", reference, out.host, kBoundBf16Output);
      const Tensor dequantized =
          expect_quantized(what, out.host, padded, device_q.download(), device_scales.download());
      expect_close(what + " q * scale", reference, dequantized, kBoundFp8Output);
    }
  }
}

// ---- Long walks: rope_inplace and write_latent_cache over many tokens ----
// rope_inplace's blocks form one wave and walk the tokens, taking each token's position from batches
// they load 32 tokens at a time. Conformance's steps are too short for a walk to reach its second
// batch; this is not (on an H200: 396 rope blocks). The latent write is checked over as many tokens.
// Checked element by element against the host's float arithmetic: within 2^-8 of the value (bf16
// rounding, FMA contraction and the sum's order apart), where a wrong token, slot or position is off
// by the values themselves.

// Tables of real rotations: angle p * 10000^(-2i / rope_dim), [positions, rope_dim / 2] each.
void rope_tables(int64_t positions, int64_t rope_dim, std::vector<float>& cos_table, std::vector<float>& sin_table) {
  const int64_t half = rope_dim / 2;
  cos_table.resize(positions * half);
  sin_table.resize(positions * half);
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) * std::pow(10000.0, -2.0 * static_cast<double>(i) / rope_dim);
      cos_table[p * half + i] = static_cast<float>(std::cos(angle));
      sin_table[p * half + i] = static_cast<float>(std::sin(angle));
    }
}

std::vector<int32_t> random_positions(int64_t tokens, int64_t positions, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> position(0, static_cast<int32_t>(positions - 1));
  std::vector<int32_t> out(tokens);
  for (int32_t& p : out) p = position(rng);
  return out;
}

bool close_to(float reference, uint16_t bits) {
  return std::fabs(bf16_to_f32(bits) - reference) <= std::ldexp(std::fabs(reference), -8) + 1e-5f;
}

// Interleaved pairs (a, b) = (2i, 2i + 1) of v rotated by the table row: rope_inplace's formula.
void rotate_on_host(float* v, int64_t half, const float* c, const float* s) {
  for (int64_t i = 0; i < half; ++i) {
    const float x0 = v[2 * i], x1 = v[2 * i + 1];
    v[2 * i] = x0 * c[i] - x1 * s[i];
    v[2 * i + 1] = x1 * c[i] + x0 * s[i];
  }
}

TEST(CudaLongWalks, RopeMatchesTheHostWhenBlocksWalkManyTokens) {
  ASSERT_GT(device_count(), 0) << "no CUDA device: this test needs a GPU";
  constexpr int64_t kPositions = 4096;
  struct RopeShape { int64_t tokens, groups, group_dim, begin, rope_dim; };
  // V3's q at 2000 tokens; 16 heads at 14000 (blocks walk 35 tokens); rope 48 (units of a token do
  // not share their cos and sin), 14000 tokens.
  for (RopeShape r : {RopeShape{2000, 128, 192, 128, 64}, RopeShape{14000, 16, 192, 128, 64},
                      RopeShape{14000, 16, 64, 16, 48}}) {
    const std::string what = str_cat("rope_inplace T=", r.tokens, " groups ", r.groups, " rope ", r.rope_dim);
    const int64_t half = r.rope_dim / 2, n = r.tokens * r.groups * r.group_dim;
    std::vector<float> cos_table, sin_table;
    rope_tables(kPositions, r.rope_dim, cos_table, sin_table);
    const std::vector<int32_t> positions = random_positions(r.tokens, kPositions, static_cast<uint32_t>(r.tokens + 1));
    const Bf16Values x = random_bf16({r.tokens, r.groups, r.group_dim}, static_cast<uint32_t>(r.groups), 1.0f);
    DeviceArray<uint16_t> device_x(n);
    DeviceArray<int32_t> device_positions(r.tokens);
    DeviceArray<float> device_cos(cos_table.size()), device_sin(sin_table.size());
    device_x.upload(x.bits);
    device_positions.upload(positions);
    device_cos.upload(cos_table);
    device_sin.upload(sin_table);
    rope_inplace(device_x.as<__nv_bfloat16>(), r.tokens, r.groups, r.group_dim, r.groups * r.group_dim, r.begin,
                 r.rope_dim, device_positions.get(), device_cos.get(), device_sin.get(), true, nullptr);
    const std::vector<uint16_t> rotated = device_x.download();
    int64_t wrong = 0, changed = 0;
    std::vector<float> v(r.rope_dim);
    for (int64_t t = 0; t < r.tokens; ++t)
      for (int64_t g = 0; g < r.groups; ++g) {
        const int64_t row = (t * r.groups + g) * r.group_dim;
        for (int64_t d = 0; d < r.rope_dim; ++d) v[d] = bf16_to_f32(x.bits[row + r.begin + d]);
        rotate_on_host(v.data(), half, &cos_table[positions[t] * half], &sin_table[positions[t] * half]);
        for (int64_t d = 0; d < r.group_dim; ++d) {
          const bool rope = d >= r.begin && d < r.begin + r.rope_dim;
          if (rope) wrong += !close_to(v[d - r.begin], rotated[row + d]);
          else changed += rotated[row + d] != x.bits[row + d];
        }
      }
    EXPECT_EQ(wrong, 0) << what << ": rotated values off the host's";
    EXPECT_EQ(changed, 0) << what << ": values outside the rope dims changed";
  }
}

TEST(CudaLongWalks, LatentCacheWriteMatchesTheHostOverManyTokens) {
  ASSERT_GT(device_count(), 0) << "no CUDA device: this test needs a GPU";
  constexpr int64_t kLatentDim = 512, kRopeDims = 64, kWidth = kLatentDim + kRopeDims, kPositions = 4096;
  constexpr int64_t kPage = 64;
  constexpr float kEps = 1e-6f;
  // 37 tokens, and 90000 (many waves of the warp-per-token launch).
  for (int64_t T : {37, 90000}) {
    const std::string what = str_cat("write_latent_cache T=", T);
    const int64_t pages = (T + kPage - 1) / kPage + 1, slots = pages * kPage;
    // Scattered pages, every 1000th token skipped (slot -1).
    std::vector<int64_t> slot_mapping(T);
    for (int64_t t = 0; t < T; ++t)
      slot_mapping[t] = t % 1000 == 999 ? -1 : (t / kPage * 7919 + 3) % pages * kPage + t % kPage;
    std::vector<float> cos_table, sin_table;
    rope_tables(kPositions, kRopeDims, cos_table, sin_table);
    const std::vector<int32_t> positions = random_positions(T, kPositions, static_cast<uint32_t>(T));
    const Bf16Values kv_a = random_bf16({T, kWidth}, static_cast<uint32_t>(T + 2), 1.5f);
    const Bf16Values cache_before = random_bf16({slots, kWidth}, static_cast<uint32_t>(T + 3), 1.0f);
    std::vector<float> weight(kLatentDim);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> uniform(0.2f, 1.0f);
    for (float& w : weight) w = uniform(rng);

    DeviceArray<uint16_t> device_kv_a(T * kWidth), device_cache(slots * kWidth);
    DeviceArray<int64_t> device_slots(T);
    DeviceArray<int32_t> device_positions(T);
    DeviceArray<float> device_weight(kLatentDim), device_cos(cos_table.size()), device_sin(sin_table.size());
    device_kv_a.upload(kv_a.bits);
    device_cache.upload(cache_before.bits);
    device_slots.upload(slot_mapping);
    device_positions.upload(positions);
    device_weight.upload(weight);
    device_cos.upload(cos_table);
    device_sin.upload(sin_table);
    write_latent_cache(device_kv_a.as<__nv_bfloat16>(), T, kLatentDim, kRopeDims, device_weight.get(), kEps,
                       device_positions.get(), device_cos.get(), device_sin.get(), true, device_slots.get(),
                       device_cache.as<__nv_bfloat16>(), nullptr);
    const std::vector<uint16_t> cache = device_cache.download();

    std::vector<bool> written(slots, false);
    int64_t wrong = 0, changed = 0;
    std::vector<float> row(kWidth);
    for (int64_t t = 0; t < T; ++t) {
      if (slot_mapping[t] < 0) continue;
      written[slot_mapping[t]] = true;
      double sum_squares = 0.0;
      for (int64_t d = 0; d < kWidth; ++d) row[d] = bf16_to_f32(kv_a.bits[t * kWidth + d]);
      for (int64_t d = 0; d < kLatentDim; ++d) sum_squares += static_cast<double>(row[d]) * row[d];
      const float inv_rms = static_cast<float>(1.0 / std::sqrt(sum_squares / kLatentDim + kEps));
      for (int64_t d = 0; d < kLatentDim; ++d) row[d] = weight[d] * (row[d] * inv_rms);
      rotate_on_host(row.data() + kLatentDim, kRopeDims / 2, &cos_table[positions[t] * kRopeDims / 2],
                     &sin_table[positions[t] * kRopeDims / 2]);
      const uint16_t* out = cache.data() + slot_mapping[t] * kWidth;
      for (int64_t d = 0; d < kWidth; ++d) wrong += !close_to(row[d], out[d]);
    }
    for (int64_t slot = 0; slot < slots; ++slot) {
      if (written[slot]) continue;
      for (int64_t d = 0; d < kWidth; ++d) changed += cache[slot * kWidth + d] != cache_before.bits[slot * kWidth + d];
    }
    EXPECT_EQ(wrong, 0) << what << ": cache rows off the host's";
    EXPECT_EQ(changed, 0) << what << ": rows no token writes changed";
  }
}

}  // namespace
}  // namespace dsinfer::backend::cuda
