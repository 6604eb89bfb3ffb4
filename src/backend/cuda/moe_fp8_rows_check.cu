// moe_fp8_rows_check: are the FP8 routed-expert products (moe_fp8_rows.h) right inside moe_experts
// (moe.h), and how close to copy bandwidth do they run? A standalone GPU program, not a ctest test: it
// needs a GPU and ~12 GB of its memory.
//
//   build/src/backend/cuda/moe_fp8_rows_check [--quick] [--runs N]
//
// Setup: DeepSeek-V3's routed experts, E = 256, I = 2048, H = 7168, top-8, in FP8 e4m3 (values drawn
// near a normal of sigma ~147, saturating at 448, as block-quantized weights look) with f32 scales per
// 128 x 128 block (2e-4 x [0.5, 1.5)); x ~ N(0, 1) in bf16; routing weights positive, summing to 2.5.
// Checks (exit 1 on any failure):
//   1. moe_experts with the FP8 products (fp8_mma_max_rows 32 as CudaOptions sets it, or 16 where named) against the old
//      kernels (fp8_mma_max_rows 0, gemv_max_rows 2 as CudaOptions sets it): NMSE <= 6e-3, the
//      conformance bound for FP8 experts (kBoundMoeFp8; expected ~1e-3 from the fp8 activations).
//   2. The FP8 path against a host float64 reference for up to 3 tokens computed from the same fp8
//      weights with the same activation quantization (x and h to e4m3 per 128 columns, amax / 448),
//      h rounded to bf16, y rounded to bf16, the combine in f32 slot order: NMSE <= 5e-4 (a mistake in
//      a fragment, a scale or a row costs >= 1e-2; summation order and rare bf16/fp8 rounding flips of
//      h cost ~1e-5).
//   3. The FP8 path run twice, and replayed from a CUDA graph: bitwise equal (deterministic, capturable).
//   4. The products called directly (fp8_rows_product, the plan built on the host) with 1 and 2 scale
//      blocks per pipeline stage and both weight load forms (Fp8RowsLoad kLanes, kWarpRows): bitwise
//      equal h and y (all against kLanes with 1 block/stage), and the rows of experts they do not serve
//      (more than max rows) left as they were.
// Cases: uniform routing at T = 1, 8, 64, 256; T = 1 with a repeated expert (3 rows); T = 64 with hot
// experts of 64, 32 and 20 rows (the old kernels take them; with fp8_mma_max_rows 32 the FP8 products
// take the 32- and 20-row ones, each as two 16-row chunks); T = 256 with out-of-range ids and repeated ids.
// Timing (skipped with --quick), for the uniform cases: CUDA events around one call, the L2 flushed
// before it (a memset of max(4 x L2, 256 MiB)), median of --runs (default 30) runs.
//   moe_experts, FP8 path and old path: the whole op (plan, quantization, both products, combine).
//   fp8_rows_product alone, gate_up and down, 1 and 2 scale blocks per stage, both load forms (inputs
//   prepared once).
// TB/s counts the weight and scale bytes of the experts touched (the experts each call computes);
// % is of a device-to-device cudaMemcpy measured here (1 GiB; read + written bytes over time).
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/moe_check_common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/moe.h"
#include "backend/cuda/moe_fp8_rows.h"
#include "core/dtype.h"
#include "core/error.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;
using fp8 = __nv_fp8_e4m3;

constexpr int64_t kExperts = 256, kInter = 2048, kHidden = 7168;
constexpr int kTopK = 8;
constexpr int64_t kBlock = 128;
constexpr double kBoundAgainstOld = 6e-3;        // conformance's kBoundMoeFp8
constexpr double kBoundAgainstReference = 5e-4;
constexpr int kReferenceTokens = 3;

// ---- the experts ----

