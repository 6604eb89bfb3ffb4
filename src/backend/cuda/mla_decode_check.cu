// mla_decode_check: the MLA decode kernels against each other on the GPU, then their speed.
//
// For each case (tokens, contexts) it builds random q [T, 128, 576] and a random paged latent cache
// [pages, 64, 576] (page ids shuffled, rows past every context poisoned with NaN), runs kSimple (the
// reference), kTensorCore and kWgmma through the public mla_decode, and compares the outputs
// (max abs error, NMSE, the first element out of tolerance with its (token, head, dim)). A graph
// capture of kWgmma is replayed once and must equal the eager launch bit for bit. Then it times each
// kernel (L2 flushed before every call, CUDA events, median of --runs calls) and prints us, TFLOP/s
// (2 * H * kv_len * (576 + 512) per token) and GB/s (kv_len * 1152 per token plus q and out).
//
// Usage: mla_decode_check [--runs N] [--no-bench] [--only NAME_SUBSTRING]. Exit status 0 when every
// comparison passes, 1 on a mismatch, 2 on an error. Needs an sm_90 GPU (kWgmma). A GPU program,
// not a ctest test.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <numeric>
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

constexpr int kWidth = kMlaCacheWidth;   // 576
constexpr int kLatent = kMlaLatentDim;   // 512
constexpr int kPage = kMlaPageSize;      // 64
constexpr float kAbsTolerance = 1.5e-2f;  // values lie in [-1, 1]; bf16 P and output rounding ~4e-3
constexpr float kRelTolerance = 2e-2f;
constexpr double kNmseTolerance = 5e-4;

struct Case {
  std::string name;
  int heads = 128;
  float scale = 0.35f;                 // softmax scale: ~4 log2 units of score spread (peaky)
  std::vector<int> positions;          // per token; -1 = padding
  std::vector<int> token_sequence;     // per token
  std::vector<int> sequence_rows;      // per sequence: rows its page table covers (>= max position + 1)
  bool bench = true;
};

// One token per sequence, each seeing `context` rows.
Case uniform_case(int tokens, int context) {
  Case c;
  c.name = "T=" + std::to_string(tokens) + " ctx=" + std::to_string(context);
  for (int t = 0; t < tokens; ++t) {
    c.positions.push_back(context - 1);
    c.token_sequence.push_back(t);
    c.sequence_rows.push_back(context);
  }
  return c;
}

// One token per sequence with these contexts (0 = a padding token at position -1 with one page).
Case ragged_case(std::string name, const std::vector<int>& contexts, int heads = 128) {
  Case c;
  c.name = std::move(name);
  c.heads = heads;
  c.bench = false;
  for (size_t t = 0; t < contexts.size(); ++t) {
    c.positions.push_back(contexts[t] - 1);
    c.token_sequence.push_back(static_cast<int>(t));
    c.sequence_rows.push_back(std::max(contexts[t], 1));
  }
  return c;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  const std::pair<int, int> shapes[] = {{1, 2048}, {1, 16384}, {8, 4096}, {64, 2048}, {64, 4096}, {128, 2048}, {256, 2048}, {256, 4096}};
  for (auto [tokens, context] : shapes) cases.push_back(uniform_case(tokens, context));
  Case few_heads = uniform_case(128, 4096);  // 16 heads (TP 8 of 128): the rows of a 64-head MMA padded
  few_heads.heads = 16;
  few_heads.name += " H=16";
  cases.push_back(few_heads);
  // A flat softmax (the 1/sqrt(576) scale) on a split shape and an unsplit one.
  Case flat = uniform_case(4, 3000);
  flat.name += " flat";
  flat.scale = 1.f / 24.f;
  flat.bench = false;
  cases.push_back(flat);
  Case flat_big = uniform_case(96, 700);
  flat_big.name += " flat";
  flat_big.scale = 1.f / 24.f;
  flat_big.bench = false;
  cases.push_back(flat_big);
  // Ragged, split (7 tokens -> several chunks each): page edges, length 1, a padding token.
  cases.push_back(ragged_case("ragged split", {1, 63, 64, 65, 130, 1000, 0}));
  // Ragged, unsplit (many tokens): random lengths plus edges and two padding tokens.
  {
    std::mt19937 rng(7);
    std::vector<int> contexts = {1, 2, 64, 127, 128, 129, 2049, 0, 0, 4095};
    while (contexts.size() < 80) contexts.push_back(1 + static_cast<int>(rng() % 3000));
    cases.push_back(ragged_case("ragged unsplit", contexts));
  }
  // Draft verification: 4 sequences x 3 consecutive positions (tokens share a page table).
  {
    Case c;
    c.name = "draft 4x3";
    c.bench = false;
    const int starts[4] = {500, 63, 1, 1200};
    for (int s = 0; s < 4; ++s) {
      for (int k = 0; k < 3; ++k) {
        c.positions.push_back(starts[s] + k);
        c.token_sequence.push_back(s);
      }
      c.sequence_rows.push_back(starts[s] + 3);
    }
    cases.push_back(c);
  }
  cases.push_back(ragged_case("H=64 ragged", {1, 65, 300, 2048, 0}, 64));
  cases.push_back(ragged_case("H=16 ragged", {1, 65, 300}, 16));
  cases.push_back(ragged_case("H=96 ragged (a 32-head block)", {1, 65, 300, 1000}, 96));
  // A 4-head model (the bundled one): a 64-head block spans 16 tokens' heads. Decode batches as its
  // graphs pad them (rows of context 1 after the real ones) and as they come, at every split count.
  for (int tokens : {1, 2, 3, 5, 8, 13, 16, 24, 40}) {
    std::mt19937 rng(static_cast<unsigned>(tokens));
    std::vector<int> contexts;
    for (int t = 0; t < tokens; ++t) contexts.push_back(t % 4 == 3 ? 1 : 560 + static_cast<int>(rng() % 460));
    cases.push_back(ragged_case("H=4 ragged T=" + std::to_string(tokens), contexts, 4));
  }
  return cases;
}

