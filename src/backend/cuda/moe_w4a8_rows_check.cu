// moe_w4a8_rows_check: are the W4A8 routed-expert products (moe_w4a8_rows.h) right inside moe_experts
// (moe.h), and how fast are they beside the FP8 products (moe_fp8_rows.h) at the same shapes? A
// standalone GPU program, not a ctest test: it needs a GPU and ~24 GB of its memory.
//
//   build/src/backend/cuda/moe_w4a8_rows_check [--quick] [--runs N] [--require-bar]
//
// Setup: DeepSeek-V3's routed experts, E = 256, I = 2048, H = 7168, top-8, once in int4 (uniform codes,
// two a byte: docs/w4a8.md) with f32 scales per group of 128 and, over the same codes, per group of 32
// (2e-2 / 4.6 x [0.5, 1.5): weights of std ~0.02), with static input scales per expert for the cases that
// use them, and once in FP8 e4m3 with 128 x 128 block scales (random codes; for the timings). x ~ N(0, 1)
// times 2^u per token (u in [-2, 2]: per-row e4m3 scales 16x apart) in bf16; routing weights positive,
// summing to 2.5.
// Checks, for group sizes 128 and 32, with per-row (amax / 448) and with static activation scales (exit
// status 1 on any failure, each printed as a FAIL line):
//   1. moe_experts with the tensor-core kernel against moe_experts with the reference kernel
//      (MoeShape::w4a8_reference): NMSE <= 2e-5. Both quantize alike (one kernel); they differ by the
//      order of the f32 sums, which moves an h value across a bf16 rounding boundary now and then
//      (~1e-9 expected); a wrong fragment, nibble, group or row scale costs >= 1e-2.
//   2. The tensor-core path against a host float64 reference for up to 3 tokens, computed from the same
//      int4 codes and scales with the CPU backend's definition (x and h to e4m3 per row, amax / 448, or
//      the expert's static scale; sums per group times the group's scale), h and y rounded to bf16 as the
//      device rounds them, the combine in f32 slot order: NMSE <= 1e-4.
//   3. The tensor-core path run twice, and replayed from a CUDA graph: bitwise equal (deterministic,
//      capturable).
//   4. The products called directly (w4a8_rows_product, the plan built on the host) with 16- and 32-row
//      work items: bitwise equal h and y.
// Cases: uniform routing at T = 1, 8, 64, 256; T = 1 with a repeated expert (3 rows); T = 64 with hot
// experts of 64, 32 and 20 rows; T = 256 with out-of-range and repeated ids; and balanced routing at
// 64 rows for every expert (T = 2048: each expert cut into several work items).
// Timing (skipped with --quick): balanced routing with exactly r rows for every expert (T = 32 r,
// all 256 experts), r = 1, 2, 4, 8, 16, 32, 64, and uniform routing at T = 1 (8 experts of one row).
// CUDA events around one call, the L2 flushed before it (a memset of max(4 x L2, 256 MiB)), median of
// --runs (default 30, at least 10) runs:
//   the products alone (inputs quantized once beforehand): W4A8 gate_up and down (group 128 and 32,
//   16- and 32-row items) beside fp8_rows_product's gate_up and down (1..32 rows, two 128-column
//   blocks a stage, warp-row loads: what moe_experts runs);
//   moe_experts whole (plan, quantization, both products, combine): W4A8 (group 128 and 32) and FP8
//   (CudaOptions' defaults: the one-row GEMV, the FP8 rows kernel to 32 rows, the 64-row tile beyond).
// Issue 9's bar: the W4A8 products at least 1.4x as fast as the FP8 ones at up to 64 rows per expert.
// BAR lines compare the products alone where the FP8 rows kernel serves the rows (r <= 32) and the
// whole op where it does not (r = 64: the FP8 experts take the 64-row tile; T = 1: the GEMV); with
// --require-bar a BAR below 1.4x also makes the exit status 1.
// TB/s counts the weight and scale bytes of the experts touched; % is of a device-to-device cudaMemcpy
// measured here (1 GiB; read + written bytes over time).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
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
#include "backend/cuda/moe_w4a8_rows.h"
#include "core/dtype.h"
#include "core/error.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;
using fp8 = __nv_fp8_e4m3;

constexpr int64_t kExperts = 256, kInter = 2048, kHidden = 7168;
constexpr int kTopK = 8;
constexpr int64_t kBlock = 128;
constexpr int64_t kGroupSizes[] = {128, 32};
constexpr float kWeightStd = 0.02f, kCodeStd = 4.6f;  // uniform codes -8..7: std 4.6
constexpr double kBoundAgainstReferenceKernel = 2e-5;
constexpr double kBoundAgainstHost = 1e-4;
constexpr double kBar = 1.4;
constexpr int kReferenceTokens = 3;

// ---- the experts ----

