// Element types and the conversions between them.
//
// The checkpoint formats we read store BF16, F16, F32 and FP8 E4M3 (the "fn" variant: no
// infinities, 0x7f/0xff are NaN, largest finite value 448). Compute on the CPU is float32; these
// helpers convert one value at a time and are exact where the target type can hold the value
// (round-to-nearest-even otherwise).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace dsinfer {

enum class DType : uint8_t { kF32, kBF16, kF16, kF8E4M3, kI32, kI64, kU8 };

size_t dtype_size(DType dtype);               // bytes per element
std::string_view dtype_name(DType dtype);     // safetensors spelling: "F32", "BF16", ...
bool parse_dtype(std::string_view name, DType* out);  // safetensors spelling; false if unknown

inline float bf16_to_f32(uint16_t bits) {
  uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, sizeof(value));
  return value;
}

inline uint16_t f32_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);

// FP8 E4M3 (fn): 1 sign, 4 exponent (bias 7), 3 mantissa bits.
float fp8e4m3_to_f32(uint8_t bits);
uint8_t f32_to_fp8e4m3(float value);  // saturates to +-448, NaN stays NaN
inline constexpr float kFp8E4M3Max = 448.0f;

}  // namespace dsinfer