struct Comparison {
  bool ok = true;
  float max_abs = 0.f;
  double nmse = 0.;
};

// Compares element by element; on a mismatch prints the first bad (token, head, dim) and where the
// bad elements cluster (by 64-dim block of the output, by 16-head slice of a 64-head block, by
// token), which points at the stage that is wrong (a V layout error hits some dim blocks, an S or
// softmax error hits whole rows, a masking error hits the tokens whose context ends mid-page).
Comparison compare(const Case& c, const std::vector<uint16_t>& expected, const std::vector<uint16_t>& actual,
                   const char* kernel) {
  Comparison result;
  double error_sq = 0., reference_sq = 0.;
  const size_t per_token = static_cast<size_t>(c.heads) * kLatent;
  size_t bad_count = 0, first_bad = expected.size();
  int by_dim_block[kLatent / 64] = {}, by_head_slice[4] = {};
  std::vector<int> by_token(c.positions.size(), 0);
  for (size_t i = 0; i < expected.size(); ++i) {
    const float e = bf16_to_f32(expected[i]), a = bf16_to_f32(actual[i]);
    const float diff = std::fabs(a - e);
    const bool bad = !std::isfinite(a) || !std::isfinite(e) || diff > kAbsTolerance + kRelTolerance * std::fabs(e);
    if (std::isfinite(diff)) {
      result.max_abs = std::max(result.max_abs, diff);
      error_sq += static_cast<double>(diff) * diff;
    }
    reference_sq += static_cast<double>(e) * e;
    if (bad) {
      if (bad_count++ == 0) first_bad = i;
      ++by_dim_block[i % kLatent / 64];
      ++by_head_slice[i % per_token / kLatent % 64 / 16];
      ++by_token[i / per_token];
    }
  }
  result.nmse = reference_sq > 0. ? error_sq / reference_sq : error_sq;
  result.ok = bad_count == 0 && result.nmse <= kNmseTolerance;
  if (bad_count > 0) {
    const size_t t = first_bad / per_token, head = first_bad % per_token / kLatent, dim = first_bad % kLatent;
    std::printf("    %s: %zu of %zu elements out of tolerance; first at token %zu (position %d), head %zu, dim %zu: "
                "expected %.6f, got %.6f\n",
                kernel, bad_count, expected.size(), t, c.positions[t], head, dim, bf16_to_f32(expected[first_bad]),
                bf16_to_f32(actual[first_bad]));
    std::printf("      by 64-dim block:");
    for (int count : by_dim_block) std::printf(" %d", count);
    std::printf("\n      by head %% 64 / 16:");
    for (int count : by_head_slice) std::printf(" %d", count);
    std::printf("\n      tokens (position: bad elements):");
    int shown = 0;
    for (size_t token = 0; token < by_token.size() && shown < 12; ++token) {
      if (by_token[token] == 0) continue;
      std::printf(" %zu (%d: %d)", token, c.positions[token], by_token[token]);
      ++shown;
    }
    std::printf("\n");
  } else if (!result.ok) {
    std::printf("    %s: every element within tolerance but NMSE %.3e > %.1e\n", kernel, result.nmse, kNmseTolerance);
  }
  return result;
}

