#include "small_ops_cases.h"  // bench/gpu/, next to this file

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/fp8_gemm.h"
#include "backend/cuda/moe.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/rope_cache.h"
#include "backend/cuda/routing.h"
#include "core/error.h"

namespace dsinfer::bench {
namespace {

using bf16 = __nv_bfloat16;
using fp8 = __nv_fp8_e4m3;
using backend::cuda::NormSchedule;

constexpr int64_t kTokenCounts[] = {1, 64, 256, 1024, 4096, 16384};
constexpr int64_t kHidden = 7168;
constexpr int64_t kMoeInter = 2048;
constexpr int64_t kDenseInter = 18432;
constexpr int kExperts = 256;
constexpr int64_t kHeads = 128;
constexpr int64_t kNopeDim = 128;
constexpr int64_t kRopeDim = 64;
constexpr int64_t kLatent = 512;
constexpr int64_t kPageSize = 64;
constexpr int kMaxPositions = 8192;
constexpr float kEps = 1e-6f;
constexpr double kRouteBarUs = 5.0;  // issue 8: fused routing at 256 tokens

// cuBLASLt's FP8 products take the token count padded to a multiple of 4 (gemm.cc).
int64_t padded_tokens(int64_t tokens) { return (tokens + 3) / 4 * 4; }

// Fails loudly when two device ranges differ (the fused kernels promise the unfused kernels' bits).
void expect_same_bytes(const std::string& what, const void* expected, const void* actual, size_t bytes) {
  std::vector<uint8_t> a(bytes), b(bytes);
  DSINFER_CUDA_CHECK(cudaDeviceSynchronize());
  DSINFER_CUDA_CHECK(cudaMemcpy(a.data(), expected, bytes, cudaMemcpyDeviceToHost));
  DSINFER_CUDA_CHECK(cudaMemcpy(b.data(), actual, bytes, cudaMemcpyDeviceToHost));
  if (std::memcmp(a.data(), b.data(), bytes) == 0) return;
  size_t first = 0;
  while (a[first] == b[first]) ++first;
  size_t differing = 0;
  for (size_t i = first; i < bytes; ++i) differing += a[i] != b[i];
  throw Error(str_cat("small-op check failed: ", what, ": ", differing, " of ", bytes,
                      " bytes differ, the first at byte ", first, " (expected ", int{a[first]}, ", got ", int{b[first]},
                      ")"));
}

void copy_device(void* to, const void* from, size_t bytes, cudaStream_t stream) {
  DSINFER_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream));
}

