#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace dsinfer
