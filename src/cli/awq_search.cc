// AWQ's scale search over one expert (awq_search.h).
#include "cli/awq_search.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "io/int4_pack.h"

namespace dsinfer::cli {
namespace {

// llm-awq clamps the per-channel statistic so that a channel no row used keeps a usable factor.
constexpr float kMinChannelMean = 1e-4f;

void expect_matrix(const Tensor& t, const char* what) {
  DSINFER_CHECK(t.dtype() == DType::kF32 && t.device() == Device::kCpu && t.rank() == 2, "AWQ: ", what,
                " must be a float32 CPU matrix, got ", dtype_name(t.dtype()), " ", t.shape().to_string());
}

// mean |x[:, k]| over the rows, [K].
std::vector<float> channel_means(const Tensor& x) {
  const int64_t R = x.dim(0), K = x.dim(1);
  std::vector<double> sums(static_cast<size_t>(K), 0.0);
  for (int64_t r = 0; r < R; ++r) {
    const float* row = x.data<float>() + r * K;
    for (int64_t k = 0; k < K; ++k) sums[k] += std::fabs(row[k]);
  }
  std::vector<float> means(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) means[k] = static_cast<float>(sums[k] / static_cast<double>(R));
  return means;
}

// p = 1 / s with s = max(mean, floor)^alpha / sqrt(max(s) min(s)); all ones at alpha = 0.
Tensor factors_at(const std::vector<float>& means, double alpha) {
  const auto K = static_cast<int64_t>(means.size());
  std::vector<double> s(means.size());
  double lo = INFINITY, hi = 0;
  for (size_t k = 0; k < means.size(); ++k) {
    s[k] = std::pow(static_cast<double>(std::max(means[k], kMinChannelMean)), alpha);
    lo = std::min(lo, s[k]);
    hi = std::max(hi, s[k]);
  }
  const double middle = std::sqrt(lo * hi);
  Tensor p = Tensor::empty(DType::kF32, {K});
  for (int64_t k = 0; k < K; ++k) p.data<float>()[k] = static_cast<float>(middle / s[k]);
  return p;
}

// sum (a - b)^2 / sum b^2 over two tensors of one shape.
double relative_error(const Tensor& got, const Tensor& want) {
  double error = 0, norm = 0;
  const float* a = got.data<float>();
  const float* b = want.data<float>();
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    error += d * d;
    norm += static_cast<double>(b[i]) * b[i];
  }
  return norm > 0 ? error / norm : error;
}

// [a; b]: two [N, K] matrices stacked along N.
Tensor stack_rows(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(DType::kF32, {a.dim(0) + b.dim(0), a.dim(1)});
  std::memcpy(out.data<float>(), a.data<float>(), a.nbytes());
  std::memcpy(out.data<float>() + a.numel(), b.data<float>(), b.nbytes());
  return out;
}

// Tries every alpha of the grid for one product; `quantized(p)` is its output with factors p and
// `reference` the unquantized output on the same rows.
template <typename Quantized>
AwqChoice search(const std::vector<float>& means, const Tensor& reference, const AwqOptions& options,
                 Quantized quantized) {
  AwqChoice best;
  for (int i = 0; i <= options.grid; ++i) {
    const double alpha = static_cast<double>(i) / options.grid;
    Tensor p = factors_at(means, alpha);
    const double error = relative_error(quantized(p), reference);
    if (i == 0) best.rtn_error = error;
    if (i == 0 || error < best.error) {  // ties keep the smaller alpha, RTN first
      best.factors = p;
      best.alpha = alpha;
      best.error = error;
    }
  }
  return best;
}

}  // namespace

backend::LinearWeight w4a8_weight(const Tensor& weight, const Tensor& factors, int64_t group_size) {
  expect_matrix(weight, "the weight");
  const int64_t N = weight.dim(0), K = weight.dim(1);
  const Tensor scaled = scale_weight(weight, Tensor(), factors);
  const io::Int4Groups groups =
      io::quantize_int4({scaled.data<float>(), static_cast<size_t>(scaled.numel())}, N, K, group_size, DType::kBF16);
  std::vector<int32_t> words(static_cast<size_t>(N * K / 8));
  io::pack_int4(groups.values, words);
  Tensor data = Tensor::empty(DType::kU8, {N, K / 2});  // little-endian words: the values in column order
  std::memcpy(data.raw(), words.data(), data.nbytes());
  Tensor scale = Tensor::empty(DType::kF32, {N, K / group_size});
  std::copy(groups.scales.begin(), groups.scales.end(), scale.data<float>());
  backend::LinearWeight out{data, scale, backend::WeightFormat::kW4A8};
  out.pre_scale = factors;
  return out;
}