// n16 16-byte units of e4m3: each value the sum of four random bytes minus 510 (sigma ~147), rounded
// to e4m3 with saturation at 448.
__global__ void fill_fp8_kernel(uint4* w, int64_t n16, uint64_t seed) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n16;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t words[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint32_t word = 0;
#pragma unroll
      for (int b = 0; b < 4; b += 2) {
        const uint64_t h = mix64(seed ^ static_cast<uint64_t>(i * 8 + q * 2 + b / 2) * 0x2545f4914f6cdd1dull);
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const uint32_t r = static_cast<uint32_t>(h >> (32 * half));
          const int v = static_cast<int>((r & 0xff) + ((r >> 8) & 0xff) + ((r >> 16) & 0xff) + (r >> 24)) - 510;
          const uint32_t byte = __nv_cvt_float_to_fp8(static_cast<float>(v), __NV_SATFINITE, __NV_E4M3);
          word |= byte << (8 * (b + half));
        }
      }
      words[q] = word;
    }
    w[i] = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

struct Experts {
  DeviceBuffer gate_up, down, gate_up_scale, down_scale;  // [E, 2I, H], [E, H, I] e4m3; scales f32
  std::vector<float> gate_up_scale_host, down_scale_host;  // [E, 2I/128, H/128], [E, H/128, I/128]
  int64_t bytes_per_expert = 0;                            // weights and scales of one expert
};

void make_experts(Experts& ex) {
  const int64_t gate_up_bytes = kExperts * 2 * kInter * kHidden, down_bytes = kExperts * kHidden * kInter;
  ex.gate_up = DeviceBuffer(gate_up_bytes);
  ex.down = DeviceBuffer(down_bytes);
  fill_fp8_kernel<<<8192, 256>>>(ex.gate_up.get<uint4>(), gate_up_bytes / 16, 1);
  DSINFER_CUDA_CHECK_LAUNCH();
  fill_fp8_kernel<<<8192, 256>>>(ex.down.get<uint4>(), down_bytes / 16, 2);
  DSINFER_CUDA_CHECK_LAUNCH();
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  ex.gate_up_scale_host.resize(kExperts * (2 * kInter / kBlock) * (kHidden / kBlock));
  ex.down_scale_host.resize(kExperts * (kHidden / kBlock) * (kInter / kBlock));
  for (float& s : ex.gate_up_scale_host) s = 2e-4f * (0.5f + unit(rng));
  for (float& s : ex.down_scale_host) s = 2e-4f * (0.5f + unit(rng));
  ex.gate_up_scale = DeviceBuffer(ex.gate_up_scale_host.size() * sizeof(float));
  ex.down_scale = DeviceBuffer(ex.down_scale_host.size() * sizeof(float));
  upload(ex.gate_up_scale, ex.gate_up_scale_host);
  upload(ex.down_scale, ex.down_scale_host);
  DSINFER_CUDA_CHECK(cudaDeviceSynchronize());
  ex.bytes_per_expert = 3 * kInter * kHidden +
                        static_cast<int64_t>((ex.gate_up_scale_host.size() + ex.down_scale_host.size()) / kExperts *
                                             sizeof(float));
}

// ---- a case: tokens, routing ----

struct Case {
  std::string name;
  int64_t tokens;
  RoutingKind routing;
  int fp8_max_rows;  // the FP8 path's fp8_mma_max_rows
  bool timed;
};

using Inputs = MoeInputs;

uint16_t bf16_bits(float v) { return f32_to_bf16(v); }
float bf16_value(uint16_t bits) { return bf16_to_f32(bits); }
float round_bf16(float v) { return bf16_value(bf16_bits(v)); }

void make_inputs(const Case& c, uint64_t seed, Inputs& in) {
  const int64_t T = c.tokens;
  in.tokens = T;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  in.x.resize(T * kHidden);
  for (uint16_t& v : in.x) v = bf16_bits(normal(rng));
  draw_routing(c.routing, T, kExperts, kTopK, rng, in.ids, in.weights);
  in.upload_all();
}

// Rows per expert of the valid ids.
std::vector<int32_t> expert_counts(const Inputs& in) { return cuda::expert_counts(in.ids, kExperts); }

// ---- the op ----

struct Device : CheckDevice {
  int64_t max_tokens = 0;
};

MoeShape shape_for(int64_t tokens, int fp8_max_rows) {
  MoeShape s;
  s.tokens = tokens;
  s.top_k = kTopK;
  s.num_experts = kExperts;
  s.inter = kInter;
  s.hidden = kHidden;
  s.gemv_max_rows = 2;  // CudaOptions::moe_gemv_max_rows
  s.fp8_mma_max_rows = fp8_max_rows;
  s.fp8_mma_min_rows = 2;  // CudaOptions::moe_fp8_mma_min_rows
  return s;
}

