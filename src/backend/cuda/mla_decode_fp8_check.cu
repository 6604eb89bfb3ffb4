// mla_decode_fp8_check: the FP8 MLA decode kernel (mla_decode_fp8.h) on the GPU, against an f32/f64
// reference, from 1K to 128K of context.
//
// 1. Error against context: q [T, 128, 576] bf16 (uniform, std 0.5) and an e4m3 cache (uniform, std
//    1, scattered page ids) at contexts 1K, 8K, 32K and 128K, V3's softmax scale (scores of ~1.6
//    nats' spread). T = 64 one-token sequences (one block walks the whole context: the longest
//    accumulation chain) and T = 2 (split into chunks and combined). The reference computes every
//    score in f32 from the bf16 q and the dequantized rows, the softmax and P V in f64 (a subset of
//    heads); the BF16 wgmma kernel over the same rows in bf16 (exact) is measured beside it.
//    Error = rms(out - ref) / rms(ref). Asserts: each FP8 error <= kMaxRelativeError, and the 128K
//    error <= 1.5x the 1K error (the two-level accumulation: the error must not grow with context).
// 2. Ragged batches (page edges, a context of 1, padding tokens, 16 / 64 / 96 heads, draft tokens)
//    against the generic kernel over the same FP8 cache (kSimple: dequantized rows, bf16 q, f32).
// 3. A CUDA graph of the FP8 launch replayed once must equal the eager launch bit for bit.
//
// Usage: mla_decode_fp8_check [--quick] (contexts up to 32K). Exit status 0 when every check passes,
// 1 on a failed check, 2 on an error. Needs an sm_90 GPU. A GPU program, not a ctest test.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check_buffer.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/mla_decode.h"
#include "backend/cuda/random_fill.h"
#include "core/dtype.h"
#include "core/error.h"

namespace dsinfer::backend::cuda {
namespace {

constexpr int kWidth = kMlaCacheWidth;  // 576
constexpr int kLatent = kMlaLatentDim;  // 512
constexpr int kPage = kMlaPageSize;     // 64
constexpr int kHeads = 128;
constexpr float kScale = 0.13523f;  // V3's softmax scale (YaRN mscale^2 / sqrt(192))
// Q and P in e4m3 (3 mantissa bits, ~2.5% rms a value) on zero-mean random rows; see mla_decode_fp8.cu.
// Measured on an H200: 0.026 to 0.039 against the reference (the BF16 kernel: 0.0016 to 0.0019), 0.013
// to 0.028 against the generic kernel on the ragged batches. The bound leaves 1.5x.
constexpr double kMaxRelativeError = 0.06;
constexpr double kMaxGrowth = 1.5;  // 128K error / 1K error

// ---- the reference: one block per (token, checked head) ----

constexpr int kRefThreads = 256;

__device__ float dequantize(uint8_t code) {
  return static_cast<float>(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3))) * kFp8CacheScale;
}

