// Weight formats: float conversions, FP8 block dequantization, and load_f32 over a checkpoint.
#include "io/weight_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "io/safetensors_writer.h"
#include "io/test_util.h"

namespace dsinfer::io {
namespace {

using test_util::make_tensor;
using test_util::ScratchDir;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Values every stored dtype holds exactly.
const std::vector<float> kExact = {0.0f, 1.0f, -2.0f, 0.5f, 3.5f, -0.125f, 448.0f, 6.0f};

TEST(ToF32, ConvertsEveryFloatDtypeExactly) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3}) {
    Tensor converted = to_f32(make_tensor(dtype, {2, 4}, kExact));
    EXPECT_EQ(converted.dtype(), DType::kF32);
    EXPECT_EQ(converted.shape(), Shape({2, 4}));
    for (size_t i = 0; i < kExact.size(); ++i)
      EXPECT_EQ(converted.data<float>()[i], kExact[i]) << dtype_name(dtype);
  }
}

TEST(ToF32, CopiesF32) {
  Tensor stored = make_tensor(DType::kF32, {2}, {1.0f, 2.0f});
  Tensor converted = to_f32(stored);
  EXPECT_NE(converted.raw(), stored.raw());
}

TEST(ToF32, ReadsMisalignedStorage) {
  std::vector<unsigned char> bytes(1 + 3 * sizeof(uint16_t));
  uint16_t values[3] = {f32_to_bf16(1.0f), f32_to_bf16(-3.0f), f32_to_bf16(0.25f)};
  std::memcpy(bytes.data() + 1, values, sizeof(values));
  Tensor odd = Tensor::wrap(bytes.data() + 1, DType::kBF16, {3}, Device::kCpu, nullptr);
  Tensor converted = to_f32(odd);
  EXPECT_EQ(converted.data<float>()[1], -3.0f);
  EXPECT_EQ(converted.data<float>()[2], 0.25f);
}

TEST(ToF32, RejectsIntegers) {
  EXPECT_THAT([] { to_f32(Tensor::empty(DType::kI64, {2})); },
              ThrowsMessage<Error>(HasSubstr("cannot convert I64")));
}

// The FP8 codes and scales of an [rows, cols] weight, and the expected dequantized values.
struct Fp8Weight {
  Tensor q, scale_inv;
  std::vector<float> expected;
};

Fp8Weight make_fp8_weight(int64_t rows, int64_t cols, int block_n, int block_k, DType scale_dtype) {
  int64_t block_rows = (rows + block_n - 1) / block_n, block_cols = (cols + block_k - 1) / block_k;
  std::vector<float> codes(rows * cols), scales(block_rows * block_cols);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<float>(static_cast<int>(i % 29) - 14) / 4;
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = std::ldexp(1.0f, static_cast<int>(i % 7) - 3);
  Fp8Weight weight{make_tensor(DType::kF8E4M3, {rows, cols}, codes),
                   make_tensor(scale_dtype, {block_rows, block_cols}, scales),
                   {}};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      weight.expected.push_back(codes[r * cols + c] * scales[(r / block_n) * block_cols + c / block_k]);
  return weight;
}

void expect_values(const Tensor& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(actual.data<float>()[i], expected[i]) << "element " << i;
}

TEST(DequantizeFp8Blocks, RaggedBlocksWithF32AndBf16Scales) {
  for (DType scale_dtype : {DType::kF32, DType::kBF16}) {
    Fp8Weight weight = make_fp8_weight(5, 7, 2, 3, scale_dtype);
    Tensor out = dequantize_fp8_blocks(weight.q, weight.scale_inv, 2, 3, "w");
    EXPECT_EQ(out.shape(), Shape({5, 7}));
    expect_values(out, weight.expected);
  }
}

TEST(DequantizeFp8Blocks, LargeWeightSplitAcrossThreads) {
  Fp8Weight weight = make_fp8_weight(300, 700, 128, 128, DType::kF32);  // 210,000 values, scales [3, 6]
  expect_values(dequantize_fp8_blocks(weight.q, weight.scale_inv, 128, 128, "w"), weight.expected);
}

TEST(DequantizeFp8Blocks, ErrorsNameTheTensor) {
  Fp8Weight weight = make_fp8_weight(5, 7, 2, 3, DType::kF32);
  EXPECT_THAT([&] { dequantize_fp8_blocks(weight.q, weight.scale_inv, 4, 3, "layers.0.w"); },
              ThrowsMessage<Error>(HasSubstr("layers.0.w: scale_inv shape [3, 3] does not match [2, 3]")));
  EXPECT_THAT([&] { dequantize_fp8_blocks(weight.scale_inv, weight.scale_inv, 2, 3, "layers.0.w"); },
              ThrowsMessage<Error>(HasSubstr("layers.0.w: expected 2-D F8_E4M3 weights, got F32")));
  Tensor f16_scales = make_tensor(DType::kF16, {3, 3}, std::vector<float>(9, 1.0f));
  EXPECT_THAT([&] { dequantize_fp8_blocks(weight.q, f16_scales, 2, 3, "layers.0.w"); },
              ThrowsMessage<Error>(HasSubstr("layers.0.w: scale_inv must be F32 or BF16, got F16")));
}

TEST(LoadF32, DequantizesWithTheScaleBesideTheWeight) {
  ScratchDir dir;
  Fp8Weight weight = make_fp8_weight(130, 200, 128, 128, DType::kF32);  // scales [2, 2]
  write_safetensors(dir.file("model.safetensors"),
                    {{"model.layers.0.self_attn.q_a_proj.weight", weight.q},
                     {"model.layers.0.self_attn.q_a_proj.weight_scale_inv", weight.scale_inv},
                     {"model.norm.weight", make_tensor(DType::kBF16, {3}, {1.0f, 0.5f, -2.0f})}});
  Checkpoint checkpoint = Checkpoint::open(dir.path());
  expect_values(load_f32(checkpoint, "model.layers.0.self_attn.q_a_proj.weight"), weight.expected);
  expect_values(load_f32(checkpoint, "model.norm.weight"), {1.0f, 0.5f, -2.0f});
}

TEST(LoadF32, Fp8WithoutScaleNamesTheTensor) {
  ScratchDir dir;
  Fp8Weight weight = make_fp8_weight(4, 4, 128, 128, DType::kF32);
  write_safetensors(dir.file("model.safetensors"), {{"mlp.down_proj.weight", weight.q}});
  Checkpoint checkpoint = Checkpoint::open(dir.path());
  EXPECT_THAT([&] { load_f32(checkpoint, "mlp.down_proj.weight"); },
              ThrowsMessage<Error>(HasSubstr("tensor mlp.down_proj.weight is F8_E4M3 but its scale "
                                             "mlp.down_proj.weight_scale_inv is missing")));
  EXPECT_THAT([&] { load_f32(checkpoint, "mlp.up_proj.weight"); },
              ThrowsMessage<Error>(HasSubstr("tensor mlp.up_proj.weight is missing from the checkpoint")));
}

TEST(LoadF32, IntegerTensorNamesTheTensor) {
  ScratchDir dir;
  write_safetensors(dir.file("model.safetensors"), {{"positions", Tensor::empty(DType::kI32, {4})}});
  Checkpoint checkpoint = Checkpoint::open(dir.path());
  EXPECT_THAT([&] { load_f32(checkpoint, "positions"); },
              ThrowsMessage<Error>(HasSubstr("positions: cannot convert I32 to F32")));
}

}  // namespace
}  // namespace dsinfer::io
