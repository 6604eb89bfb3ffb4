// Int4 packing and round-to-nearest group quantization (int4_pack.h): the word layout bit by bit,
// round trips, the half-step error bound, and the refusals.
#include "io/int4_pack.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"

namespace dsinfer::io {
namespace {

using ::testing::HasSubstr;

std::vector<float> random_weights(int64_t count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> weights(static_cast<size_t>(count));
  for (float& weight : weights) weight = normal(generator);
  return weights;
}

std::vector<float> dequantized(const Int4Groups& quantized, int64_t cols, int64_t group_size) {
  std::vector<int32_t> packed(quantized.values.size() / 8);
  pack_int4(quantized.values, packed);
  std::vector<float> out(quantized.values.size());
  dequantize_int4(packed, quantized.scales, cols, group_size, out);
  return out;
}

TEST(PackInt4, SixteenValuesInColumnOrderFillTwoWordsNibbleByNibble) {
  std::vector<int8_t> values;
  for (int q = -8; q <= 7; ++q) values.push_back(static_cast<int8_t>(q));
  std::vector<int32_t> packed(2);
  pack_int4(values, packed);
  // word = sum_i (q_i + 8) << 4i: -8..-1 are the nibbles 0..7, 0..7 the nibbles 8..15.
  EXPECT_EQ(static_cast<uint32_t>(packed[0]), 0x76543210u);
  EXPECT_EQ(static_cast<uint32_t>(packed[1]), 0xFEDCBA98u);
  // As little-endian bytes: two values a byte, the lower column in the low nibble.
  unsigned char bytes[8];
  std::memcpy(bytes, packed.data(), sizeof(bytes));
  EXPECT_EQ(bytes[0], 0x10);
  EXPECT_EQ(bytes[3], 0x76);
  EXPECT_EQ(bytes[4], 0x98);
  EXPECT_EQ(bytes[7], 0xFE);

  std::vector<int8_t> unpacked(values.size());
  unpack_int4(packed, unpacked);
  EXPECT_EQ(unpacked, values);
}

TEST(PackInt4, RandomValuesSurviveARoundTrip) {
  std::mt19937 generator(7);
  std::uniform_int_distribution<int> int4(-8, 7);
  std::vector<int8_t> values(64 * 1024 + 8 * 3);  // several parallel tasks and a ragged end
  for (int8_t& value : values) value = static_cast<int8_t>(int4(generator));
  std::vector<int32_t> packed(values.size() / 8);
  pack_int4(values, packed);
  std::vector<int8_t> unpacked(values.size());
  unpack_int4(packed, unpacked);
  EXPECT_EQ(unpacked, values);
}

TEST(PackInt4, RefusesValuesOutsideInt4AndSizesThatDisagree) {
  std::vector<int8_t> values(16, 0);
  values[11] = 8;
  std::vector<int32_t> packed(2);
  EXPECT_THAT([&] { pack_int4(values, packed); },
              ::testing::ThrowsMessage<Error>(HasSubstr("value 8 at index 11 is outside the int4 range")));
  std::vector<int32_t> too_few(1);
  EXPECT_THROW(pack_int4(std::vector<int8_t>(16, 0), too_few), Error);
}

TEST(QuantizeInt4, EveryWeightIsWithinHalfAScaleOfItsDequantizedValue) {
  const int64_t rows = 24, cols = 512, group_size = 128;
  std::vector<float> weights = random_weights(rows * cols, 1);
  for (DType scale_dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtype_name(scale_dtype));
    Int4Groups quantized = quantize_int4(weights, rows, cols, group_size, scale_dtype);
    ASSERT_EQ(quantized.scales.size(), static_cast<size_t>(rows * cols / group_size));
    std::vector<float> restored = dequantized(quantized, cols, group_size);
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t group = 0; group < cols / group_size; ++group) {
        float amax = 0;
        for (int64_t k = group * group_size; k < (group + 1) * group_size; ++k)
          amax = std::max(amax, std::fabs(weights[row * cols + k]));
        const float scale = quantized.scales[row * (cols / group_size) + group];
        if (scale_dtype == DType::kF32) {
          EXPECT_EQ(scale, amax / 7.0f);
        }
        EXPECT_NEAR(scale, amax / 7.0f, amax / 7.0f * 1e-2f);
        for (int64_t k = group * group_size; k < (group + 1) * group_size; ++k) {
          const int64_t i = row * cols + k;
          ASSERT_GE(quantized.values[i], -8);
          ASSERT_LE(quantized.values[i], 7);
          ASSERT_LE(std::fabs(weights[i] - restored[i]), scale * (0.5f + 1e-6f)) << "row " << row << " column " << k;
        }
      }
    }
  }
}