template <typename T>
void upload(void* device, const std::vector<T>& host) {
  DSINFER_CUDA_CHECK(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
}

// A call's median time: the kernels' own (CUPTI's records, first start to last end), as the anchors'
// and the copy ceiling's bandwidth are, or the CUDA events' where libcupti is missing. At a few
// microseconds the events would also count the launch (kernel_activity.h).
template <typename Call>
double kernel_us(Timer& timer, Call&& call) {
  const double event_us = timer.median_us(call);
  const double gpu_us = timer.kernel_median_us();
  return gpu_us > 0 ? gpu_us : event_us;
}

// Records a case's figures and prints its columns: us, MB moved, TB/s, share of copy.
std::string record(Json& figures, const std::string& key, double us, double bytes, const Ceilings& ceilings) {
  const double tbs = bytes / us / 1e6;
  figures[key + "_us"] = us;
  figures[key + "_tb_s"] = tbs;
  figures[key + "_of_copy"] = tbs / ceilings.copy_tb_s;
  char columns[96];
  std::snprintf(columns, sizeof(columns), "%9.1f %10.2f %7.2f %7.0f%%", us, bytes / 1e6, tbs,
                100 * tbs / ceilings.copy_tb_s);
  return columns;
}

// ---- fused routing ----

void route_cases(Timer& timer, cudaStream_t stream, const Ceilings& ceilings, Json& figures) {
  std::printf("\nFused routing (route: sigmoid, bias, 4 of 8 groups, top-8 of 256, normalize, x2.5), one kernel\n");
  std::printf("  bytes = logits [T, 256] f32 read + bias + ids and weights [T, 8] written\n");
  std::printf("   tokens        us         MB    TB/s  of copy   5 us bar at 256 tokens\n");
  backend::RouterParams params;
  params.scoring = backend::Scoring::kSigmoid;
  params.selection = backend::ExpertSelection::kNoauxTc;
  params.top_k = 8;
  params.n_group = 8;
  params.topk_group = 4;
  params.normalize = true;
  params.scaling_factor = 2.5f;
  Buffer bias(kExperts * 4);
  fill(bias.get(), DType::kF32, kExperts, 21, -0.05f, 0.05f, stream);
  for (int64_t tokens : kTokenCounts) {
    Buffer logits(tokens * kExperts * 4), ids(tokens * params.top_k * 4), weights(tokens * params.top_k * 4);
    fill(logits.get(), DType::kF32, tokens * kExperts, 22, -4, 4, stream);
    const double us = kernel_us(timer, [&] {
      backend::cuda::route(logits.get<float>(), bias.get<float>(), ids.get<int32_t>(), weights.get<float>(), tokens,
                           kExperts, params, stream);
    });
    const double bytes = 4.0 * tokens * kExperts + 4.0 * kExperts + 8.0 * tokens * params.top_k;
    const std::string key = str_cat("route_t", tokens);
    std::string bar = "-";
    if (tokens == 256) {
      figures[key + "_vs_bar"] = kRouteBarUs / us;
      bar = us <= kRouteBarUs ? "met" : "MISSED";
    }
    std::printf("  %7lld %s   %s\n", static_cast<long long>(tokens), record(figures, key, us, bytes, ceilings).c_str(),
                bar.c_str());
  }
}

// ---- SiLU-mul, alone and with FP8 quantization ----

void silu_cases(Timer& timer, cudaStream_t stream, const Ceilings& ceilings, Json& figures) {
  std::printf("\nSiLU-mul (silu_mul: h = silu(gate) * up) and SiLU-mul + FP8 quantization (silu_mul_quant_fp8, one "
              "kernel, no bf16 h)\n");
  std::printf("  bytes: silu_mul x [T, 2I] bf16 read + h [T, I] bf16 written; + quant: x read + q [T4, I] e4m3 "
              "+ scales [I / 128, T4] f32 written (T4: T rounded up to 4)\n");
  std::printf("        I   tokens   silu_mul us         MB    TB/s  of copy | +quant us         MB    TB/s  of copy\n");
  for (int64_t inter : {kMoeInter, kDenseInter}) {
    for (int64_t tokens : kTokenCounts) {
      const int64_t t4 = padded_tokens(tokens), groups = inter / 128;
      Buffer x(tokens * 2 * inter * 2), h(tokens * inter * 2), h_fused(tokens * inter * 2);
      Buffer q(t4 * inter), q_fused(t4 * inter), scales(groups * t4 * 4), scales_fused(groups * t4 * 4);
      fill(x.get(), DType::kBF16, tokens * 2 * inter, 31, -3, 3, stream);
      const std::string key = str_cat("silu_mul_i", inter, "_t", tokens);

      // The fused kernel against what the backend runs today: silu_mul, then quantize_fp8_per_token_group.
      backend::cuda::silu_mul(x.get<bf16>(), h.get<bf16>(), tokens, inter, stream);
      backend::cuda::quantize_fp8_per_token_group(h.get<bf16>(), inter, tokens, t4, inter, q.get<fp8>(),
                                                  scales.get<float>(), stream);
      backend::cuda::silu_mul_quant_fp8(x.get<bf16>(), h_fused.get<bf16>(), tokens, t4, inter, q_fused.get<fp8>(),
                                        scales_fused.get<float>(), stream);
      expect_same_bytes(key + " quant h", h.get(), h_fused.get(), tokens * inter * 2);
      expect_same_bytes(key + " quant q", q.get(), q_fused.get(), t4 * inter);
      expect_same_bytes(key + " quant scales", scales.get(), scales_fused.get(), groups * t4 * 4);
      DSINFER_CUDA_CHECK(cudaMemsetAsync(q_fused.get(), 0, t4 * inter, stream));
      backend::cuda::silu_mul_quant_fp8(x.get<bf16>(), nullptr, tokens, t4, inter, q_fused.get<fp8>(),
                                        scales_fused.get<float>(), stream);
      expect_same_bytes(key + " quant q (no h)", q.get(), q_fused.get(), t4 * inter);

      const double plain_us =
          kernel_us(timer, [&] { backend::cuda::silu_mul(x.get<bf16>(), h.get<bf16>(), tokens, inter, stream); });
      const double quant_us = kernel_us(timer, [&] {
        backend::cuda::silu_mul_quant_fp8(x.get<bf16>(), nullptr, tokens, t4, inter, q_fused.get<fp8>(),
                                          scales_fused.get<float>(), stream);
      });
      const double plain_bytes = 6.0 * tokens * inter;
      const double quant_bytes = 4.0 * tokens * inter + 1.0 * t4 * inter + 4.0 * groups * t4;
      const std::string plain = record(figures, key, plain_us, plain_bytes, ceilings);
      const std::string quant = record(figures, key + "_quant", quant_us, quant_bytes, ceilings);
      std::printf("  %7lld %8lld %13s | %s\n", static_cast<long long>(inter), static_cast<long long>(tokens),
                  plain.c_str(), quant.c_str());
    }
  }
}

// ---- add + RMSNorm, alone and with FP8 quantization ----

void norm_cases(Timer& timer, cudaStream_t stream, const Ceilings& ceilings, Json& figures) {
  std::printf("\nAdd + RMSNorm, hidden 7168 (add_rms_norm_inplace: residual += x; out = rms_norm(residual)), the "
              "backend's schedule (auto) and both schedules\n");
  std::printf("  bytes = residual and x read, residual and out written, bf16 (+ the f32 weight once)\n");
  std::printf("   tokens   auto us         MB    TB/s  of copy | block/row us  persistent us\n");
  const int64_t H = kHidden, groups = H / 128;
  Buffer weight(H * 4);
  fill(weight.get(), DType::kF32, H, 41, 0.5f, 1.5f, stream);
  std::vector<std::string> quant_lines;
  for (int64_t tokens : kTokenCounts) {
    const int64_t t4 = padded_tokens(tokens);
    const size_t bytes = tokens * H * 2;
    Buffer residual(bytes), start(bytes), x(bytes), out(bytes), out_ref(bytes), residual_ref(bytes);
    Buffer q(t4 * H), q_ref(t4 * H), scales(groups * t4 * 4), scales_ref(groups * t4 * 4);
    fill(start.get(), DType::kBF16, tokens * H, 42, -1, 1, stream);
    fill(x.get(), DType::kBF16, tokens * H, 43, -1, 1, stream);
    const std::string key = str_cat("add_rms_norm_t", tokens);
    auto norm = [&](NormSchedule schedule, bf16* target) {
      backend::cuda::add_rms_norm_inplace(residual.get<bf16>(), x.get<bf16>(), weight.get<float>(), target, tokens, H,
                                          kEps, stream, schedule);
    };

    // The schedules give the same bits; the fused quantization the bits of norm + quantize.
    copy_device(residual.get(), start.get(), bytes, stream);
    norm(NormSchedule::kBlockPerRow, out_ref.get<bf16>());
    copy_device(residual_ref.get(), residual.get(), bytes, stream);
    backend::cuda::quantize_fp8_per_token_group(out_ref.get<bf16>(), H, tokens, t4, H, q_ref.get<fp8>(),
                                                scales_ref.get<float>(), stream);
    copy_device(residual.get(), start.get(), bytes, stream);
    norm(NormSchedule::kPersistent, out.get<bf16>());
    expect_same_bytes(key + " persistent out", out_ref.get(), out.get(), bytes);
    expect_same_bytes(key + " persistent residual", residual_ref.get(), residual.get(), bytes);
    for (NormSchedule schedule : {NormSchedule::kBlockPerRow, NormSchedule::kPersistent}) {
      const std::string name = key + (schedule == NormSchedule::kPersistent ? " quant persistent" : " quant block/row");
      for (bool keep_out : {true, false}) {
        copy_device(residual.get(), start.get(), bytes, stream);
        DSINFER_CUDA_CHECK(cudaMemsetAsync(out.get(), 0, bytes, stream));
        backend::cuda::add_rms_norm_quant_fp8(residual.get<bf16>(), x.get<bf16>(), weight.get<float>(),
                                              keep_out ? out.get<bf16>() : nullptr, tokens, t4, H, kEps, q.get<fp8>(),
                                              scales.get<float>(), stream, schedule);
        if (keep_out) expect_same_bytes(name + " out", out_ref.get(), out.get(), bytes);
        expect_same_bytes(name + " residual", residual_ref.get(), residual.get(), bytes);
        expect_same_bytes(name + " q", q_ref.get(), q.get(), t4 * H);
        expect_same_bytes(name + " scales", scales_ref.get(), scales.get(), groups * t4 * 4);
      }
    }

    // Timed in place: the residual keeps growing by x (bf16, far from overflow in these few calls).
    const double auto_us = kernel_us(timer, [&] { norm(NormSchedule::kAuto, out.get<bf16>()); });
    const double block_us = kernel_us(timer, [&] { norm(NormSchedule::kBlockPerRow, out.get<bf16>()); });
    const double persistent_us = kernel_us(timer, [&] { norm(NormSchedule::kPersistent, out.get<bf16>()); });
    const double norm_bytes = 8.0 * tokens * H + 4.0 * H;
    const std::string columns = record(figures, key, auto_us, norm_bytes, ceilings);
    figures[key + "_block_per_row_us"] = block_us;
    figures[key + "_persistent_us"] = persistent_us;
    // Below 1024 rows both schedules run the block-per-row kernel (norm.h).
    std::printf("  %7lld %s | %12.1f %14s\n", static_cast<long long>(tokens), columns.c_str(), block_us,
                tokens >= 1024 ? str_cat(std::round(persistent_us * 10) / 10).c_str() : "-");

    auto quant = [&](bool keep_out) {
      return kernel_us(timer, [&] {
        backend::cuda::add_rms_norm_quant_fp8(residual.get<bf16>(), x.get<bf16>(), weight.get<float>(),
                                              keep_out ? out.get<bf16>() : nullptr, tokens, t4, H, kEps, q.get<fp8>(),
                                              scales.get<float>(), stream);
      });
    };
    const double q_bytes = 4.0 * tokens * H + 2.0 * tokens * H + 1.0 * t4 * H + 4.0 * groups * t4 + 4.0 * H;
    const std::string q_only = record(figures, key + "_quant", quant(false), q_bytes, ceilings);
    const std::string q_out = record(figures, key + "_quant_out", quant(true), q_bytes + 2.0 * tokens * H, ceilings);
    char line[256];
    std::snprintf(line, sizeof(line), "  %7lld %s | %s", static_cast<long long>(tokens), q_only.c_str(), q_out.c_str());
    quant_lines.push_back(line);
  }
  std::printf("\nAdd + RMSNorm + FP8 quantization, hidden 7168 (add_rms_norm_quant_fp8, one kernel; e4m3 per 128 "
              "columns, quantize_fp8_per_token_group's layout)\n");
  std::printf("  bytes = residual and x read, residual, q [T4, 7168] and scales [56, T4] written (+ out [T, 7168] "
              "bf16 in the second block)\n");
  std::printf("   tokens   q only us         MB    TB/s  of copy | q + out us         MB    TB/s  of copy\n");
  for (const std::string& line : quant_lines) std::printf("%s\n", line.c_str());
}

// ---- RoPE on q, and the fused latent-cache write ----

// cos / sin [kMaxPositions, 32] of real rotations (timing rotates the same data again and again: a
// rotation keeps its magnitude).
void upload_rope_tables(float* cos_table, float* sin_table) {
  const int half = kRopeDim / 2;
  std::vector<float> c(size_t{kMaxPositions} * half), s(c.size());
  for (int p = 0; p < kMaxPositions; ++p)
    for (int i = 0; i < half; ++i) {
      const double angle = p * std::pow(10000.0, -2.0 * i / kRopeDim);
      c[size_t(p) * half + i] = static_cast<float>(std::cos(angle));
      s[size_t(p) * half + i] = static_cast<float>(std::sin(angle));
    }
  upload(cos_table, c);
  upload(sin_table, s);
}

void rope_cases(Timer& timer, cudaStream_t stream, const Ceilings& ceilings, Json& figures) {
  const int half = kRopeDim / 2;
  Buffer cos_table(size_t{kMaxPositions} * half * 4), sin_table(size_t{kMaxPositions} * half * 4);
  upload_rope_tables(cos_table.get<float>(), sin_table.get<float>());
  Buffer norm_weight(kLatent * 4);
  fill(norm_weight.get(), DType::kF32, kLatent, 51, 0.5f, 1.5f, stream);

  std::printf("\nRoPE on q (rope_inplace: q [T, 128, 192] bf16, dims 128..191, interleaved pairs)\n");
  std::printf("  bytes = q's rope dims read and written (16 KB a token each way) + positions + one cos and sin row "
              "a token\n");
  std::printf("   tokens        us         MB    TB/s  of copy\n");
  const int64_t q_width = kNopeDim + kRopeDim;
  for (int64_t tokens : kTokenCounts) {
    Buffer q(tokens * kHeads * q_width * 2), positions(tokens * 4);
    fill(q.get(), DType::kBF16, tokens * kHeads * q_width, 52, -2, 2, stream);
    std::vector<int32_t> host_positions(tokens);
    for (int64_t t = 0; t < tokens; ++t) host_positions[t] = static_cast<int32_t>((t * 7919 + 13) % kMaxPositions);
    upload(positions.get(), host_positions);
    const double us = kernel_us(timer, [&] {
      backend::cuda::rope_inplace(q.get<bf16>(), tokens, kHeads, q_width, kHeads * q_width, kNopeDim, kRopeDim,
                                  positions.get<int32_t>(), cos_table.get<float>(), sin_table.get<float>(), true,
                                  stream);
    });
    const double bytes = tokens * (2.0 * kHeads * kRopeDim * 2 + 4 + 2.0 * half * 4);
    std::printf("  %7lld %s\n", static_cast<long long>(tokens),
                record(figures, str_cat("rope_q_t", tokens), us, bytes, ceilings).c_str());
  }

  std::printf("\nMLA latent-cache write (write_latent_cache: kv_a [T, 576] -> rms_norm(512) | rope(64) -> scattered "
              "64-row pages), one kernel\n");
  std::printf("  bytes = kv_a read + cache rows written (1152 bytes a token each way) + slot, position and a cos and "
              "sin row a token + the norm weight\n");
  std::printf("   tokens        us         MB    TB/s  of copy\n");
  const int64_t width = kLatent + kRopeDim;
  for (int64_t tokens : kTokenCounts) {
    const int64_t pages = (tokens + kPageSize - 1) / kPageSize + 1;
    Buffer kv_a(tokens * width * 2), cache(pages * kPageSize * width * 2), positions(tokens * 4), slots(tokens * 8);
    fill(kv_a.get(), DType::kBF16, tokens * width, 53, -2, 2, stream);
    std::vector<int32_t> host_positions(tokens);
    std::vector<int64_t> host_slots(tokens);
    for (int64_t t = 0; t < tokens; ++t) {
      host_positions[t] = static_cast<int32_t>((t * 7919 + 13) % kMaxPositions);
      host_slots[t] = (t / kPageSize * 7919 + 3) % pages * kPageSize + t % kPageSize;  // scattered pages
    }
    upload(positions.get(), host_positions);
    upload(slots.get(), host_slots);
    const double us = kernel_us(timer, [&] {
      backend::cuda::write_latent_cache(kv_a.get<bf16>(), tokens, kLatent, kRopeDim, norm_weight.get<float>(), kEps,
                                        positions.get<int32_t>(), cos_table.get<float>(), sin_table.get<float>(), true,
                                        slots.get<int64_t>(), cache.get<bf16>(), stream);
    });
    const double bytes = tokens * (2.0 * width * 2 + 8 + 4 + 2.0 * half * 4) + 4.0 * kLatent;
    std::printf("  %7lld %s\n", static_cast<long long>(tokens),
                record(figures, str_cat("write_latent_cache_t", tokens), us, bytes, ceilings).c_str());
  }
}

// ---- MoE unpermute + weighted combine ----

// moe_experts' combine (moe_combine): each token's top-8 expert rows, scattered over the step's
// rows as the plan lays them out, weighted and summed. The permute has no kernel of its own (the
// gate_up products read the tokens' rows in place through the plan's row_source). Checked bit for bit
// against the same f32 sums on the host at the smaller sizes.
void combine_cases(Timer& timer, cudaStream_t stream, const Ceilings& ceilings, Json& figures) {
  constexpr int64_t kTopK = 8;
  std::printf("\nMoE unpermute + weighted combine (moe_combine: out[t] = sum_j w[t, j] * y[row(t, j)], top-8, "
              "hidden 7168), one kernel\n");
  std::printf("  bytes = the rows y [8T, 7168] bf16 read + out [T, 7168] written + rows and weights [T, 8]\n");
  std::printf("   tokens        us         MB    TB/s  of copy\n");
  for (int64_t tokens : kTokenCounts) {
    const int64_t rows = tokens * kTopK;
    Buffer y(rows * kHidden * 2), out(tokens * kHidden * 2), slot_row(rows * 4), weights(rows * 4);
    fill(y.get(), DType::kBF16, rows * kHidden, 61, -2, 2, stream);
    fill(weights.get(), DType::kF32, rows, 62, 0.0f, 0.5f, stream);
    std::vector<int32_t> host_rows(rows);
    for (int64_t i = 0; i < rows; ++i) host_rows[i] = static_cast<int32_t>(i * 7919 % rows);  // a permutation
    if (rows > 1) host_rows[1] = -1;  // a skipped slot
    upload(slot_row.get(), host_rows);
    auto run = [&] {
      backend::cuda::moe_combine(y.get<bf16>(), slot_row.get<int32_t>(), weights.get<float>(), out.get<bf16>(),
                                 tokens, kTopK, kHidden, stream);
    };
    if (tokens <= 256) {
      run();
      std::vector<uint16_t> y_host(rows * kHidden), out_host(tokens * kHidden);
      std::vector<float> w_host(rows);
      DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream));
      DSINFER_CUDA_CHECK(cudaMemcpy(y_host.data(), y.get(), y_host.size() * 2, cudaMemcpyDeviceToHost));
      DSINFER_CUDA_CHECK(cudaMemcpy(w_host.data(), weights.get(), w_host.size() * 4, cudaMemcpyDeviceToHost));
      DSINFER_CUDA_CHECK(cudaMemcpy(out_host.data(), out.get(), out_host.size() * 2, cudaMemcpyDeviceToHost));
      int64_t wrong = 0;
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t d = 0; d < kHidden; ++d) {
          float sum = 0.0f;
          for (int64_t j = 0; j < kTopK; ++j) {
            const int32_t row = host_rows[t * kTopK + j];
            if (row >= 0) sum = std::fma(w_host[t * kTopK + j], bf16_to_f32(y_host[row * kHidden + d]), sum);
          }
          wrong += f32_to_bf16(sum) != out_host[t * kHidden + d];
        }
      if (wrong > 0)
        throw Error(str_cat("small-op check failed: moe_combine at ", tokens, " tokens: ", wrong, " of ",
                            tokens * kHidden, " outputs differ from the host's sums"));
    }
    const double us = kernel_us(timer, run);
    const double bytes = rows * kHidden * 2.0 + tokens * kHidden * 2.0 + rows * 8.0;
    std::printf("  %7lld %s\n", static_cast<long long>(tokens),
                record(figures, str_cat("moe_combine_t", tokens), us, bytes, ceilings).c_str());
  }
}

}  // namespace

void small_op_cases(Timer& timer, cudaStream_t stream, const Ceilings& ceilings, Json& figures) {
  route_cases(timer, stream, ceilings, figures);
  silu_cases(timer, stream, ceilings, figures);
  norm_cases(timer, stream, ceilings, figures);
  rope_cases(timer, stream, ceilings, figures);
  combine_cases(timer, stream, ceilings, figures);
  std::printf("  (copy ceiling of this run: %.2f TB/s)\n", ceilings.copy_tb_s);
}

}  // namespace dsinfer::bench