// n16 16-byte units of random bytes: int4 codes as they are (any byte is two valid codes), or e4m3 codes
// with the two NaN codes (0x7f, 0xff) moved one step down.
__global__ void fill_bytes_kernel(uint4* out, int64_t n16, uint64_t seed, bool fp8_codes) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n16;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t a = mix64(seed ^ (2 * i)), b = mix64(seed ^ (2 * i + 1));
    uint32_t words[4] = {static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32), static_cast<uint32_t>(b),
                         static_cast<uint32_t>(b >> 32)};
    if (fp8_codes) {
#pragma unroll
      for (int w = 0; w < 4; ++w)
#pragma unroll
        for (int byte = 0; byte < 4; ++byte)
          if (((words[w] >> (8 * byte)) & 0x7f) == 0x7f) words[w] ^= 1u << (8 * byte);
    }
    out[i] = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

// n floats uniform in [low, high).
__global__ void fill_uniform_kernel(float* out, int64_t n, uint64_t seed, float low, float high) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float u = static_cast<float>(mix64(seed ^ i) >> 40) * 0x1p-24f;
    out[i] = low + (high - low) * u;
  }
}

void fill_bytes(DeviceBuffer& buffer, uint64_t seed, bool fp8_codes) {
  fill_bytes_kernel<<<8192, 256>>>(buffer.get<uint4>(), static_cast<int64_t>(buffer.bytes() / 16), seed, fp8_codes);
  DSINFER_CUDA_CHECK_LAUNCH();
}

void fill_uniform(DeviceBuffer& buffer, uint64_t seed, float low, float high) {
  fill_uniform_kernel<<<8192, 256>>>(buffer.get<float>(), static_cast<int64_t>(buffer.bytes() / sizeof(float)), seed,
                                     low, high);
  DSINFER_CUDA_CHECK_LAUNCH();
}

struct Experts {
  // W4A8: the codes once, scales per group size (kGroupSizes order), static input scales per expert.
  DeviceBuffer gate_up, down;  // [E, 2I, H / 2], [E, H, I / 2] bytes
  DeviceBuffer gate_up_scale[2], down_scale[2];  // [E, 2I, H / G], [E, H, I / G] f32
  DeviceBuffer gate_up_input, down_input;        // [E] f32
  std::vector<float> gate_up_input_host, down_input_host;
  // FP8 (timing only): [E, 2I, H], [E, H, I] e4m3 with [E, 2I / 128, H / 128], [E, H / 128, I / 128] f32.
  DeviceBuffer fp8_gate_up, fp8_down, fp8_gate_up_scale, fp8_down_scale;
};

int64_t w4a8_bytes_per_expert(int64_t group) {
  return 3 * kInter * kHidden / 2 + (2 * kInter * (kHidden / group) + kHidden * (kInter / group)) * 4;
}
int64_t fp8_bytes_per_expert() {
  return 3 * kInter * kHidden + (2 * kInter / kBlock * (kHidden / kBlock) + kHidden / kBlock * (kInter / kBlock)) * 4;
}

void make_experts(Experts& ex) {
  ex.gate_up = DeviceBuffer(kExperts * 2 * kInter * kHidden / 2);
  ex.down = DeviceBuffer(kExperts * kHidden * kInter / 2);
  fill_bytes(ex.gate_up, 1, false);
  fill_bytes(ex.down, 2, false);
  const float low = kWeightStd / kCodeStd * 0.5f, high = kWeightStd / kCodeStd * 1.5f;
  for (int i = 0; i < 2; ++i) {
    const int64_t group = kGroupSizes[i];
    ex.gate_up_scale[i] = DeviceBuffer(kExperts * 2 * kInter * (kHidden / group) * sizeof(float));
    ex.down_scale[i] = DeviceBuffer(kExperts * kHidden * (kInter / group) * sizeof(float));
    fill_uniform(ex.gate_up_scale[i], 3 + 2 * i, low, high);
    fill_uniform(ex.down_scale[i], 4 + 2 * i, low, high);
  }
  // Static input scales: x (token scale 1) reaches ~4.5, h ~40; [0.5, 1.5) of that over 448, so that some
  // experts' inputs saturate and some leave codes unused.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> unit(0.5f, 1.5f);
  ex.gate_up_input_host.resize(kExperts);
  ex.down_input_host.resize(kExperts);
  for (float& s : ex.gate_up_input_host) s = 4.0f / kFp8E4M3Max * unit(rng);
  for (float& s : ex.down_input_host) s = 32.0f / kFp8E4M3Max * unit(rng);
  ex.gate_up_input = DeviceBuffer(kExperts * sizeof(float));
  ex.down_input = DeviceBuffer(kExperts * sizeof(float));
  upload(ex.gate_up_input, ex.gate_up_input_host);
  upload(ex.down_input, ex.down_input_host);

  ex.fp8_gate_up = DeviceBuffer(kExperts * 2 * kInter * kHidden);
  ex.fp8_down = DeviceBuffer(kExperts * kHidden * kInter);
  fill_bytes(ex.fp8_gate_up, 11, true);
  fill_bytes(ex.fp8_down, 12, true);
  ex.fp8_gate_up_scale = DeviceBuffer(kExperts * (2 * kInter / kBlock) * (kHidden / kBlock) * sizeof(float));
  ex.fp8_down_scale = DeviceBuffer(kExperts * (kHidden / kBlock) * (kInter / kBlock) * sizeof(float));
  fill_uniform(ex.fp8_gate_up_scale, 13, 1e-5f, 3e-5f);
  fill_uniform(ex.fp8_down_scale, 14, 1e-5f, 3e-5f);
  DSINFER_CUDA_CHECK(cudaDeviceSynchronize());
}