TEST(QuantizeInt4, AnAllZeroGroupGetsScaleOneAndZeroValues) {
  std::vector<float> weights(2 * 16, 0.0f);
  for (int k = 8; k < 16; ++k) weights[k] = 0.25f * static_cast<float>(k - 8);  // row 0, group 1
  Int4Groups quantized = quantize_int4(weights, 2, 16, 8);
  EXPECT_EQ(quantized.scales, (std::vector<float>{1.0f, 0.25f, 1.0f, 1.0f}));
  for (int k = 0; k < 8; ++k) EXPECT_EQ(quantized.values[k], 0);
  for (int k = 16; k < 32; ++k) EXPECT_EQ(quantized.values[k], 0);
}

TEST(QuantizeInt4, ValuesOnTheGridOfAPowerOfTwoScaleComeBackExactly) {
  // amax = 7 * 2^-6 in every group, so the scale is 2^-6 and every multiple of it in -8..7 is exact.
  const int64_t rows = 3, cols = 32, group_size = 16;
  std::vector<float> weights(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) weights[i] = std::ldexp(static_cast<float>(i % 15 - 7), -6);
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t group = 0; group < cols / group_size; ++group)
      weights[row * cols + group * group_size] = std::ldexp(7.0f, -6);
  Int4Groups quantized = quantize_int4(weights, rows, cols, group_size, DType::kBF16);
  for (float scale : quantized.scales) EXPECT_EQ(scale, std::ldexp(1.0f, -6));
  EXPECT_EQ(dequantized(quantized, cols, group_size), weights);
}

TEST(QuantizeInt4, HalfStepsRoundToEven) {
  // scale 1 (amax 7): 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> 0, -1.5 -> -2, -2.5 -> -2.
  std::vector<float> weights{7.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.25f};
  Int4Groups quantized = quantize_int4(weights, 1, 8, 8);
  EXPECT_EQ(quantized.scales, std::vector<float>{1.0f});
  EXPECT_EQ(quantized.values, (std::vector<int8_t>{7, 0, 2, 2, 0, -2, -2, 3}));
}

TEST(QuantizeInt4, BfloatScalesAreRoundedBeforeTheValuesAreComputed) {
  // amax 1: 1/7 is not a bfloat16, so the stored scale differs from amax / 7; the values are
  // computed against the stored one.
  std::vector<float> weights{1.0f, 0.3f, -0.6f, 0.9f, 0.0f, 0.1f, -1.0f, 0.45f};
  Int4Groups quantized = quantize_int4(weights, 1, 8, 8, DType::kBF16);
  const float stored = bf16_to_f32(f32_to_bf16(1.0f / 7.0f));
  ASSERT_NE(stored, 1.0f / 7.0f);
  EXPECT_EQ(quantized.scales, std::vector<float>{stored});
  for (size_t k = 0; k < weights.size(); ++k)
    EXPECT_EQ(quantized.values[k], std::clamp(std::nearbyint(weights[k] / stored), -8.0f, 7.0f)) << k;
}

TEST(QuantizeInt4, RefusesNonFiniteWeightsAndGroupsThatDoNotDivideTheColumns) {
  std::vector<float> weights(2 * 16, 0.5f);
  weights[16 + 5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT([&] { quantize_int4(weights, 2, 16, 8); },
              ::testing::ThrowsMessage<Error>(HasSubstr("the weight at row 1, column 5 is not finite")));
  weights[16 + 5] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(quantize_int4(weights, 2, 16, 8), Error);
  weights[16 + 5] = 0.5f;
  EXPECT_THAT([&] { quantize_int4(weights, 2, 16, 12); },
              ::testing::ThrowsMessage<Error>(HasSubstr("group size 12 does not divide the 16 columns")));
  EXPECT_THROW(quantize_int4(weights, 3, 16, 8), Error);
  std::vector<float> huge(8, 1e6f);
  EXPECT_THAT([&] { quantize_int4(huge, 1, 8, 8, DType::kF16); },
              ::testing::ThrowsMessage<Error>(HasSubstr("overflows F16")));
}

}  // namespace
}  // namespace dsinfer::io