ExpertAwq search_expert(backend::Backend& cpu, const ExpertWeights& expert, const Tensor& x,
                        const AwqOptions& options) {
  expect_matrix(expert.gate, "gate");
  expect_matrix(expert.up, "up");
  expect_matrix(expert.down, "down");
  expect_matrix(x, "the calibration rows");
  DSINFER_CHECK(x.dim(0) > 0 && x.dim(1) == expert.gate.dim(1) && expert.up.shape() == expert.gate.shape() &&
                    expert.down.dim(0) == x.dim(1) && expert.down.dim(1) == expert.gate.dim(0) && options.grid > 0,
                "AWQ: rows ", x.shape().to_string(), " do not fit an expert of gate ", expert.gate.shape().to_string(),
                " and down ", expert.down.shape().to_string(), " (or the grid ", options.grid, " is empty)");
  const Tensor gate_up = stack_rows(expert.gate, expert.up);  // [2I, H]
  const backend::LinearWeight down{expert.down, {}, {}};
  const Tensor y = cpu.linear(cpu.silu_mul(cpu.linear(x, {gate_up, {}, {}})), down);  // [R, H]
  auto hidden = [&](const Tensor& p) {  // h [R, I] through the int4 gate_up with factors p
    return cpu.silu_mul(cpu.linear(x, w4a8_weight(gate_up, p, options.group_size)));
  };
  ExpertAwq out;
  // gate_up by its effect on the expert's output (down unquantized), as llm-awq measures a block.
  out.gate_up = search(channel_means(x), y, options, [&](const Tensor& p) { return cpu.linear(hidden(p), down); });
  // down on h as the chosen gate_up gives it: its input at run time.
  const Tensor h = hidden(out.gate_up.factors);
  out.down = search(channel_means(h), y, options, [&](const Tensor& p) {
    return cpu.linear(h, w4a8_weight(expert.down, p, options.group_size));
  });
  // The whole expert against round to nearest (both products at p = 1); never worse on these rows.
  const std::vector<float> none_h(static_cast<size_t>(x.dim(1)), 1.0f), none_i(static_cast<size_t>(h.dim(1)), 1.0f);
  const Tensor ones_h = factors_at(none_h, 0.0), ones_i = factors_at(none_i, 0.0);
  out.rtn_error = relative_error(cpu.linear(hidden(ones_h), w4a8_weight(expert.down, ones_i, options.group_size)), y);
  out.error = out.down.error;
  if (out.error > out.rtn_error) {
    out.gate_up = {ones_h, 0.0, out.rtn_error, out.gate_up.rtn_error};
    out.down = {ones_i, 0.0, out.rtn_error, out.down.rtn_error};
    out.error = out.rtn_error;
  }
  return out;
}

Tensor scale_weight(const Tensor& weight, const Tensor& row_factors, const Tensor& column_factors) {
  expect_matrix(weight, "the weight");
  const int64_t N = weight.dim(0), K = weight.dim(1);
  auto fits = [](const Tensor& factors, int64_t n) {
    return !factors.defined() || (factors.dtype() == DType::kF32 && factors.numel() == n);
  };
  DSINFER_CHECK(fits(row_factors, N) && fits(column_factors, K),
                "AWQ: factors ", row_factors.defined() ? row_factors.shape().to_string() : "(none)", " and ",
                column_factors.defined() ? column_factors.shape().to_string() : "(none)", " for a weight of ",
                weight.shape().to_string());
  Tensor out = weight.clone();
  const float* rows = row_factors.defined() ? row_factors.data<float>() : nullptr;
  const float* columns = column_factors.defined() ? column_factors.data<float>() : nullptr;
  parallel_for(N, 16, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      float* row = out.data<float>() + n * K;
      if (rows)
        for (int64_t k = 0; k < K; ++k) row[k] *= rows[n];
      if (columns)
        for (int64_t k = 0; k < K; ++k) row[k] /= columns[k];
    }
  });
  return out;
}

ExpertWeights fold_factors(const ExpertWeights& expert, const Tensor& p_in, const Tensor& p_down) {
  return {scale_weight(expert.gate, Tensor(), p_in), scale_weight(expert.up, p_down, p_in),
          scale_weight(expert.down, Tensor(), p_down)};
}

}  // namespace dsinfer::cli
