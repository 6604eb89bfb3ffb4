// Int4 weights in compressed-tensors' pack-quantized layout (docs/w4a8.md): round-to-nearest
// group quantization, packing eight values to a 32-bit word, and the way back.
//
// For a weight w [N, K] (float32, row-major) and groups of G consecutive columns (G divides K):
//
//   scale[n, g] = amax(|w[n, gG .. gG + G)|) / 7            [N, K / G]; 1 where the amax is 0
//   q[n, k]     = clamp(nearbyint(w[n, k] / scale[n, k / G]), -8, 7)    [N, K], symmetric int4
//   w'[n, k]    = q[n, k] * scale[n, k / G]                             |w - w'| <= scale / 2
//
// nearbyint rounds half to even, as torch.round does in llm-compressor's quantizer. Packed, q[n, 8j + i]
// sits in bits 4i..4i+3 of word j of row n as q + 8 (offset binary, 0..15):
//
//   packed[n, j] = sum_i (q[n, 8j + i] + 8) << 4i                     [N, K / 8] int32
//
// so the words' little-endian bytes hold the values in column order, two to a byte, the lower
// column in the low nibble. Since K is a multiple of 8, packing is the same over rows or the whole
// flat array: the functions below take flat spans.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/json.h"
#include "io/safetensors_writer.h"

namespace dsinfer::io {

struct Int4Groups {
  std::vector<int8_t> values;  // [rows, cols], each in -8..7
  std::vector<float> scales;   // [rows, cols / group_size], each exact in the scale dtype asked for
};

// Quantizes weight [rows, cols] in groups of group_size columns (positive, dividing cols). Each
// scale is rounded to scale_dtype (F32, BF16 or F16: how it will be stored) before the values are
// computed against it, so that the bound |w - q * stored scale| <= scale / 2 holds for the stored
// scale. A group whose scale rounds to 0 in that dtype is treated as all zeros (scale 1, q 0).
// Throws dsinfer::Error for a non-finite weight (naming its row and column), a scale that overflows
// scale_dtype, or sizes that disagree.
Int4Groups quantize_int4(std::span<const float> weight, int64_t rows, int64_t cols, int64_t group_size,
                         DType scale_dtype = DType::kF32);

// values [rows, cols] in -8..7 -> packed [rows, cols / 8]; packed.size() * 8 == values.size().
// Throws dsinfer::Error for a size mismatch or a value outside -8..7.
void pack_int4(std::span<const int8_t> values, std::span<int32_t> packed);
// packed [rows, cols / 8] -> values [rows, cols], each in -8..7.
void unpack_int4(std::span<const int32_t> packed, std::span<int8_t> values);

// A float32 weight [N, K] (name "P.weight") quantized as above, as the checkpoint stores it in place
// of P.weight (docs/w4a8.md): P.weight_packed I32 [N, K / 8], P.weight_scale [N, K / G] in
// scale_dtype, P.weight_shape I64 {N, K}. Throws as quantize_int4 does, naming the weight.
std::vector<NamedTensor> int4_checkpoint_tensors(const std::string& name, const Tensor& weight, int64_t group_size,
                                                 DType scale_dtype);

// config.json's quantization_config for such a checkpoint (docs/w4a8.md): compressed-tensors'
// pack-quantized, symmetric int4 in groups of group_size, no activation scheme.
Json int4_quantization_config(int64_t group_size);

// w' [rows, cols] from packed [rows, cols / 8] and scales [rows, cols / group_size].
void dequantize_int4(std::span<const int32_t> packed, std::span<const float> scales, int64_t cols,
                     int64_t group_size, std::span<float> out);

}  // namespace dsinfer::io