// scores [T, checked, max_context] f32 scratch; out [T, checked, 512] f32. Head of checked index i:
// heads[i]. Positions < 0: zero output.
__global__ void __launch_bounds__(kRefThreads)
    reference_kernel(const __nv_bfloat16* q, const uint8_t* cache, const int32_t* token_sequence,
                     const int32_t* positions, const int32_t* page_table_start, const int32_t* page_ids,
                     const int32_t* heads, int num_heads, int checked, int max_context, float scale_log2,
                     float* scores, float* out) {
  const int index = blockIdx.x, t = blockIdx.y;
  const int head = heads[index];
  __shared__ float q_row[kWidth];
  __shared__ double reduce[kRefThreads / 32];
  __shared__ float block_max;
  for (int d = threadIdx.x; d < kWidth; d += kRefThreads)
    q_row[d] = __bfloat162float(q[(static_cast<size_t>(t) * num_heads + head) * kWidth + d]);
  __syncthreads();
  const int context = positions[t] + 1;
  float* my_scores = scores + (static_cast<size_t>(t) * checked + index) * max_context;
  const int32_t* pages = page_ids + page_table_start[token_sequence[t]];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Scores: a warp a key, lanes over the dims.
  float local_max = -INFINITY;
  for (int j = warp; j < context; j += kRefThreads / 32) {
    const uint8_t* row = cache + static_cast<size_t>(cache_slot(pages, kPage, j)) * kWidth;
    float dot = 0.f;
    for (int d = lane; d < kWidth; d += 32) dot = fmaf(q_row[d], dequantize(row[d]), dot);
    for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
    const float score = dot * scale_log2;
    if (lane == 0) my_scores[j] = score;
    local_max = fmaxf(local_max, score);
  }
  for (int offset = 16; offset > 0; offset /= 2) local_max = fmaxf(local_max, __shfl_xor_sync(0xffffffffu, local_max, offset));
  if (lane == 0) reduce[warp] = local_max;
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = -INFINITY;
    for (int w = 0; w < kRefThreads / 32; ++w) m = fmaxf(m, static_cast<float>(reduce[w]));
    block_max = m;
  }
  __syncthreads();
  const float m = block_max;
  // Probabilities (relative to the max) in place of the scores; their sum in f64.
  double sum = 0.0;
  for (int j = threadIdx.x; j < context; j += kRefThreads) {
    const double p = exp2(static_cast<double>(my_scores[j]) - m);
    my_scores[j] = static_cast<float>(p);
    sum += p;
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  __syncthreads();  // every thread has read block_max and reduce; the probabilities are written
  if (lane == 0) reduce[warp] = sum;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kRefThreads / 32; ++w) total += reduce[w];
  // Output: thread d owns dims d and d + 256, f64 sums over the keys.
  double acc[2] = {0.0, 0.0};
  for (int j = 0; j < context; ++j) {
    const double p = my_scores[j];
    const uint8_t* row = cache + static_cast<size_t>(cache_slot(pages, kPage, j)) * kWidth;
    acc[0] += p * dequantize(row[threadIdx.x]);
    acc[1] += p * dequantize(row[threadIdx.x + kRefThreads]);
  }
  float* o = out + (static_cast<size_t>(t) * checked + index) * kLatent;
  o[threadIdx.x] = context > 0 ? static_cast<float>(acc[0] / total) : 0.f;
  o[threadIdx.x + kRefThreads] = context > 0 ? static_cast<float>(acc[1] / total) : 0.f;
}

__global__ void fp8_to_bf16_kernel(const uint8_t* in, __nv_bfloat16* out, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    out[i] = __float2bfloat16(dequantize(in[i]));
}

// ---- one problem: q, cache, page tables on the device ----

struct Problem {
  int tokens = 0, heads = kHeads, max_context = 0;
  std::vector<int32_t> positions, token_sequence, table_start, page_ids;
  size_t cache_rows = 0;
};

// Each token its own sequence of `contexts[t]` rows (0: a padding token at position -1 with a page);
// `draft` tokens share their sequence's table (consecutive positions).
Problem make_problem(const std::vector<int>& contexts, int heads) {
  Problem p;
  p.heads = heads;
  p.tokens = static_cast<int>(contexts.size());
  int pages = 0;
  for (int t = 0; t < p.tokens; ++t) {
    const int rows = std::max(contexts[t], 1);
    p.positions.push_back(contexts[t] - 1);
    p.token_sequence.push_back(t);
    p.table_start.push_back(pages);
    pages += (rows + kPage - 1) / kPage;
    p.max_context = std::max(p.max_context, contexts[t]);
  }
  p.table_start.push_back(pages);
  p.page_ids.resize(pages);
  for (int i = 0; i < pages; ++i) p.page_ids[i] = static_cast<int32_t>((int64_t{i} * 7919) % pages);  // scattered
  p.cache_rows = size_t(pages) * kPage;
  return p;
}

struct Outputs {
  std::vector<float> values;  // [T, heads, 512]
};

