#include "core/dtype.h"

#include <array>
#include <cmath>

namespace dsinfer {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, 7> kDTypes = {{
    {DType::kF32, "F32", 4},
    {DType::kBF16, "BF16", 2},
    {DType::kF16, "F16", 2},
    {DType::kF8E4M3, "F8_E4M3", 1},
    {DType::kI32, "I32", 4},
    {DType::kI64, "I64", 8},
    {DType::kU8, "U8", 1},
}};

// All 256 FP8 values decoded once; decoding is the hot direction (dequantizing checkpoints).
std::array<float, 256> make_fp8_table() {
  std::array<float, 256> table{};
  for (int bits = 0; bits < 256; ++bits) {
    int sign = bits >> 7;
    int exponent = (bits >> 3) & 0xf;
    int mantissa = bits & 0x7;
    float magnitude;
    if (exponent == 0xf && mantissa == 0x7) {
      magnitude = NAN;
    } else if (exponent == 0) {
      magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m/8 * 2^-6
    } else {
      magnitude = std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
    }
    table[bits] = sign ? -magnitude : magnitude;
  }
  return table;
}

const std::array<float, 256> kFp8Table = make_fp8_table();

}  // namespace

size_t dtype_size(DType dtype) {
  for (const auto& info : kDTypes)
    if (info.dtype == dtype) return info.size;
  return 0;
}

std::string_view dtype_name(DType dtype) {
  for (const auto& info : kDTypes)
    if (info.dtype == dtype) return info.name;
  return "?";
}

bool parse_dtype(std::string_view name, DType* out) {
  for (const auto& info : kDTypes) {
    if (info.name == name) {
      *out = info.dtype;
      return true;
    }
  }
  return false;
}

float f16_to_f32(uint16_t bits) {
  int sign = bits >> 15;
  int exponent = (bits >> 10) & 0x1f;
  int mantissa = bits & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 0x1f) {
    magnitude = mantissa ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(1.0f + mantissa / 1024.0f, exponent - 15);
  }
  return sign ? -magnitude : magnitude;
}

uint16_t f32_to_f16(float value) {
  uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  float magnitude = std::fabs(value);
  if (std::isnan(value)) return sign | 0x7e00;
  if (magnitude >= 65520.0f) return sign | 0x7c00;  // rounds to infinity
  if (magnitude < std::ldexp(1.0f, -14)) {           // subnormal or zero: units of 2^-24
    auto units = static_cast<uint16_t>(std::nearbyint(std::ldexp(magnitude, 24)));
    return sign | units;
  }
  int exponent;
  float fraction = std::frexp(magnitude, &exponent);  // magnitude = fraction * 2^exponent, [0.5, 1)
  auto mantissa = static_cast<uint32_t>(std::nearbyint(std::ldexp(fraction, 11)));  // [1024, 2048]
  if (mantissa == 2048) {
    mantissa = 1024;
    ++exponent;
  }
  uint32_t biased = static_cast<uint32_t>(exponent - 1 + 15);
  if (biased >= 0x1f) return sign | 0x7c00;
  return static_cast<uint16_t>(sign | (biased << 10) | (mantissa - 1024));
}

float fp8e4m3_to_f32(uint8_t bits) { return kFp8Table[bits]; }

uint8_t f32_to_fp8e4m3(float value) {
  if (std::isnan(value)) return 0x7f;
  const uint8_t sign = std::signbit(value) ? 0x80 : 0;
  const float magnitude = std::fabs(value);
  if (magnitude >= kFp8E4M3Max) return sign | 0x7e;  // saturates (448: exponent 15, mantissa 6)
  // Nearest representable value, ties to even: every scaling below is by a power of two (exact), so
  // nearbyint's round-half-even on the mantissa is the rounding. A mantissa that rounds up to 8
  // carries into the exponent: code + 8 is the next binade's first value.
  if (magnitude < std::ldexp(1.0f, -6))  // subnormal (or zero): units of 2^-9, 8 units = 2^-6
    return sign | static_cast<uint8_t>(std::nearbyint(std::ldexp(magnitude, 9)));
  int exponent;
  const float fraction = std::frexp(magnitude, &exponent);  // magnitude = fraction * 2^exponent, [0.5, 1)
  const auto mantissa = static_cast<int>(std::nearbyint(std::ldexp(fraction, 4))) - 8;  // [0, 8]
  return sign | static_cast<uint8_t>(((exponent - 1 + 7) << 3) + mantissa);
}

}  // namespace dsinfer