// ---- a case: tokens, routing ----

struct Case {
  std::string name;
  int64_t tokens;
  RoutingKind routing;
};

using Inputs = MoeInputs;

float bf16_value(uint16_t bits) { return bf16_to_f32(bits); }
float round_bf16(float v) { return bf16_value(f32_to_bf16(v)); }

void make_inputs(const Case& c, uint64_t seed, Inputs& in) {
  const int64_t T = c.tokens;
  in.tokens = T;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  in.x.resize(T * kHidden);
  for (int64_t t = 0; t < T; ++t) {
    const float scale = std::exp2(4.0f * unit(rng) - 2.0f);
    for (int64_t i = 0; i < kHidden; ++i) in.x[t * kHidden + i] = f32_to_bf16(scale * normal(rng));
  }
  draw_routing(c.routing, T, kExperts, kTopK, rng, in.ids, in.weights);
  in.upload_all();
}

// Rows per expert of the valid ids.
std::vector<int32_t> expert_counts(const Inputs& in) { return cuda::expert_counts(in.ids, kExperts); }

// ---- the op ----

using Device = CheckDevice;

// Which W4A8 experts a run uses: group size (index into kGroupSizes) and static input scales.
struct Flavour {
  int group_index = 0;
  bool static_scales = false;
  std::string describe() const {
    return "group " + std::to_string(kGroupSizes[group_index]) + (static_scales ? ", static scales" : ", per-row scales");
  }
};

// The V3 layer's experts at `tokens` tokens, kernels not yet chosen.
MoeShape v3_shape(int64_t tokens) {
  MoeShape s;
  s.tokens = tokens;
  s.top_k = kTopK;
  s.num_experts = kExperts;
  s.inter = kInter;
  s.hidden = kHidden;
  return s;
}

MoeShape w4a8_shape(int64_t tokens, bool static_scales, bool reference) {
  MoeShape s = v3_shape(tokens);
  s.gemv_max_rows = 2;      // CudaOptions::moe_gemv_max_rows (unused by W4A8 products)
  s.fp8_mma_max_rows = 0;   // as CudaOps sets it for experts without FP8 products
  s.w4a8_gate_up = s.w4a8_down = true;
  s.w4a8_gate_up_per_row = static_scales;
  s.w4a8_reference = reference;
  return s;
}

MoeShape fp8_shape(int64_t tokens) {  // CudaOptions' defaults
  MoeShape s = v3_shape(tokens);
  s.gemv_max_rows = 2;
  s.fp8_mma_max_rows = 32;
  s.fp8_mma_min_rows = 2;
  return s;
}

ExpertMatrix w4a8_matrix(const Experts& ex, bool gate_up, const Flavour& f) {
  ExpertMatrix m;
  m.data = gate_up ? ex.gate_up.get() : ex.down.get();
  m.scale = (gate_up ? ex.gate_up_scale : ex.down_scale)[f.group_index].get<float>();
  m.format = WeightFormat::kW4A8;
  m.group_size = kGroupSizes[f.group_index];
  m.input_scale = f.static_scales ? (gate_up ? ex.gate_up_input : ex.down_input).get<float>() : nullptr;
  return m;
}

void run_w4a8(Device& d, const Experts& ex, const Inputs& in, const Flavour& f, bool reference) {
  moe_experts(in.x_dev.get<bf16>(), in.ids_dev.get<int32_t>(), in.weights_dev.get<float>(), w4a8_matrix(ex, true, f),
              w4a8_matrix(ex, false, f), w4a8_shape(in.tokens, f.static_scales, reference), d.out.get<bf16>(),
              d.scratch.get(), d.scratch.bytes(), d.stream);
}

void run_fp8(Device& d, const Experts& ex, const Inputs& in) {
  const ExpertMatrix gate_up{ex.fp8_gate_up.get(), ex.fp8_gate_up_scale.get<float>(), WeightFormat::kFp8Block};
  const ExpertMatrix down{ex.fp8_down.get(), ex.fp8_down_scale.get<float>(), WeightFormat::kFp8Block};
  moe_experts(in.x_dev.get<bf16>(), in.ids_dev.get<int32_t>(), in.weights_dev.get<float>(), gate_up, down,
              fp8_shape(in.tokens), d.out.get<bf16>(), d.scratch.get(), d.scratch.bytes(), d.stream);
}

// ---- host reference (float64 sums, the device's roundings) ----