void run_moe(Device& d, const Experts& ex, const Inputs& in, int fp8_max_rows) {
  const MoeShape shape = shape_for(in.tokens, fp8_max_rows);
  const ExpertMatrix gate_up{ex.gate_up.get(), ex.gate_up_scale.get<float>(), WeightFormat::kFp8Block};
  const ExpertMatrix down{ex.down.get(), ex.down_scale.get<float>(), WeightFormat::kFp8Block};
  moe_experts(in.x_dev.get<bf16>(), in.ids_dev.get<int32_t>(), in.weights_dev.get<float>(), gate_up, down, shape,
              d.out.get<bf16>(), d.scratch.get(), d.scratch.bytes(), d.stream);
}

// ---- host reference (float64 sums, the device's roundings) ----

float fp8_value(uint8_t bits) { return fp8e4m3_to_f32(bits); }

// v [n] (bf16 values) -> q [n] e4m3 values as floats and scale [n / 128], as fp8_rows_quantize does.
void quantize_row(const std::vector<float>& v, std::vector<float>& q, std::vector<float>& scale) {
  const size_t groups = v.size() / kBlock;
  q.resize(v.size());
  scale.resize(groups);
  for (size_t g = 0; g < groups; ++g) {
    float amax = 0.0f;
    for (size_t i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(v[g * kBlock + i]));
    float s = amax / kFp8E4M3Max;
    if (!(s > 0.0f)) s = 1.0f;
    scale[g] = s;
    for (size_t i = 0; i < kBlock; ++i) {
      const float scaled = v[g * kBlock + i] / s;
      q[g * kBlock + i] = fp8_value(static_cast<uint8_t>(__nv_cvt_float_to_fp8(scaled, __NV_SATFINITE, __NV_E4M3)));
    }
  }
}

// sum over 128-column blocks b of (sum q[k] w[k]) * w_scale[b] * q_scale[b], float64.
double block_dot(const float* q, const float* q_scale, const uint8_t* w, const float* w_scale, int64_t K,
                 const float* table) {
  double total = 0.0;
  for (int64_t b = 0; b < K / kBlock; ++b) {
    double block = 0.0;
    for (int64_t i = b * kBlock; i < (b + 1) * kBlock; ++i) block += static_cast<double>(q[i]) * table[w[i]];
    total += block * w_scale[b] * q_scale[b];
  }
  return total;
}