double relative_rms(const std::vector<float>& out, const std::vector<float>& ref) {
  double error = 0, energy = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(out[i]) - ref[i];
    error += d * d;
    energy += double(ref[i]) * ref[i];
  }
  return energy > 0 ? std::sqrt(error / energy) : std::sqrt(error);
}

std::vector<float> bf16_to_host(const DeviceBuffer& buffer, size_t n) {
  std::vector<uint16_t> bits(n);
  DSINFER_CUDA_CHECK(cudaMemcpy(bits.data(), buffer.data, n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(bits[i]);
  return out;
}

struct Runner {
  const Problem& problem;
  int sm_count;
  DeviceBuffer q, cache, cache_bf16, seq, pos, start, pages, out, scratch;
  Runner(const Problem& p, int sms, uint64_t seed, bool with_bf16)
      : problem(p),
        sm_count(sms),
        q(size_t(p.tokens) * p.heads * kWidth * 2),
        cache(p.cache_rows * kWidth),
        cache_bf16(with_bf16 ? p.cache_rows * kWidth * 2 : 0),
        seq(p.tokens * 4),
        pos(p.tokens * 4),
        start(p.table_start.size() * 4),
        pages(p.page_ids.size() * 4),
        out(size_t(p.tokens) * p.heads * kLatent * 2),
        scratch(mla_decode_scratch_bytes(p.tokens, p.heads, sms)) {
    fill_uniform(q.data, DType::kBF16, int64_t(p.tokens) * p.heads * kWidth, seed, -0.866f, 0.866f, nullptr);
    fill_uniform(cache.data, DType::kF8E4M3, int64_t(p.cache_rows) * kWidth, seed + 1, -1.732f, 1.732f, nullptr);
    if (with_bf16) {
      fp8_to_bf16_kernel<<<1024, 256>>>(cache.as<uint8_t>(), cache_bf16.as<__nv_bfloat16>(), p.cache_rows * kWidth);
      DSINFER_CUDA_CHECK_LAUNCH();
    }
    upload(seq, p.token_sequence);
    upload(pos, p.positions);
    upload(start, p.table_start);
    upload(pages, p.page_ids);
    DSINFER_CUDA_CHECK(cudaDeviceSynchronize());
  }

  MlaDecodeArgs args(bool fp8) const {
    MlaDecodeArgs a;
    a.q = q.as<__nv_bfloat16>();
    if (fp8)
      a.cache_fp8 = cache.as<uint8_t>();
    else
      a.cache = cache_bf16.as<__nv_bfloat16>();
    a.token_sequence = seq.as<int32_t>();
    a.positions = pos.as<int32_t>();
    a.page_table_start = start.as<int32_t>();
    a.page_ids = pages.as<int32_t>();
    a.out = out.as<__nv_bfloat16>();
    a.tokens = problem.tokens;
    a.heads = problem.heads;
    a.sm_count = sm_count;
    a.scale = kScale;
    a.scratch = scratch.data;
    a.scratch_bytes = mla_decode_scratch_bytes(problem.tokens, problem.heads, sm_count);
    return a;
  }

  std::vector<float> run(bool fp8, MlaDecodeKernel kernel) {
    DSINFER_CUDA_CHECK(cudaMemset(out.data, 0xff, size_t(problem.tokens) * problem.heads * kLatent * 2));  // NaN
    mla_decode(args(fp8), kernel, nullptr);
    DSINFER_CUDA_CHECK(cudaDeviceSynchronize());
    return bf16_to_host(out, size_t(problem.tokens) * problem.heads * kLatent);
  }

  // The reference for `heads` (indices into 0..H-1): [T, heads.size(), 512].
  std::vector<float> reference(const std::vector<int32_t>& heads) {
    const int checked = static_cast<int>(heads.size());
    DeviceBuffer head_ids(heads.size() * 4), scores(size_t(problem.tokens) * checked * std::max(problem.max_context, 1) * 4),
        ref(size_t(problem.tokens) * checked * kLatent * 4);
    upload(head_ids, heads);
    reference_kernel<<<dim3(checked, problem.tokens), kRefThreads>>>(
        q.as<__nv_bfloat16>(), cache.as<uint8_t>(), seq.as<int32_t>(), pos.as<int32_t>(), start.as<int32_t>(),
        pages.as<int32_t>(), head_ids.as<int32_t>(), problem.heads, checked, std::max(problem.max_context, 1),
        kScale * 1.4426950408889634f, scores.as<float>(), ref.as<float>());
    DSINFER_CUDA_CHECK_LAUNCH();
    DSINFER_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> host(size_t(problem.tokens) * checked * kLatent);
    DSINFER_CUDA_CHECK(cudaMemcpy(host.data(), ref.data, host.size() * 4, cudaMemcpyDeviceToHost));
    return host;
  }
};

// Rows of `all` [T, H, 512] for the checked heads: [T, heads.size(), 512].
std::vector<float> pick_heads(const std::vector<float>& all, int tokens, int heads, const std::vector<int32_t>& picked) {
  std::vector<float> out;
  out.reserve(size_t(tokens) * picked.size() * kLatent);
  for (int t = 0; t < tokens; ++t)
    for (int32_t h : picked) {
      const float* row = all.data() + (size_t(t) * heads + h) * kLatent;
      out.insert(out.end(), row, row + kLatent);
    }
  return out;
}

int failures = 0;
void expect(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::printf("FAIL: %s\n", what.c_str());
  }
}

bool all_finite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

void error_against_context(int sm_count, bool quick) {
  std::printf("\n1. Error against context (rms(out - ref) / rms(ref); ref: f32 scores, f64 softmax and P V)\n");
  std::printf("   %-28s %10s %10s %12s\n", "case", "fp8", "bf16", "fp8 / bf16");
  std::vector<int> contexts = {1024, 8192, 32768};
  if (!quick) contexts.push_back(131072);
  for (int tokens : {64, 2}) {
    std::vector<double> errors;
    for (int context : contexts) {
      Problem problem = make_problem(std::vector<int>(tokens, context), kHeads);
      Runner runner(problem, sm_count, 1000 + context + tokens, true);
      // 8 heads of 128 at T = 64 (the reference reads the whole context a head), all at T = 2.
      std::vector<int32_t> heads;
      for (int h = 0; h < kHeads; h += tokens == 2 ? 1 : 16) heads.push_back(h);
      const std::vector<float> ref = runner.reference(heads);
      const std::vector<float> fp8 = pick_heads(runner.run(true, MlaDecodeKernel::kWgmma), tokens, kHeads, heads);
      const std::vector<float> bf16 = pick_heads(runner.run(false, MlaDecodeKernel::kWgmma), tokens, kHeads, heads);
      const double e8 = relative_rms(fp8, ref), e16 = relative_rms(bf16, ref);
      errors.push_back(e8);
      const std::string name = "T=" + std::to_string(tokens) + (tokens == 2 ? " (split)" : " (unsplit)") +
                               " ctx=" + std::to_string(context / 1024) + "K";
      std::printf("   %-28s %10.4g %10.4g %12.3g\n", name.c_str(), e8, e16, e8 / e16);
      expect(all_finite(fp8), name + ": non-finite FP8 output");
      expect(e8 <= kMaxRelativeError, name + ": FP8 error above " + std::to_string(kMaxRelativeError));
    }
    const double growth = errors.back() / errors.front();
    std::printf("   T=%d: error at %dK / error at 1K = %.3f (bound %.2f)\n", tokens, contexts.back() / 1024, growth,
                kMaxGrowth);
    expect(growth <= kMaxGrowth, "T=" + std::to_string(tokens) + ": the FP8 error grows with the context");
  }
}

void ragged_against_generic(int sm_count) {
  std::printf("\n2. Ragged batches against the generic kernel over the same FP8 cache (rms(out - ref) / rms(ref))\n");
  struct Ragged {
    std::string name;
    std::vector<int> contexts;
    int heads;
  };
  std::vector<Ragged> cases = {{"ragged split", {1, 63, 64, 65, 130, 1000, 0}, 128},
                               {"H=16 ragged", {1, 65, 300, 4096}, 16},
                               {"H=64 ragged", {1, 65, 300, 2048, 0}, 64},
                               {"H=96 ragged", {1, 65, 300, 1000}, 96}};
  {
    std::mt19937 rng(7);
    std::vector<int> contexts = {1, 2, 64, 127, 128, 129, 2049, 0, 0, 4095};
    while (contexts.size() < 80) contexts.push_back(1 + static_cast<int>(rng() % 3000));
    cases.push_back({"ragged unsplit", contexts, 128});
  }
  for (const Ragged& c : cases) {
    Problem problem = make_problem(c.contexts, c.heads);
    Runner runner(problem, sm_count, 77 + c.heads, false);
    const std::vector<float> ref = runner.run(true, MlaDecodeKernel::kSimple);
    const std::vector<float> fp8 = runner.run(true, MlaDecodeKernel::kWgmma);
    const double e = relative_rms(fp8, ref);
    // Padding tokens (context 0) must be exactly zero.
    bool padding_zero = true;
    for (int t = 0; t < problem.tokens; ++t)
      if (c.contexts[t] == 0)
        for (int i = 0; i < c.heads * kLatent; ++i) padding_zero &= fp8[size_t(t) * c.heads * kLatent + i] == 0.f;
    std::printf("   %-28s %10.4g%s\n", c.name.c_str(), e, padding_zero ? "" : "  (padding not zero)");
    expect(all_finite(fp8), c.name + ": non-finite FP8 output");
    expect(e <= kMaxRelativeError, c.name + ": FP8 error above bound");
    expect(padding_zero, c.name + ": a padding token's output is not zero");
  }
}

void graph_replay(int sm_count) {
  std::printf("\n3. A CUDA graph of the FP8 launch against the eager launch\n");
  for (int tokens : {2, 64}) {
    Problem problem = make_problem(std::vector<int>(tokens, 3000), kHeads);
    Runner runner(problem, sm_count, 5, false);
    const std::vector<float> eager = runner.run(true, MlaDecodeKernel::kWgmma);
    cudaStream_t stream;
    DSINFER_CUDA_CHECK(cudaStreamCreate(&stream));
    DSINFER_CUDA_CHECK(cudaMemset(runner.out.data, 0, size_t(tokens) * kHeads * kLatent * 2));
    cudaGraph_t graph;
    DSINFER_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    mla_decode(runner.args(true), MlaDecodeKernel::kWgmma, stream);
    DSINFER_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    DSINFER_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    DSINFER_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<float> replayed = bf16_to_host(runner.out, size_t(tokens) * kHeads * kLatent);
    const bool same = std::memcmp(eager.data(), replayed.data(), eager.size() * 4) == 0;
    std::printf("   T=%d ctx=3000: %s\n", tokens, same ? "identical" : "DIFFERENT");
    expect(same, "graph replay differs from the eager launch");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

int check_main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
      return 2;
    }
  }
  int device = 0, sm_count = 0;
  DSINFER_CUDA_CHECK(cudaGetDevice(&device));
  DSINFER_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  cudaDeviceProp prop{};
  DSINFER_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf("mla_decode_fp8_check on %s (%d SMs)\n", prop.name, sm_count);
  ragged_against_generic(sm_count);
  graph_replay(sm_count);
  error_against_context(sm_count, quick);
  std::printf("\n%s: %d failed check(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}

}  // namespace
}  // namespace dsinfer::backend::cuda

int main(int argc, char** argv) {
  try {
    return dsinfer::backend::cuda::check_main(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "mla_decode_fp8_check: %s\n", error.what());
    return 2;
  }
}