// v -> e4m3 values (as floats) with scale a: `fixed` when positive, else amax(|v|) / 448 (1 for zeros).
std::vector<float> quantize_row(const std::vector<float>& v, float fixed, float* scale) {
  float a = fixed;
  if (!(fixed > 0.0f)) {
    float amax = 0.0f;
    for (float value : v) amax = std::max(amax, std::fabs(value));
    a = amax / kFp8E4M3Max;
    if (!(a > 0.0f)) a = 1.0f;
  }
  std::vector<float> q(v.size());
  for (size_t i = 0; i < v.size(); ++i) q[i] = fp8e4m3_to_f32(f32_to_fp8e4m3(v[i] / a));
  *scale = a;
  return q;
}

// One expert's matrix on the host: codes [N, K / 2] and scales [N, K / G].
struct HostMatrix {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  int64_t n = 0, k = 0, group = 0;
  // sum over groups of (sum of q[row, k] * v[k] in the group) * scale[row, group], float64
  double dot(int64_t row, const std::vector<float>& v) const {
    const uint8_t* bytes = codes.data() + row * (k / 2);
    const float* s = scales.data() + row * (k / group);
    double total = 0.0;
    for (int64_t g = 0; g < k / group; ++g) {
      double part = 0.0;
      for (int64_t c = g * group; c < (g + 1) * group; ++c)
        part += static_cast<double>(((bytes[c / 2] >> (4 * (c % 2))) & 0xf) - 8) * v[c];
      total += part * s[g];
    }
    return total;
  }
};