// out[t] for token t, bf16 values: an expert for which fp8_served(e) holds with the FP8 path's
// semantics (activations quantized per 128 columns), any other with the GEMV's (bf16 activations).
std::vector<float> reference_token(const Experts& ex, const Inputs& in, int64_t t,
                                   const std::function<bool(int32_t)>& fp8_served) {
  float table[256];
  for (int i = 0; i < 256; ++i) table[i] = fp8_value(static_cast<uint8_t>(i));
  std::vector<float> x(kHidden), x_fp8, x_fp8_scale;
  for (int64_t i = 0; i < kHidden; ++i) x[i] = bf16_value(in.x[t * kHidden + i]);
  quantize_row(x, x_fp8, x_fp8_scale);
  const std::vector<float> x_ones(kHidden / kBlock, 1.0f);
  std::vector<float> acc(kHidden, 0.0f);
  std::vector<uint8_t> gate_up(2 * kInter * kHidden), down(kHidden * kInter);
  const int64_t gate_up_scale_cols = kHidden / kBlock, down_scale_cols = kInter / kBlock;
  for (int j = 0; j < kTopK; ++j) {
    const int32_t e = in.ids[t * kTopK + j];
    if (e < 0 || e >= kExperts) continue;
    DSINFER_CUDA_CHECK(cudaMemcpy(gate_up.data(), ex.gate_up.get<uint8_t>() + e * gate_up.size(), gate_up.size(),
                                  cudaMemcpyDeviceToHost));
    DSINFER_CUDA_CHECK(
        cudaMemcpy(down.data(), ex.down.get<uint8_t>() + e * down.size(), down.size(), cudaMemcpyDeviceToHost));
    const float* gs = ex.gate_up_scale_host.data() + e * (2 * kInter / kBlock) * gate_up_scale_cols;
    const float* ds = ex.down_scale_host.data() + e * (kHidden / kBlock) * down_scale_cols;
    const bool fp8 = fp8_served(e);
    const std::vector<float>& xq = fp8 ? x_fp8 : x;
    const std::vector<float>& xs = fp8 ? x_fp8_scale : x_ones;
    std::vector<float> h(kInter), hq, hs;
    for (int64_t i = 0; i < kInter; ++i) {
      const float gate = static_cast<float>(block_dot(xq.data(), xs.data(), gate_up.data() + i * kHidden,
                                                      gs + (i / kBlock) * gate_up_scale_cols, kHidden, table));
      const float up =
          static_cast<float>(block_dot(xq.data(), xs.data(), gate_up.data() + (kInter + i) * kHidden,
                                       gs + ((kInter + i) / kBlock) * gate_up_scale_cols, kHidden, table));
      h[i] = round_bf16(gate / (1.0f + std::exp(-gate)) * up);
    }
    if (fp8) {
      quantize_row(h, hq, hs);
    } else {
      hq = h;
      hs.assign(kInter / kBlock, 1.0f);
    }
    const float w = in.weights[t * kTopK + j];
    for (int64_t n = 0; n < kHidden; ++n) {
      const double y = block_dot(hq.data(), hs.data(), down.data() + n * kInter, ds + (n / kBlock) * down_scale_cols,
                                 kInter, table);
      acc[n] = std::fma(w, round_bf16(static_cast<float>(y)), acc[n]);  // y is stored as bf16
    }
  }
  for (float& v : acc) v = round_bf16(v);
  return acc;
}

// ---- comparisons ----

// sum (a - b)^2 / sum b^2 over `tokens` rows of [tokens, H] bf16 outputs.
double nmse(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, int64_t tokens) {
  return bf16_nmse(a, b, tokens * kHidden);
}

struct Failures {
  int count = 0;
  void check(bool ok, const std::string& what) {
    if (!ok) {
      ++count;
      std::printf("  FAIL: %s\n", what.c_str());
    }
  }
};

// ---- timing ----

void print_rate(const char* what, double us, int64_t bytes, double copy_tbps) {
  const double tbps = bytes / (us * 1e-6) / 1e12;
  std::printf("    %-54s %9.1f us  %7.1f MB  %5.2f TB/s  %5.1f%% of copy\n", what, us, bytes / 1e6, tbps,
              100.0 * tbps / copy_tbps);
}

// ---- the products called directly: 1 and 2 scale blocks per stage, both load forms, checked bitwise, then timed ----

struct ProductVariant {
  Fp8RowsLoad load;
  int stage_k_blocks;
};
// The first is the reference the others must equal bit for bit.
constexpr ProductVariant kProductVariants[] = {
    {Fp8RowsLoad::kLanes, 1}, {Fp8RowsLoad::kLanes, 2}, {Fp8RowsLoad::kWarpRows, 1}, {Fp8RowsLoad::kWarpRows, 2}};

std::string variant_tag(const ProductVariant& v) {
  return std::string(v.load == Fp8RowsLoad::kLanes ? "lanes" : "warp rows") + ", " + std::to_string(v.stage_k_blocks) +
         " block" + (v.stage_k_blocks > 1 ? "s" : "") + "/stage";
}

