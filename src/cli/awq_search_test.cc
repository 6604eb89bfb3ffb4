// AWQ's search and folding (awq_search.h) on a random expert whose input has a few loud channels, as
// real activations do: the folding is exact before rounding, the search never loses to round to nearest
// and here beats it, and alpha = 0 is round to nearest bit for bit.
#include "cli/awq_search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/make_backend.h"
#include "io/int4_pack.h"

namespace dsinfer::cli {
namespace {

constexpr int64_t kHidden = 256, kInter = 128, kRows = 512;

Tensor random_matrix(int64_t rows, int64_t cols, float std, std::mt19937& rng) {
  Tensor t = Tensor::empty(DType::kF32, {rows, cols});
  std::normal_distribution<float> normal(0.0f, std);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = normal(rng);
  return t;
}

ExpertWeights random_expert(std::mt19937& rng) {
  return {random_matrix(kInter, kHidden, 0.06f, rng), random_matrix(kInter, kHidden, 0.06f, rng),
          random_matrix(kHidden, kInter, 0.09f, rng)};
}

// Rows whose channels differ in loudness by up to ~30x (every 16th channel an outlier).
Tensor activations(std::mt19937& rng) {
  Tensor x = random_matrix(kRows, kHidden, 1.0f, rng);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t k = 0; k < kHidden; ++k) x.data<float>()[r * kHidden + k] *= k % 16 == 0 ? 30.0f : 0.5f + k % 5 * 0.25f;
  return x;
}

// The expert's output as the model computes it in float32: down(silu(gate x) * up x), the input
// multiplied by p_in first when given.
Tensor expert_output(backend::Backend& cpu, const ExpertWeights& w, Tensor x, const Tensor& p_in = Tensor()) {
  if (p_in.defined()) {
    x = x.clone();
    for (int64_t r = 0; r < x.dim(0); ++r)
      for (int64_t k = 0; k < x.dim(1); ++k) x.data<float>()[r * x.dim(1) + k] *= p_in.data<float>()[k];
  }
  Tensor gate_up = Tensor::empty(DType::kF32, {2 * kInter, kHidden});
  std::memcpy(gate_up.data<float>(), w.gate.data<float>(), w.gate.nbytes());
  std::memcpy(gate_up.data<float>() + w.gate.numel(), w.up.data<float>(), w.up.nbytes());
  return cpu.linear(cpu.silu_mul(cpu.linear(x, {gate_up, {}, {}})), {w.down, {}, {}});
}

double relative_difference(const Tensor& a, const Tensor& b) {
  double error = 0, norm = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = static_cast<double>(a.data<float>()[i]) - b.data<float>()[i];
    error += d * d;
    norm += static_cast<double>(b.data<float>()[i]) * b.data<float>()[i];
  }
  return std::sqrt(error / norm);
}

Tensor random_factors(int64_t n, std::mt19937& rng) {
  Tensor p = Tensor::empty(DType::kF32, {n});
  std::uniform_real_distribution<float> log_factor(-3.0f, 3.0f);
  for (int64_t i = 0; i < n; ++i) p.data<float>()[i] = std::exp(log_factor(rng));
  return p;
}

TEST(Awq, FoldedFactorsLeaveTheExpertsOutputUnchangedBeforeRounding) {
  std::mt19937 rng(1);
  auto cpu = backend::make_backend("cpu");
  const ExpertWeights expert = random_expert(rng);
  const Tensor x = activations(rng);
  const Tensor p_in = random_factors(kHidden, rng), p_down = random_factors(kInter, rng);  // 1/20 .. 20
  const ExpertWeights folded = fold_factors(expert, p_in, p_down);
  const double difference =
      relative_difference(expert_output(*cpu, folded, x, p_in), expert_output(*cpu, expert, x));
  EXPECT_LT(difference, 1e-5);
}

TEST(Awq, TheSearchNeverLosesToRoundToNearestAndGainsOnLoudChannels) {
  std::mt19937 rng(2);
  auto cpu = backend::make_backend("cpu");
  const ExpertWeights expert = random_expert(rng);
  const Tensor x = activations(rng);
  const ExpertAwq found = search_expert(*cpu, expert, x, AwqOptions{});
  EXPECT_LE(found.error, found.rtn_error);
  for (const AwqChoice* choice : {&found.gate_up, &found.down}) {
    EXPECT_LE(choice->error, choice->rtn_error);
    EXPECT_GE(choice->alpha, 0.0);
    EXPECT_LE(choice->alpha, 1.0);
    for (int64_t k = 0; k < choice->factors.numel(); ++k) {
      const float p = choice->factors.data<float>()[k];
      ASSERT_TRUE(p > 0.0f && std::isfinite(p)) << k << ": " << p;
    }
  }
  std::printf("AWQ on loud channels: the expert's output error %.3g (RTN) -> %.3g (alphas %.2f, %.2f)\n",
              found.rtn_error, found.error, found.gate_up.alpha, found.down.alpha);
  // The input's loud channels are what AWQ is for: a clear gain there.
  EXPECT_GT(found.gate_up.alpha, 0.0);
  EXPECT_LT(found.error, 0.8 * found.rtn_error);
}

TEST(Awq, FactorsOfOneAreRoundToNearestBitForBit) {
  std::mt19937 rng(3);
  const Tensor weight = random_matrix(64, kHidden, 0.05f, rng);
  Tensor ones = Tensor::empty(DType::kF32, {kHidden});
  std::fill_n(ones.data<float>(), kHidden, 1.0f);
  const backend::LinearWeight awq = w4a8_weight(weight, ones, 128);
  const std::vector<io::NamedTensor> rtn = io::int4_checkpoint_tensors("p.weight", weight, 128, DType::kBF16);
  ASSERT_EQ(awq.data.nbytes(), rtn[0].second.nbytes());
  EXPECT_EQ(std::memcmp(awq.data.raw(), rtn[0].second.raw(), awq.data.nbytes()), 0);
  const Tensor scales = rtn[1].second;  // BF16
  for (int64_t i = 0; i < scales.numel(); ++i)
    EXPECT_EQ(awq.scale.data<float>()[i], bf16_to_f32(scales.data<uint16_t>()[i])) << i;
}

}  // namespace
}  // namespace dsinfer::cli