HostMatrix download_expert(const DeviceBuffer& codes, const DeviceBuffer& scales, int64_t expert, int64_t n, int64_t k,
                           int64_t group) {
  HostMatrix m;
  m.n = n, m.k = k, m.group = group;
  m.codes.resize(n * k / 2);
  m.scales.resize(n * (k / group));
  DSINFER_CUDA_CHECK(cudaMemcpy(m.codes.data(), codes.get<uint8_t>() + expert * n * k / 2, m.codes.size(),
                                cudaMemcpyDeviceToHost));
  DSINFER_CUDA_CHECK(cudaMemcpy(m.scales.data(), scales.get<float>() + expert * n * (k / group),
                                m.scales.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return m;
}

// out[t] (bf16 values) by the definition, with the device's roundings.
std::vector<float> reference_token(const Experts& ex, const Inputs& in, int64_t t, const Flavour& f) {
  const int64_t group = kGroupSizes[f.group_index];
  std::vector<float> x(kHidden);
  for (int64_t i = 0; i < kHidden; ++i) x[i] = bf16_value(in.x[t * kHidden + i]);
  std::vector<float> acc(kHidden, 0.0f);
  for (int j = 0; j < kTopK; ++j) {
    const int32_t e = in.ids[t * kTopK + j];
    if (e < 0 || e >= kExperts) continue;
    const HostMatrix gate_up = download_expert(ex.gate_up, ex.gate_up_scale[f.group_index], e, 2 * kInter, kHidden, group);
    const HostMatrix down = download_expert(ex.down, ex.down_scale[f.group_index], e, kHidden, kInter, group);
    float a_x, a_h;
    const std::vector<float> xq = quantize_row(x, f.static_scales ? ex.gate_up_input_host[e] : 0.0f, &a_x);
    std::vector<float> h(kInter);
    for (int64_t i = 0; i < kInter; ++i) {
      const float g = static_cast<float>(gate_up.dot(i, xq) * a_x);
      const float u = static_cast<float>(gate_up.dot(kInter + i, xq) * a_x);
      h[i] = round_bf16(g / (1.0f + std::exp(-g)) * u);  // h is stored as bf16
    }
    const std::vector<float> hq = quantize_row(h, f.static_scales ? ex.down_input_host[e] : 0.0f, &a_h);
    const float weight = in.weights[t * kTopK + j];
    for (int64_t n = 0; n < kHidden; ++n)
      acc[n] = std::fma(weight, round_bf16(static_cast<float>(down.dot(n, hq) * a_h)), acc[n]);  // y is bf16
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
  int bar_misses = 0;
  void check(bool ok, const std::string& what) {
    std::printf("  %s: %s\n", ok ? "PASS" : "FAIL", what.c_str());
    if (!ok) ++count;
  }
};

// ---- timing ----

void print_rate(const std::string& what, double us, int64_t bytes, double copy_tbps) {
  const double tbps = bytes / (us * 1e-6) / 1e12;
  std::printf("    %-62s %9.1f us  %8.1f MB  %5.2f TB/s  %5.1f%% of copy\n", what.c_str(), us, bytes / 1e6, tbps,
              100.0 * tbps / copy_tbps);
}

void print_bar(Failures& failures, const std::string& what, double fp8_us, double w4a8_us) {
  const double speedup = fp8_us / w4a8_us;
  const bool ok = speedup >= kBar;
  std::printf("  BAR %s: %s FP8 %.1f us, W4A8 %.1f us: %.2fx (bar %.1fx)\n", ok ? "PASS" : "FAIL", what.c_str(), fp8_us,
              w4a8_us, speedup, kBar);
  if (!ok) ++failures.bar_misses;
}

// ---- the products called directly ----

// The plan on the host: experts in order, each expert's rows in flat (token, slot) order, as plan_kernel.
struct HostPlan {
  std::vector<int32_t> counts, offsets, row_source;
  int64_t rows = 0;  // T * k
  DeviceBuffer offsets_dev, row_source_dev;
};

void make_plan(const Inputs& in, HostPlan& plan) {
  plan.rows = in.tokens * kTopK;
  plan.counts = expert_counts(in);
  plan.offsets.assign(kExperts + 1, 0);
  for (int64_t e = 0; e < kExperts; ++e) plan.offsets[e + 1] = plan.offsets[e] + plan.counts[e];
  std::vector<int32_t> next(plan.offsets.begin(), plan.offsets.end() - 1);
  plan.row_source.assign(std::max<int64_t>(plan.rows, 1), 0);
  for (int64_t i = 0; i < plan.rows; ++i) {
    const int32_t e = in.ids[i];
    if (e >= 0 && e < kExperts) plan.row_source[next[e]++] = static_cast<int32_t>(i);
  }
  plan.offsets_dev = DeviceBuffer(plan.offsets.size() * sizeof(int32_t));
  plan.row_source_dev = DeviceBuffer(plan.row_source.size() * sizeof(int32_t));
  upload(plan.offsets_dev, plan.offsets);
  upload(plan.row_source_dev, plan.row_source);
}

// The W4A8 products of one flavour, their inputs quantized, ready to run again and again.
struct W4a8Direct {
  W4a8RowsProduct gate_up, down;
  DeviceBuffer x_q, x_scale, h, h_q, h_scale, y;
};

void prepare_w4a8(Device& d, const Experts& ex, const Inputs& in, const HostPlan& plan, const Flavour& f,
                  W4a8Direct& w) {
  const int64_t T = in.tokens, rows = plan.rows;
  const int64_t x_rows = f.static_scales ? rows : T;
  w.x_q = DeviceBuffer(x_rows * kHidden * sizeof(__half));
  w.x_scale = DeviceBuffer(x_rows * sizeof(float));
  w.h = DeviceBuffer(rows * kInter * sizeof(bf16));
  w.h_q = DeviceBuffer(rows * kInter * sizeof(__half));
  w.h_scale = DeviceBuffer(rows * sizeof(float));
  w.y = DeviceBuffer(rows * kHidden * sizeof(bf16));
  W4a8Quantize qx;
  qx.x = in.x_dev.get<bf16>();
  qx.width = kHidden;
  qx.rows = x_rows;
  if (f.static_scales) {
    qx.row_source = plan.row_source_dev.get<int32_t>();
    qx.top_k = kTopK;
    qx.offsets = plan.offsets_dev.get<int32_t>();
    qx.num_experts = kExperts;
    qx.input_scale = ex.gate_up_input.get<float>();
  }
  qx.q = w.x_q.get<__half>();
  qx.scale = w.x_scale.get<float>();
  w4a8_quantize(qx, d.stream);

  const ExpertMatrix gate_up = w4a8_matrix(ex, true, f), down = w4a8_matrix(ex, false, f);
  w.gate_up.gate_up = true;
  w.gate_up.weight = static_cast<const uint8_t*>(gate_up.data);
  w.gate_up.weight_scale = gate_up.scale;
  w.gate_up.group_size = gate_up.group_size;
  w.gate_up.act = w.x_q.get<__half>();
  w.gate_up.act_scale = w.x_scale.get<float>();
  w.gate_up.act_per_token = !f.static_scales;
  w.gate_up.offsets = plan.offsets_dev.get<int32_t>();
  w.gate_up.row_source = plan.row_source_dev.get<int32_t>();
  w.gate_up.top_k = kTopK;
  w.gate_up.num_experts = kExperts;
  w.gate_up.inter = kInter;
  w.gate_up.hidden = kHidden;
  w.gate_up.row_bound = rows;
  w.gate_up.out = w.h.get<bf16>();
  w4a8_rows_product(w.gate_up, d.stream);

  W4a8Quantize qh;
  qh.x = w.h.get<bf16>();
  qh.width = kInter;
  qh.rows = rows;
  qh.offsets = plan.offsets_dev.get<int32_t>();
  qh.num_experts = kExperts;
  qh.input_scale = f.static_scales ? ex.down_input.get<float>() : nullptr;
  qh.q = w.h_q.get<__half>();
  qh.scale = w.h_scale.get<float>();
  w4a8_quantize(qh, d.stream);

  w.down = w.gate_up;
  w.down.gate_up = false;
  w.down.weight = static_cast<const uint8_t*>(down.data);
  w.down.weight_scale = down.scale;
  w.down.group_size = down.group_size;
  w.down.act = w.h_q.get<__half>();
  w.down.act_scale = w.h_scale.get<float>();
  w.down.act_per_token = false;
  w.down.out = w.y.get<bf16>();
  w4a8_rows_product(w.down, d.stream);
  DSINFER_CUDA_CHECK(cudaStreamSynchronize(d.stream));
}

// h and y of the products with `chunk_rows`-row work items, from the prepared inputs.
std::pair<std::vector<uint16_t>, std::vector<uint16_t>> run_direct(Device& d, W4a8Direct& w, int64_t rows,
                                                                   int chunk_rows) {
  DSINFER_CUDA_CHECK(cudaMemsetAsync(w.h.get(), 0, w.h.bytes(), d.stream));
  DSINFER_CUDA_CHECK(cudaMemsetAsync(w.y.get(), 0, w.y.bytes(), d.stream));
  w.gate_up.chunk_rows = w.down.chunk_rows = chunk_rows;
  w4a8_rows_product(w.gate_up, d.stream);
  w4a8_rows_product(w.down, d.stream);  // reads the h_q quantized once, in prepare_w4a8
  DSINFER_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  return {download<uint16_t>(w.h.get(), rows * kInter), download<uint16_t>(w.y.get(), rows * kHidden)};
}

// The FP8 rows products (1..32 rows, as moe_experts configures them), their inputs quantized.
struct Fp8Direct {
  Fp8RowsProduct gate_up, down;
  DeviceBuffer x_q, x_scale, h, h_q, h_scale, y;
};

void prepare_fp8(Device& d, const Experts& ex, const Inputs& in, const HostPlan& plan, Fp8Direct& p) {
  const int64_t T = in.tokens, rows = plan.rows;
  p.x_q = DeviceBuffer(T * kHidden * sizeof(__half));
  p.x_scale = DeviceBuffer(T * (kHidden / kBlock) * sizeof(float));
  p.h = DeviceBuffer(rows * kInter * sizeof(bf16));
  p.h_q = DeviceBuffer(rows * kInter * sizeof(__half));
  p.h_scale = DeviceBuffer(rows * (kInter / kBlock) * sizeof(float));
  p.y = DeviceBuffer(rows * kHidden * sizeof(bf16));
  p.gate_up.gate_up = true;
  p.gate_up.weight = ex.fp8_gate_up.get<fp8>();
  p.gate_up.weight_scale = ex.fp8_gate_up_scale.get<float>();
  p.gate_up.act = p.x_q.get<__half>();
  p.gate_up.act_scale = p.x_scale.get<float>();
  p.gate_up.offsets = plan.offsets_dev.get<int32_t>();
  p.gate_up.row_source = plan.row_source_dev.get<int32_t>();
  p.gate_up.top_k = kTopK;
  p.gate_up.num_experts = kExperts;
  p.gate_up.inter = kInter;
  p.gate_up.hidden = kHidden;
  p.gate_up.min_rows = 1;
  p.gate_up.max_rows = kFp8RowsMaxRows;
  p.gate_up.row_bound = rows;
  p.gate_up.out = p.h.get<bf16>();
  p.gate_up.stage_k_blocks = 2;  // what moe_experts sets
  p.gate_up.load = Fp8RowsLoad::kWarpRows;
  p.down = p.gate_up;
  p.down.gate_up = false;
  p.down.weight = ex.fp8_down.get<fp8>();
  p.down.weight_scale = ex.fp8_down_scale.get<float>();
  p.down.act = p.h_q.get<__half>();
  p.down.act_scale = p.h_scale.get<float>();
  p.down.row_source = nullptr;
  p.down.out = p.y.get<bf16>();
  fp8_rows_quantize(in.x_dev.get<bf16>(), T, kHidden, nullptr, 0, 0, 0, p.x_q.get<__half>(), p.x_scale.get<float>(),
                    d.stream);
  fp8_rows_product(p.gate_up, d.stream);
  fp8_rows_quantize(p.h.get<bf16>(), rows, kInter, plan.offsets_dev.get<int32_t>(), kExperts, 1, kFp8RowsMaxRows,
                    p.h_q.get<__half>(), p.h_scale.get<float>(), d.stream);
  fp8_rows_product(p.down, d.stream);
  DSINFER_CUDA_CHECK(cudaStreamSynchronize(d.stream));
}

// ---- one correctness case ----

void check_case(Device& d, const Experts& ex, const Case& c, uint64_t seed, Failures& failures) {
  Inputs in;
  make_inputs(c, seed, in);
  const std::vector<int32_t> counts = expert_counts(in);
  int touched = 0, most = 0;
  for (int32_t n : counts) {
    touched += n > 0;
    most = std::max(most, n);
  }
  std::printf("%s: T = %lld, %d experts touched, at most %d rows per expert\n", c.name.c_str(),
              static_cast<long long>(c.tokens), touched, most);
  HostPlan plan;
  make_plan(in, plan);
  for (int group_index = 0; group_index < 2; ++group_index) {
    for (bool static_scales : {false, true}) {
      const Flavour f{group_index, static_scales};
      const std::string tag = c.name + ", " + f.describe();
      const int64_t count = in.tokens * kHidden;
      const auto fast = bf16_output(d, count, [&] { run_w4a8(d, ex, in, f, false); });
      const auto again = bf16_output(d, count, [&] { run_w4a8(d, ex, in, f, false); });
      const auto graph = bf16_output(d, count, [&] { run_w4a8(d, ex, in, f, false); }, true);
      const auto reference = bf16_output(d, count, [&] { run_w4a8(d, ex, in, f, true); });
      failures.check(bf16_all_finite(fast) && bf16_all_finite(reference), tag + ": outputs finite");
      const double against_kernel = nmse(fast, reference, c.tokens);
      failures.check(against_kernel <= kBoundAgainstReferenceKernel,
                     tag + ": tensor-core vs reference kernel NMSE " + std::to_string(against_kernel) + " (bound " +
                         std::to_string(kBoundAgainstReferenceKernel) + ")");
      failures.check(again == fast, tag + ": two runs give the same bits");
      failures.check(graph == fast, tag + ": a graph replay gives the eager run's bits");

      // Host reference: the first, middle and last tokens.
      std::vector<int64_t> tokens = {0, c.tokens / 2, c.tokens - 1};
      std::sort(tokens.begin(), tokens.end());
      tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
      if (static_cast<int>(tokens.size()) > kReferenceTokens) tokens.resize(kReferenceTokens);
      std::vector<uint16_t> host_rows, device_rows;
      for (int64_t t : tokens) {
        for (float v : reference_token(ex, in, t, f)) host_rows.push_back(f32_to_bf16(v));
        device_rows.insert(device_rows.end(), fast.begin() + t * kHidden, fast.begin() + (t + 1) * kHidden);
      }
      const double against_host = nmse(device_rows, host_rows, static_cast<int64_t>(tokens.size()));
      failures.check(against_host <= kBoundAgainstHost, tag + ": vs host float64 reference (" +
                                                            std::to_string(tokens.size()) + " tokens) NMSE " +
                                                            std::to_string(against_host) + " (bound " +
                                                            std::to_string(kBoundAgainstHost) + ")");

      W4a8Direct w;
      prepare_w4a8(d, ex, in, plan, f, w);
      const auto chunk32 = run_direct(d, w, plan.rows, 32), chunk16 = run_direct(d, w, plan.rows, 16);
      failures.check(chunk32 == chunk16, tag + ": products with 16- and 32-row work items give the same bits");
    }
  }
}

// ---- one timed case ----

void time_case(Device& d, const Experts& ex, const Case& c, uint64_t seed, int runs, Failures& failures) {
  Inputs in;
  make_inputs(c, seed, in);
  HostPlan plan;
  make_plan(in, plan);
  int touched = 0, most = 0;
  for (int32_t n : plan.counts) {
    touched += n > 0;
    most = std::max(most, n);
  }
  std::printf("%s: T = %lld, %d experts touched, at most %d rows per expert\n", c.name.c_str(),
              static_cast<long long>(c.tokens), touched, most);
  const bool fp8_rows_serve = most <= kFp8RowsMaxRows;
  double fp8_products_us = 0.0;
  const int64_t fp8_bytes = touched * fp8_bytes_per_expert();
  const int64_t fp8_gate_up_bytes = fp8_bytes * 2 / 3, fp8_down_bytes = fp8_bytes - fp8_gate_up_bytes;
  if (fp8_rows_serve) {
    Fp8Direct p;
    prepare_fp8(d, ex, in, plan, p);
    const double gate_up_us = time_us(d, runs, [&] { fp8_rows_product(p.gate_up, d.stream); });
    const double down_us = time_us(d, runs, [&] { fp8_rows_product(p.down, d.stream); });
    fp8_products_us = gate_up_us + down_us;
    print_rate("FP8 rows products: gate_up", gate_up_us, fp8_gate_up_bytes, d.copy_tbps);
    print_rate("FP8 rows products: down", down_us, fp8_down_bytes, d.copy_tbps);
    print_rate("FP8 rows products: both", fp8_products_us, fp8_bytes, d.copy_tbps);
  } else {
    std::printf("    FP8 rows products: not timed (they serve at most %d rows per expert)\n", kFp8RowsMaxRows);
  }
  double w4a8_products_us[2] = {0.0, 0.0};
  for (int group_index = 0; group_index < 2; ++group_index) {
    const Flavour f{group_index, false};
    const int64_t bytes = touched * w4a8_bytes_per_expert(kGroupSizes[group_index]);
    const int64_t gate_up_bytes = bytes * 2 / 3, down_bytes = bytes - gate_up_bytes;
    W4a8Direct w;
    prepare_w4a8(d, ex, in, plan, f, w);
    for (int chunk_rows : {32, 16}) {
      w.gate_up.chunk_rows = w.down.chunk_rows = chunk_rows;
      const std::string tag = "W4A8 products, group " + std::to_string(kGroupSizes[group_index]) + ", " +
                              std::to_string(chunk_rows) + "-row items: ";
      const double gate_up_us = time_us(d, runs, [&] { w4a8_rows_product(w.gate_up, d.stream); });
      const double down_us = time_us(d, runs, [&] { w4a8_rows_product(w.down, d.stream); });
      print_rate(tag + "gate_up", gate_up_us, gate_up_bytes, d.copy_tbps);
      print_rate(tag + "down", down_us, down_bytes, d.copy_tbps);
      print_rate(tag + "both", gate_up_us + down_us, bytes, d.copy_tbps);
      if (chunk_rows == 32) w4a8_products_us[group_index] = gate_up_us + down_us;  // moe_experts' default
    }
  }
  const double fp8_op_us = time_us(d, runs, [&] { run_fp8(d, ex, in); });
  print_rate("moe_experts, FP8 experts (CudaOptions' defaults)", fp8_op_us, fp8_bytes, d.copy_tbps);
  double w4a8_op_us[2];
  for (int group_index = 0; group_index < 2; ++group_index) {
    const Flavour f{group_index, false};
    w4a8_op_us[group_index] = time_us(d, runs, [&] { run_w4a8(d, ex, in, f, false); });
    print_rate("moe_experts, W4A8 experts, group " + std::to_string(kGroupSizes[group_index]), w4a8_op_us[group_index],
               touched * w4a8_bytes_per_expert(kGroupSizes[group_index]), d.copy_tbps);
  }
  for (int group_index = 0; group_index < 2; ++group_index) {
    const std::string group = "group " + std::to_string(kGroupSizes[group_index]);
    if (fp8_rows_serve && c.tokens > 1) {
      print_bar(failures, c.name + ", products alone, " + group + ":", fp8_products_us, w4a8_products_us[group_index]);
    } else {
      print_bar(failures, c.name + ", moe_experts whole, " + group + ":", fp8_op_us, w4a8_op_us[group_index]);
    }
  }
}

int run(int argc, char** argv) {
  bool quick = false, require_bar = false;
  int runs = 30;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--require-bar") == 0) {
      require_bar = true;
    } else if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::max(10, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--runs N (>= 10)] [--require-bar]\n", argv[0]);
      return 2;
    }
  }
  Device d;
  d.open();

  const std::vector<Case> checked = {
      {"uniform T=1", 1, RoutingKind::kUniform},
      {"uniform T=8", 8, RoutingKind::kUniform},
      {"uniform T=64", 64, RoutingKind::kUniform},
      {"uniform T=256", 256, RoutingKind::kUniform},
      {"repeated expert T=1", 1, RoutingKind::kRepeated},
      {"hot experts of 64, 32, 20 rows T=64", 64, RoutingKind::kHot},
      {"out-of-range and repeated ids T=256", 256, RoutingKind::kInvalid},
      {"balanced 64 rows per expert T=2048", 2048, RoutingKind::kBalanced},
  };
  std::vector<Case> timed = {{"uniform T=1", 1, RoutingKind::kUniform}};
  for (int rows : {1, 2, 4, 8, 16, 32, 64})
    timed.push_back({"balanced " + std::to_string(rows) + " rows per expert", 32 * rows, RoutingKind::kBalanced});

  int64_t max_tokens = 0;
  for (const Case& c : checked) max_tokens = std::max(max_tokens, c.tokens);
  for (const Case& c : timed) max_tokens = std::max(max_tokens, c.tokens);
  size_t scratch_bytes = moe_experts_scratch_bytes(fp8_shape(max_tokens));
  for (bool static_scales : {false, true})
    scratch_bytes = std::max(scratch_bytes, moe_experts_scratch_bytes(w4a8_shape(max_tokens, static_scales, false)));
  d.scratch = DeviceBuffer(scratch_bytes);
  d.out = DeviceBuffer(max_tokens * kHidden * sizeof(bf16));

  Experts ex;
  make_experts(ex);
  std::printf("experts: E = %lld, I = %lld, H = %lld; W4A8 %.1f MB each at group 128, %.1f MB at 32; FP8 %.1f MB\n",
              static_cast<long long>(kExperts), static_cast<long long>(kInter), static_cast<long long>(kHidden),
              w4a8_bytes_per_expert(128) / 1e6, w4a8_bytes_per_expert(32) / 1e6, fp8_bytes_per_expert() / 1e6);

  Failures failures;
  uint64_t seed = 100;
  for (const Case& c : checked) check_case(d, ex, c, seed++, failures);
  if (!quick) {
    d.copy_tbps = measure_copy_tbps(d, runs);
    std::printf("device-to-device copy: %.2f TB/s\ntimings (median of %d runs, L2 flushed before each):\n", d.copy_tbps,
                runs);
    for (const Case& c : timed) time_case(d, ex, c, seed++, runs, failures);
  }
  DSINFER_CUDA_CHECK(cudaStreamDestroy(d.stream));
  if (!quick)
    std::printf("bar (W4A8 >= %.1fx FP8 at <= 64 rows per expert): %d BAR line(s) below it%s\n", kBar,
                failures.bar_misses, require_bar ? "" : " (informative; --require-bar makes them failures)");
  const bool passed = failures.count == 0 && (!require_bar || failures.bar_misses == 0);
  if (failures.count > 0) std::printf("%d check(s) FAILED\n", failures.count);
  std::printf("%s\n", passed ? "ALL CHECKS PASSED" : "FAILED");
  return passed ? 0 : 1;
}

}  // namespace
}  // namespace dsinfer::backend::cuda

int main(int argc, char** argv) {
  try {
    return dsinfer::backend::cuda::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moe_w4a8_rows_check: %s\n", e.what());
    return 1;
  }
}