void products_direct(Device& d, const Experts& ex, const Inputs& in, int max_rows, int runs, bool timed,
                     Failures& failures) {
  const int64_t T = in.tokens, rows = T * kTopK;
  // The plan on the host: experts in order, each expert's rows in flat (token, slot) order, as plan_kernel.
  const std::vector<int32_t> counts = expert_counts(in);
  std::vector<int32_t> offsets(kExperts + 1, 0), row_source;
  for (int64_t e = 0; e < kExperts; ++e) offsets[e + 1] = offsets[e] + counts[e];
  std::vector<int32_t> next(offsets.begin(), offsets.end() - 1);
  row_source.assign(std::max<int64_t>(rows, 1), 0);
  for (int64_t i = 0; i < rows; ++i) {
    const int32_t e = in.ids[i];
    if (e >= 0 && e < kExperts) row_source[next[e]++] = static_cast<int32_t>(i);
  }
  DeviceBuffer offsets_dev(offsets.size() * sizeof(int32_t)), row_source_dev(row_source.size() * sizeof(int32_t));
  upload(offsets_dev, offsets);
  upload(row_source_dev, row_source);
  DeviceBuffer x_q(T * kHidden * sizeof(__half)), x_scale(T * (kHidden / kBlock) * sizeof(float));
  DeviceBuffer h(rows * kInter * sizeof(bf16)), h_q(rows * kInter * sizeof(__half));
  DeviceBuffer h_scale(rows * (kInter / kBlock) * sizeof(float));
  DeviceBuffer y(rows * kHidden * sizeof(bf16));

  Fp8RowsProduct gate_up;
  gate_up.gate_up = true;
  gate_up.weight = ex.gate_up.get<fp8>();
  gate_up.weight_scale = ex.gate_up_scale.get<float>();
  gate_up.act = x_q.get<__half>();
  gate_up.act_scale = x_scale.get<float>();
  gate_up.offsets = offsets_dev.get<int32_t>();
  gate_up.row_source = row_source_dev.get<int32_t>();
  gate_up.top_k = kTopK;
  gate_up.num_experts = kExperts;
  gate_up.inter = kInter;
  gate_up.hidden = kHidden;
  gate_up.max_rows = max_rows;
  gate_up.row_bound = rows;
  gate_up.out = h.get<bf16>();
  Fp8RowsProduct down = gate_up;
  down.gate_up = false;
  down.weight = ex.down.get<fp8>();
  down.weight_scale = ex.down_scale.get<float>();
  down.act = h_q.get<__half>();
  down.act_scale = h_scale.get<float>();
  down.row_source = nullptr;
  down.out = y.get<bf16>();

  std::vector<uint16_t> h_first, y_first;
  bool first_variant = true;
  for (const ProductVariant& v : kProductVariants) {
    gate_up.stage_k_blocks = down.stage_k_blocks = v.stage_k_blocks;
    gate_up.load = down.load = v.load;
    DSINFER_CUDA_CHECK(cudaMemsetAsync(h.get(), 0, h.bytes(), d.stream));
    DSINFER_CUDA_CHECK(cudaMemsetAsync(y.get(), 0, y.bytes(), d.stream));
    fp8_rows_quantize(in.x_dev.get<bf16>(), T, kHidden, nullptr, 0, 0, 0, x_q.get<__half>(), x_scale.get<float>(),
                      d.stream);
    fp8_rows_product(gate_up, d.stream);
    fp8_rows_quantize(h.get<bf16>(), rows, kInter, offsets_dev.get<int32_t>(), kExperts, 1, max_rows,
                      h_q.get<__half>(), h_scale.get<float>(), d.stream);
    fp8_rows_product(down, d.stream);
    DSINFER_CUDA_CHECK(cudaStreamSynchronize(d.stream));
    std::vector<uint16_t> h_host = download<uint16_t>(h.get(), rows * kInter);
    std::vector<uint16_t> y_host = download<uint16_t>(y.get(), rows * kHidden);
    if (first_variant) {
      first_variant = false;
      // Rows of experts the products do not serve (and rows past the plan's) keep their zeros.
      bool untouched = true;
      for (int64_t e = 0; e <= kExperts; ++e) {
        const int64_t begin = offsets[std::min<int64_t>(e, kExperts)];
        const int64_t end = e < kExperts ? offsets[e + 1] : rows;
        if (e < kExperts && counts[e] <= max_rows) continue;
        for (int64_t r = begin; r < end; ++r) {
          for (int64_t i = 0; i < kInter; ++i) untouched &= h_host[r * kInter + i] == 0;
          for (int64_t i = 0; i < kHidden; ++i) untouched &= y_host[r * kHidden + i] == 0;
        }
      }
      failures.check(untouched, "fp8_rows_product wrote rows of experts it does not serve");
      h_first = std::move(h_host);
      y_first = std::move(y_host);
    } else {
      failures.check(h_host == h_first && y_host == y_first,
                     "fp8_rows_product: " + variant_tag(v) + " gives other bits than " +
                         variant_tag(kProductVariants[0]));
    }
  }
  if (!timed) return;

  int64_t served = 0;
  for (int32_t n : counts) served += n >= 1 && n <= max_rows;
  const int64_t gate_up_bytes = served * (2 * kInter * kHidden + (2 * kInter / kBlock) * (kHidden / kBlock) * 4);
  const int64_t down_bytes = served * (kHidden * kInter + (kHidden / kBlock) * (kInter / kBlock) * 4);
  for (const ProductVariant& v : kProductVariants) {
    gate_up.stage_k_blocks = down.stage_k_blocks = v.stage_k_blocks;
    gate_up.load = down.load = v.load;
    const std::string tag = variant_tag(v);
    const double gate_up_us = time_us(d, runs, [&] { fp8_rows_product(gate_up, d.stream); });
    print_rate(("fp8_rows_product gate_up, " + tag).c_str(), gate_up_us, gate_up_bytes, d.copy_tbps);
    const double down_us = time_us(d, runs, [&] { fp8_rows_product(down, d.stream); });
    print_rate(("fp8_rows_product down, " + tag).c_str(), down_us, down_bytes, d.copy_tbps);
    print_rate(("fp8_rows_product both, " + tag).c_str(), gate_up_us + down_us, gate_up_bytes + down_bytes,
               d.copy_tbps);
  }
}

