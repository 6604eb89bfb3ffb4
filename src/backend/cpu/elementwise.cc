// Embedding lookup, RMSNorm, residual adds, SiLU gating, concatenation.
#include <cmath>
#include <cstring>

#include "backend/cpu/ops.h"
#include "core/parallel.h"

namespace dsinfer::backend::cpu {
namespace {

// One row: out = x / sqrt(mean(x^2) + eps) * weight, the order Hugging Face uses.
void rms_norm_row(const float* x, const float* weight, float eps, int64_t D, float* out) {
  double sum_squares = 0.0;
  for (int64_t i = 0; i < D; ++i) sum_squares += static_cast<double>(x[i]) * x[i];
  float inv_rms = 1.0f / std::sqrt(static_cast<float>(sum_squares / D) + eps);
  for (int64_t i = 0; i < D; ++i) out[i] = weight[i] * (x[i] * inv_rms);
}

void expect_norm_weight(const Tensor& x, const Tensor& weight, const char* op) {
  expect_f32(weight, op, "weight", 1);
  DSINFER_CHECK(weight.dim(0) == x.dim(-1), op, ": weight ", weight.shape().to_string(),
                " does not match x ", x.shape().to_string());
}

}  // namespace

Tensor embedding(const Tensor& table, const Tensor& ids) {
  DSINFER_CHECK(table.rank() == 2 && (table.dtype() == DType::kF32 || table.dtype() == DType::kBF16),
                "embedding: table must be [V, D] f32 or bf16");
  DSINFER_CHECK(ids.rank() == 1 && ids.dtype() == DType::kI32, "embedding: ids must be [T] int32");
  int64_t V = table.dim(0), D = table.dim(1), T = ids.dim(0);
  Tensor out = Tensor::empty(DType::kF32, {T, D});
  for (int64_t t = 0; t < T; ++t) {
    int32_t id = ids.data<int32_t>()[t];
    DSINFER_CHECK(id >= 0 && id < V, "token id ", id, " is outside the vocabulary [0, ", V, ")");
    float* row = out.data<float>() + t * D;
    if (table.dtype() == DType::kF32) {
      std::memcpy(row, table.data<float>() + id * D, D * sizeof(float));
    } else {
      const auto* source = static_cast<const unsigned char*>(table.raw()) + id * D * 2;
      for (int64_t i = 0; i < D; ++i) {
        uint16_t bits;
        std::memcpy(&bits, source + 2 * i, 2);
        row[i] = bf16_to_f32(bits);
      }
    }
  }
  return out;
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) {
  expect_f32(x, "rms_norm", "x", 2);
  expect_norm_weight(x, weight, "rms_norm");
  int64_t T = x.dim(0), D = x.dim(1);
  Tensor out = Tensor::empty(DType::kF32, {T, D});
  parallel_for(T, 16, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      rms_norm_row(x.data<float>() + t * D, weight.data<float>(), eps, D, out.data<float>() + t * D);
  });
  return out;
}

Tensor add_rms_norm_inplace(Tensor& residual, const Tensor& x, const Tensor& weight, float eps) {
  add_inplace(residual, x);
  return rms_norm(residual, weight, eps);
}

void add_inplace(Tensor& x, const Tensor& y) {
  expect_f32(x, "add", "x", -1);
  expect_f32(y, "add", "y", -1);
  DSINFER_CHECK(x.shape() == y.shape(), "add: shapes differ: ", x.shape().to_string(), " and ",
                y.shape().to_string());
  float* a = x.data<float>();
  const float* b = y.data<float>();
  parallel_for(x.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) a[i] += b[i];
  });
}

Tensor silu_mul(const Tensor& x) {
  expect_f32(x, "silu_mul", "x", 2);
  DSINFER_CHECK(x.dim(1) % 2 == 0, "silu_mul: last dimension must be even, got ", x.shape().to_string());
  int64_t T = x.dim(0), I = x.dim(1) / 2;
  Tensor out = Tensor::empty(DType::kF32, {T, I});
  parallel_for(T, 4, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* gate = x.data<float>() + t * 2 * I;
      const float* up = gate + I;
      float* row = out.data<float>() + t * I;
      for (int64_t i = 0; i < I; ++i) row[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    }
  });
  return out;
}

Tensor concat_last(const Tensor& a, const Tensor& b) {
  expect_f32(a, "concat_last", "a", 2);
  expect_f32(b, "concat_last", "b", 2);
  DSINFER_CHECK(a.dim(0) == b.dim(0), "concat_last: row counts differ: ", a.shape().to_string(), " and ",
                b.shape().to_string());
  int64_t T = a.dim(0), A = a.dim(1), B = b.dim(1);
  Tensor out = Tensor::empty(DType::kF32, {T, A + B});
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(out.data<float>() + t * (A + B), a.data<float>() + t * A, A * sizeof(float));
    std::memcpy(out.data<float>() + t * (A + B) + A, b.data<float>() + t * B, B * sizeof(float));
  }
  return out;
}

Tensor slice_last(const Tensor& x, int64_t begin, int64_t end) {
  expect_f32(x, "slice_last", "x", 2);
  int64_t T = x.dim(0), D = x.dim(1);
  DSINFER_CHECK(0 <= begin && begin <= end && end <= D, "slice_last: columns [", begin, ", ", end,
                ") outside ", x.shape().to_string());
  Tensor out = Tensor::empty(DType::kF32, {T, end - begin});
  for (int64_t t = 0; t < T; ++t)
    std::memcpy(out.data<float>() + t * (end - begin), x.data<float>() + t * D + begin,
                (end - begin) * sizeof(float));
  return out;
}

Tensor gather_rows(const Tensor& x, const std::vector<int32_t>& rows) {
  expect_f32(x, "gather_rows", "x", 2);
  int64_t T = x.dim(0), D = x.dim(1);
  Tensor out = Tensor::empty(DType::kF32, {static_cast<int64_t>(rows.size()), D});
  for (size_t r = 0; r < rows.size(); ++r) {
    DSINFER_CHECK(rows[r] >= 0 && rows[r] < T, "gather_rows: row ", rows[r], " outside [0, ", T, ")");
    std::memcpy(out.data<float>() + r * D, x.data<float>() + rows[r] * D, D * sizeof(float));
  }
  return out;
}

Tensor concat_rows(const Tensor& a, const Tensor& b) {
  expect_f32(a, "concat_rows", "a", 2);
  expect_f32(b, "concat_rows", "b", 2);
  DSINFER_CHECK(a.dim(1) == b.dim(1), "concat_rows: widths differ: ", a.shape().to_string(), " and ",
                b.shape().to_string());
  Tensor out = Tensor::empty(DType::kF32, {a.dim(0) + b.dim(0), a.dim(1)});
  std::memcpy(out.raw(), a.raw(), a.nbytes());
  std::memcpy(static_cast<char*>(out.raw()) + a.nbytes(), b.raw(), b.nbytes());
  return out;
}

}  // namespace dsinfer::backend::cpu