struct Timing {
  double median_us = 0.;
};

class Checker {
 public:
  Checker(int runs, bool bench) : runs_(runs), bench_(bench) {
    DSINFER_CUDA_CHECK(cudaGetDevice(&device_));
    DSINFER_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_));
    int l2_bytes = 0;
    DSINFER_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device_));
    flush_bytes_ = std::max<size_t>(size_t{4} * l2_bytes, size_t{256} << 20);  // > 2x L2
    DSINFER_CUDA_CHECK(cudaMalloc(&flush_, flush_bytes_));
    DSINFER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    DSINFER_CUDA_CHECK(cudaEventCreate(&start_));
    DSINFER_CUDA_CHECK(cudaEventCreate(&stop_));
    cudaDeviceProp prop{};
    DSINFER_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    std::printf("device: %s, %d SMs, L2 %d MB, flush buffer %zu MB\n", prop.name, sm_count_, l2_bytes >> 20,
                flush_bytes_ >> 20);
  }
  ~Checker() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
    cudaFree(flush_);
  }

  // Returns false on a mismatch.
  bool run(const Case& c, uint64_t seed) {
    const int tokens = static_cast<int>(c.positions.size());
    const int sequences = static_cast<int>(c.sequence_rows.size());
    // Page tables: each sequence gets ceil(rows / 64) pages out of a shuffled pool (plus spare pages,
    // so ids are not simply 0..n-1).
    std::vector<int32_t> table_start(sequences + 1, 0);
    for (int s = 0; s < sequences; ++s) table_start[s + 1] = table_start[s] + (c.sequence_rows[s] + kPage - 1) / kPage;
    const int used_pages = table_start[sequences];
    const int pool_pages = used_pages + 5;
    std::vector<int32_t> pool(pool_pages);
    std::iota(pool.begin(), pool.end(), 0);
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::shuffle(pool.begin(), pool.end(), rng);
    std::vector<int32_t> page_ids(pool.begin(), pool.begin() + used_pages);

    const size_t q_elems = static_cast<size_t>(tokens) * c.heads * kWidth;
    const size_t out_elems = static_cast<size_t>(tokens) * c.heads * kLatent;
    const size_t cache_elems = static_cast<size_t>(pool_pages) * kPage * kWidth;
    const size_t scratch_bytes = mla_decode_scratch_bytes(tokens, c.heads, sm_count_);
    DeviceBuffer q(q_elems * 2), cache(cache_elems * 2), out(out_elems * 2), scratch(scratch_bytes);
    DeviceBuffer positions(tokens * 4), token_sequence(tokens * 4), starts((sequences + 1) * 4),
        ids(std::max(used_pages, 1) * 4);
    fill_uniform(q.data, DType::kBF16, static_cast<int64_t>(q_elems), seed * 3 + 1, -1.f, 1.f, stream_);
    fill_uniform(cache.data, DType::kBF16, static_cast<int64_t>(cache_elems), seed * 3 + 2, -1.f, 1.f, stream_);
    // Rows past each sequence's last visible row, in its last page, hold NaN: stale or never-written
    // slots must not leak into any output (0 * NaN would).
    for (int s = 0; s < sequences; ++s) {
      int max_position = -1;
      for (int t = 0; t < tokens; ++t)
        if (c.token_sequence[t] == s) max_position = std::max(max_position, c.positions[t]);
      const int first_dead = max_position + 1;
      const int table_rows = (table_start[s + 1] - table_start[s]) * kPage;
      for (int row = first_dead; row < table_rows; ++row) {
        const size_t slot = static_cast<size_t>(page_ids[table_start[s] + row / kPage]) * kPage + row % kPage;
        DSINFER_CUDA_CHECK(cudaMemsetAsync(cache.as<__nv_bfloat16>() + slot * kWidth, 0xFF, kWidth * 2, stream_));
      }
    }
    DSINFER_CUDA_CHECK(cudaMemcpyAsync(positions.data, c.positions.data(), tokens * 4, cudaMemcpyHostToDevice, stream_));
    DSINFER_CUDA_CHECK(
        cudaMemcpyAsync(token_sequence.data, c.token_sequence.data(), tokens * 4, cudaMemcpyHostToDevice, stream_));
    DSINFER_CUDA_CHECK(
        cudaMemcpyAsync(starts.data, table_start.data(), (sequences + 1) * 4, cudaMemcpyHostToDevice, stream_));
    if (used_pages > 0)
      DSINFER_CUDA_CHECK(cudaMemcpyAsync(ids.data, page_ids.data(), used_pages * 4, cudaMemcpyHostToDevice, stream_));

    MlaDecodeArgs args;
    args.q = q.as<__nv_bfloat16>();
    args.cache = cache.as<__nv_bfloat16>();
    args.token_sequence = token_sequence.as<int32_t>();
    args.positions = positions.as<int32_t>();
    args.page_table_start = starts.as<int32_t>();
    args.page_ids = ids.as<int32_t>();
    args.out = out.as<__nv_bfloat16>();
    args.tokens = tokens;
    args.heads = c.heads;
    args.sm_count = sm_count_;
    args.scale = c.scale;
    args.scratch = scratch.data;
    args.scratch_bytes = scratch_bytes;

    const int splits = mla_decode_num_splits(tokens, c.heads, sm_count_);
    std::printf("%s: %d tokens, %d heads, %d splits, %d pages\n", c.name.c_str(), tokens, c.heads, splits, used_pages);

    // Outputs start as NaN (0xFFFF) so an element a kernel never writes fails the comparison.
    auto run_once = [&](MlaDecodeKernel kernel) {
      DSINFER_CUDA_CHECK(cudaMemsetAsync(out.data, 0xFF, out_elems * 2, stream_));
      mla_decode(args, kernel, stream_);
      std::vector<uint16_t> host(out_elems);
      DSINFER_CUDA_CHECK(cudaMemcpyAsync(host.data(), out.data, out_elems * 2, cudaMemcpyDeviceToHost, stream_));
      DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
      return host;
    };
    const std::vector<uint16_t> reference = run_once(MlaDecodeKernel::kSimple);
    bool ok = true;
    // The reference itself: padding tokens give exact zeros, everything else is finite.
    for (int t = 0; t < tokens; ++t) {
      for (size_t i = 0; i < static_cast<size_t>(c.heads) * kLatent; ++i) {
        const float value = bf16_to_f32(reference[static_cast<size_t>(t) * c.heads * kLatent + i]);
        if (!std::isfinite(value) || (c.positions[t] < 0 && value != 0.f)) {
          std::printf("    kSimple: token %d (position %d) element %zu is %f\n", t, c.positions[t], i, value);
          ok = false;
          break;
        }
      }
    }
    const std::pair<MlaDecodeKernel, const char*> fast[] = {{MlaDecodeKernel::kTensorCore, "kTensorCore"},
                                                             {MlaDecodeKernel::kWgmma, "kWgmma"}};
    std::vector<uint16_t> wgmma_eager;
    for (auto [kernel, name] : fast) {
      const std::vector<uint16_t> actual = run_once(kernel);
      const Comparison result = compare(c, reference, actual, name);
      std::printf("    %-12s max abs %.3e  nmse %.3e  %s\n", name, result.max_abs, result.nmse, result.ok ? "ok" : "MISMATCH");
      ok = ok && result.ok;
      if (kernel == MlaDecodeKernel::kWgmma) wgmma_eager = actual;
    }
    ok = check_graph_replay(args, out, out_elems, wgmma_eager) && ok;

    if (bench_ && c.bench) {
      double flops = 0., bytes = 0.;
      for (int t = 0; t < tokens; ++t) {
        const double kv = std::max(c.positions[t] + 1, 0);
        flops += 2. * c.heads * kv * (kWidth + kLatent);
        bytes += kv * kWidth * 2. + static_cast<double>(c.heads) * (kWidth + kLatent) * 2.;
      }
      const std::pair<MlaDecodeKernel, const char*> all[] = {{MlaDecodeKernel::kSimple, "kSimple"},
                                                              {MlaDecodeKernel::kTensorCore, "kTensorCore"},
                                                              {MlaDecodeKernel::kWgmma, "kWgmma"}};
      for (auto [kernel, name] : all) {
        const Timing timing = time_kernel(args, kernel);
        std::printf("    bench %-12s %9.1f us  %7.1f TFLOP/s  %7.1f GB/s\n", name, timing.median_us,
                    flops / timing.median_us * 1e-6, bytes / timing.median_us * 1e-3);
      }
    }
    return ok;
  }

 private:
  // kWgmma captured into a CUDA graph (relaxed mode, as CudaBackend::capture) and replayed must write
  // exactly what the eager launch wrote.
  bool check_graph_replay(const MlaDecodeArgs& args, const DeviceBuffer& out, size_t out_elems,
                          const std::vector<uint16_t>& eager) {
    DSINFER_CUDA_CHECK(cudaMemsetAsync(out.data, 0xFF, out_elems * 2, stream_));
    cudaGraph_t graph = nullptr;
    DSINFER_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
    try {
      mla_decode(args, MlaDecodeKernel::kWgmma, stream_);
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    DSINFER_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    DSINFER_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    DSINFER_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
    std::vector<uint16_t> replayed(out_elems);
    DSINFER_CUDA_CHECK(cudaMemcpyAsync(replayed.data(), out.data, out_elems * 2, cudaMemcpyDeviceToHost, stream_));
    DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    if (std::memcmp(replayed.data(), eager.data(), out_elems * 2) != 0) {
      for (size_t i = 0; i < out_elems; ++i) {
        if (replayed[i] != eager[i]) {
          std::printf("    kWgmma graph replay differs from the eager launch at element %zu: %f vs %f\n", i,
                      bf16_to_f32(replayed[i]), bf16_to_f32(eager[i]));
          break;
        }
      }
      return false;
    }
    std::printf("    kWgmma graph replay equals the eager launch\n");
    return true;
  }

  Timing time_kernel(const MlaDecodeArgs& args, MlaDecodeKernel kernel) {
    for (int i = 0; i < 2; ++i) mla_decode(args, kernel, stream_);  // warm-up (attributes, TMA encoder)
    std::vector<float> times;
    for (int i = 0; i < runs_; ++i) {
      DSINFER_CUDA_CHECK(cudaMemsetAsync(flush_, i & 0xFF, flush_bytes_, stream_));  // evict the cache from L2
      DSINFER_CUDA_CHECK(cudaEventRecord(start_, stream_));
      mla_decode(args, kernel, stream_);
      DSINFER_CUDA_CHECK(cudaEventRecord(stop_, stream_));
      DSINFER_CUDA_CHECK(cudaEventSynchronize(stop_));
      float ms = 0.f;
      DSINFER_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      times.push_back(ms * 1000.f);
    }
    std::sort(times.begin(), times.end());
    return {times[times.size() / 2]};
  }

  int runs_;
  bool bench_;
  int device_ = 0;
  int sm_count_ = 0;
  void* flush_ = nullptr;
  size_t flush_bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

int check_main(int argc, char** argv) {
  int runs = 25;
  bool bench = true;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--no-bench") == 0) {
      bench = false;
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--runs N] [--no-bench] [--only NAME_SUBSTRING]\n", argv[0]);
      return 2;
    }
  }
  Checker checker(runs, bench);
  int failures = 0;
  uint64_t seed = 0;
  for (const Case& c : all_cases()) {
    ++seed;  // each case keeps its data whatever --only selects
    if (!only.empty() && c.name.find(only) == std::string::npos) continue;
    if (!checker.run(c, seed)) ++failures;
  }
  std::printf("%s: %d case(s) failed\n", failures == 0 ? "PASS" : "FAIL", failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace dsinfer::backend::cuda

int main(int argc, char** argv) {
  try {
    return dsinfer::backend::cuda::check_main(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "mla_decode_check: %s\n", error.what());
    return 2;
  }
}