// ---- one case ----

void run_case(Device& d, const Experts& ex, const Case& c, uint64_t seed, bool quick, int runs, Failures& failures) {
  Inputs in;
  make_inputs(c, seed, in);
  const std::vector<int32_t> counts = expert_counts(in);
  int touched = 0, served = 0, most = 0;
  for (int32_t n : counts) {
    touched += n > 0;
    served += n >= 1 && n <= c.fp8_max_rows;
    most = std::max(most, n);
  }
  std::printf("%s: T = %lld, %d experts touched (%d with 1..%d rows), at most %d rows per expert\n", c.name.c_str(),
              static_cast<long long>(c.tokens), touched, served, c.fp8_max_rows, most);

  const int64_t count = in.tokens * kHidden;
  const std::vector<uint16_t> old_path = bf16_output(d, count, [&] { run_moe(d, ex, in, 0); });
  const std::vector<uint16_t> fp8_path = bf16_output(d, count, [&] { run_moe(d, ex, in, c.fp8_max_rows); });
  const std::vector<uint16_t> fp8_again = bf16_output(d, count, [&] { run_moe(d, ex, in, c.fp8_max_rows); });
  const std::vector<uint16_t> fp8_graph = bf16_output(d, count, [&] { run_moe(d, ex, in, c.fp8_max_rows); }, true);
  failures.check(bf16_all_finite(old_path) && bf16_all_finite(fp8_path), c.name + ": non-finite output");
  const double against_old = nmse(fp8_path, old_path, c.tokens);
  std::printf("  NMSE FP8 path vs old kernels: %.3e (bound %.0e)\n", against_old, kBoundAgainstOld);
  failures.check(against_old <= kBoundAgainstOld, c.name + ": FP8 path vs old kernels");
  failures.check(fp8_again == fp8_path, c.name + ": two runs of the FP8 path differ");
  failures.check(fp8_graph == fp8_path, c.name + ": the graph replay differs from the eager run");

  // Host reference: the first, middle and last tokens.
  std::vector<int64_t> tokens = {0, c.tokens / 2, c.tokens - 1};
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  if (static_cast<int>(tokens.size()) > kReferenceTokens) tokens.resize(kReferenceTokens);
  std::vector<uint16_t> ref_rows, fp8_rows_sel, old_rows_sel;
  for (int64_t t : tokens) {
    // The FP8 products take the experts of 2 rows (shape_for's fp8_mma_min_rows) up to the case's
    // limit, in steps of at least 2 tokens; the others keep bf16 activations.
    auto fp8_served = [&](int32_t e) { return c.tokens >= 2 && counts[e] >= 2 && counts[e] <= c.fp8_max_rows; };
    for (float v : reference_token(ex, in, t, fp8_served)) ref_rows.push_back(bf16_bits(v));
    fp8_rows_sel.insert(fp8_rows_sel.end(), fp8_path.begin() + t * kHidden, fp8_path.begin() + (t + 1) * kHidden);
    old_rows_sel.insert(old_rows_sel.end(), old_path.begin() + t * kHidden, old_path.begin() + (t + 1) * kHidden);
  }
  const int64_t n_ref = static_cast<int64_t>(tokens.size());
  const double against_ref = nmse(fp8_rows_sel, ref_rows, n_ref);
  std::printf("  NMSE FP8 path vs host reference (%lld tokens): %.3e (bound %.0e); old kernels vs it: %.3e\n",
              static_cast<long long>(n_ref), against_ref, kBoundAgainstReference, nmse(old_rows_sel, ref_rows, n_ref));
  failures.check(against_ref <= kBoundAgainstReference, c.name + ": FP8 path vs host reference");

  products_direct(d, ex, in, c.fp8_max_rows, runs, c.timed && !quick, failures);
  if (!c.timed || quick) return;
  const int64_t bytes = touched * ex.bytes_per_expert;
  print_rate(("moe_experts, FP8 path (max rows " + std::to_string(c.fp8_max_rows) + ")").c_str(),
             time_us(d, runs, [&] { run_moe(d, ex, in, c.fp8_max_rows); }), bytes, d.copy_tbps);
  print_rate("moe_experts, old kernels", time_us(d, runs, [&] { run_moe(d, ex, in, 0); }), bytes, d.copy_tbps);
}

