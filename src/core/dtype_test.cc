#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace dsinfer {
namespace {

TEST(DType, NamesRoundTrip) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kI32, DType::kI64}) {
    DType parsed;
    ASSERT_TRUE(parse_dtype(dtype_name(dtype), &parsed));
    EXPECT_EQ(parsed, dtype);
  }
  DType ignored;
  EXPECT_FALSE(parse_dtype("F8_E5M2_X", &ignored));
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kF8E4M3), 1u);
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  // 1 + 2^-8 lies exactly between two bf16 values: ties go to the even one (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3 * 2^-8 lies between 1+2^-7 (odd) and 1+2^-6 (even): rounds up to even.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(DType, F16Values) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  for (float value : {0.0f, 1.0f, -0.5f, 65504.0f, 0.0001f, 3.14159f, std::ldexp(1.0f, -24)}) {
    EXPECT_EQ(f16_to_f32(f32_to_f16(value)), f16_to_f32(f32_to_f16(f16_to_f32(f32_to_f16(value)))));
    EXPECT_NEAR(f16_to_f32(f32_to_f16(value)), value, std::fabs(value) * 1e-3 + 1e-7);
  }
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(1e6f))));
}

TEST(DType, Fp8E4M3Values) {
  EXPECT_EQ(fp8e4m3_to_f32(0x38), 1.0f);          // exponent 7, mantissa 0
  EXPECT_EQ(fp8e4m3_to_f32(0x7e), 448.0f);        // largest finite
  EXPECT_EQ(fp8e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(fp8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_TRUE(std::isnan(fp8e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(fp8e4m3_to_f32(0xff)));
  EXPECT_EQ(f32_to_fp8e4m3(1000.0f), 0x7e);       // saturates
  EXPECT_EQ(f32_to_fp8e4m3(-1000.0f), 0xfe);
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7f) == 0x7f) continue;
    EXPECT_EQ(f32_to_fp8e4m3(fp8e4m3_to_f32(static_cast<uint8_t>(code))), code == 0x80 ? 0x80 : code);
  }
  // 1.0625 lies between 1.0 (0x38, even) and 1.125 (0x39): ties to even.
  EXPECT_EQ(f32_to_fp8e4m3(1.0625f), 0x38);
}

// The conversion is the nearest code, ties to the even one, saturating: a step function of the
// magnitude, so it is right everywhere when it is right at every step. Against a scan of the 127
// codes (the definition) at each midpoint between neighbouring codes, the floats either side of it,
// and beyond the largest code.
TEST(DType, Fp8E4M3RoundsToNearestEvenAtEveryStep) {
  auto scan = [](float value) {
    const uint8_t sign = std::signbit(value) ? 0x80 : 0;
    const float magnitude = std::fmin(std::fabs(value), kFp8E4M3Max);
    uint8_t best = 0;
    float best_error = INFINITY;
    for (uint8_t code = 0; code < 0x7f; ++code) {
      const float error = std::fabs(fp8e4m3_to_f32(code) - magnitude);
      if (error < best_error || (error == best_error && (code & 1) == 0)) best = code, best_error = error;
    }
    return static_cast<uint8_t>(sign | best);
  };
  std::vector<float> probes = {0.0f, -0.0f, 448.0f, 460.0f, 464.0f, 1e30f, INFINITY, -INFINITY,
                               std::ldexp(1.0f, -40), std::numeric_limits<float>::denorm_min()};
  for (int code = 0; code < 0x7e; ++code) {
    const float low = fp8e4m3_to_f32(static_cast<uint8_t>(code)), high = fp8e4m3_to_f32(static_cast<uint8_t>(code + 1));
    const float middle = 0.5f * (low + high);  // exact: both are on a grid far coarser than f32's
    for (float probe : {low, middle, std::nextafter(middle, 0.0f), std::nextafter(middle, INFINITY), high})
      probes.push_back(probe);
  }
  for (float probe : probes)
    for (float value : {probe, -probe}) EXPECT_EQ(f32_to_fp8e4m3(value), scan(value)) << value;
  EXPECT_EQ(f32_to_fp8e4m3(NAN), 0x7f);
}

}  // namespace
}  // namespace dsinfer