int run(int argc, char** argv) {
  bool quick = false;
  int runs = 30;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--runs N]\n", argv[0]);
      return 2;
    }
  }
  Device d;
  d.open();

  const std::vector<Case> cases = {
      {"uniform T=1", 1, RoutingKind::kUniform, 32, true},
      {"uniform T=8", 8, RoutingKind::kUniform, 32, true},
      {"uniform T=64", 64, RoutingKind::kUniform, 32, true},
      {"uniform T=256", 256, RoutingKind::kUniform, 32, true},
      {"repeated expert T=1", 1, RoutingKind::kRepeated, 16, false},
      {"hot experts T=64, max rows 16", 64, RoutingKind::kHot, 16, false},
      {"hot experts T=64, max rows 32", 64, RoutingKind::kHot, 32, true},
      {"out-of-range and repeated ids T=256", 256, RoutingKind::kInvalid, 16, false},
  };
  for (const Case& c : cases) d.max_tokens = std::max(d.max_tokens, c.tokens);
  size_t scratch_bytes = 0;
  for (int max_rows : {0, 16, 32})
    scratch_bytes = std::max(scratch_bytes, moe_experts_scratch_bytes(shape_for(d.max_tokens, max_rows)));
  d.scratch = DeviceBuffer(scratch_bytes);
  d.out = DeviceBuffer(d.max_tokens * kHidden * sizeof(bf16));

  Experts ex;
  make_experts(ex);
  std::printf("experts: E = %lld, I = %lld, H = %lld, FP8 with 128 x 128 scales, %.1f MB each\n",
              static_cast<long long>(kExperts), static_cast<long long>(kInter), static_cast<long long>(kHidden),
              ex.bytes_per_expert / 1e6);
  if (!quick) {
    d.copy_tbps = measure_copy_tbps(d, runs);
    std::printf("device-to-device copy: %.2f TB/s\n", d.copy_tbps);
  } else {
    d.copy_tbps = 1.0;
  }

  Failures failures;
  uint64_t seed = 100;
  for (const Case& c : cases) run_case(d, ex, c, seed++, quick, runs, failures);
  DSINFER_CUDA_CHECK(cudaStreamDestroy(d.stream));
  if (failures.count > 0) {
    std::printf("%d check(s) FAILED\n", failures.count);
    return 1;
  }
  std::printf("all checks passed\n");
  return 0;
}

}  // namespace
}  // namespace dsinfer::backend::cuda

int main(int argc, char** argv) {
  try {
    return dsinfer::backend::cuda::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moe_fp8_rows_check: %s\n", e.what());
    return 1;
  }
}
