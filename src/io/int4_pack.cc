// Round-to-nearest int4 group quantization and the pack-quantized word layout (int4_pack.h).
//
// Every loop runs under parallel_for, whose bodies must not throw: they record what went wrong
// (a non-finite weight, an overflowing scale, a value outside -8..7) and the caller throws after.
#include "io/int4_pack.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>

#include "core/error.h"
#include "core/parallel.h"
#include "core/strings.h"

namespace dsinfer::io {
namespace {

constexpr int64_t kElementsPerTask = int64_t{1} << 16;
constexpr int kValuesPerWord = 8;
constexpr float kInt4Max = 7.0f;  // the scale maps amax to 7, so -8 is reached only by clamping

int64_t rows_per_task(int64_t cols) { return std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(1, cols)); }

// The value as scale_dtype will store it.
float stored_value(float value, DType scale_dtype) {
  switch (scale_dtype) {
    case DType::kBF16: return bf16_to_f32(f32_to_bf16(value));
    case DType::kF16: return f16_to_f32(f32_to_f16(value));
    default: return value;
  }
}

uint32_t pack_word(const int8_t* values) {
  uint32_t word = 0;
  for (int i = 0; i < kValuesPerWord; ++i)
    word |= (static_cast<uint32_t>(values[i] + 8) & 0xfu) << (4 * i);
  return word;
}

}  // namespace

Int4Groups quantize_int4(std::span<const float> weight, int64_t rows, int64_t cols, int64_t group_size,
                         DType scale_dtype) {
  DSINFER_CHECK(rows >= 0 && cols >= 0 && static_cast<size_t>(rows * cols) == weight.size(), "quantize_int4: ",
                weight.size(), " weights do not make a [", rows, ", ", cols, "] matrix");
  DSINFER_CHECK(group_size > 0 && cols % group_size == 0, "quantize_int4: group size ", group_size,
                " does not divide the ", cols, " columns");
  DSINFER_CHECK(scale_dtype == DType::kF32 || scale_dtype == DType::kBF16 || scale_dtype == DType::kF16,
                "quantize_int4: scales are stored as F32, BF16 or F16, not ", dtype_name(scale_dtype));
  const int64_t groups = cols / group_size;
  Int4Groups out{std::vector<int8_t>(weight.size()), std::vector<float>(static_cast<size_t>(rows * groups))};
  std::vector<int64_t> bad_column(static_cast<size_t>(rows), -1);  // a row's first non-finite weight
  std::vector<uint8_t> overflowed(static_cast<size_t>(rows), 0);   // a row's scale overflowed scale_dtype

  parallel_for(rows, rows_per_task(cols), [&](int64_t row_begin, int64_t row_end) {
    for (int64_t row = row_begin; row < row_end; ++row) {
      for (int64_t group = 0; group < groups; ++group) {
        const int64_t first = row * cols + group * group_size;
        const float* w = weight.data() + first;
        float amax = 0.0f, probe = 0.0f;  // probe: 0 unless some weight is inf or NaN (x * 0 is NaN then)
        for (int64_t k = 0; k < group_size; ++k) {
          amax = std::max(amax, std::fabs(w[k]));
          probe += w[k] * 0.0f;
        }
        if (probe != 0.0f && bad_column[row] < 0) {
          int64_t k = 0;
          while (std::isfinite(w[k])) ++k;
          bad_column[row] = group * group_size + k;
        }
        float scale = stored_value(amax / kInt4Max, scale_dtype);
        if (!std::isfinite(scale)) {
          overflowed[row] = 1;
          scale = 1.0f;
        }
        // amax 0, or a scale too small for scale_dtype: every |w / 1| < 0.5 rounds to 0.
        if (scale == 0.0f) scale = 1.0f;
        out.scales[row * groups + group] = scale;
        int8_t* q = out.values.data() + first;
        for (int64_t k = 0; k < group_size; ++k)
          q[k] = static_cast<int8_t>(std::clamp(std::nearbyint(w[k] / scale), -8.0f, kInt4Max));
      }
    }
  });

  for (int64_t row = 0; row < rows; ++row) {
    DSINFER_CHECK(bad_column[row] < 0, "quantize_int4: the weight at row ", row, ", column ", bad_column[row],
                  " is not finite (", weight[row * cols + bad_column[row]], ")");
    DSINFER_CHECK(!overflowed[row], "quantize_int4: a scale of row ", row, " overflows ", dtype_name(scale_dtype));
  }
  return out;
}

void pack_int4(std::span<const int8_t> values, std::span<int32_t> packed) {
  DSINFER_CHECK(values.size() == packed.size() * kValuesPerWord, "pack_int4: ", values.size(),
                " values do not fill ", packed.size(), " words of ", kValuesPerWord);
  std::atomic<bool> out_of_range{false};
  const auto words = static_cast<int64_t>(packed.size());
  parallel_for(words, kElementsPerTask / kValuesPerWord, [&](int64_t begin, int64_t end) {
    bool in_range = true;
    for (int64_t j = begin; j < end; ++j) {
      const int8_t* word_values = values.data() + j * kValuesPerWord;
      for (int i = 0; i < kValuesPerWord; ++i) in_range &= word_values[i] >= -8 && word_values[i] <= 7;
      packed[j] = std::bit_cast<int32_t>(pack_word(word_values));
    }
    if (!in_range) out_of_range.store(true, std::memory_order_relaxed);
  });
  if (out_of_range.load()) {
    auto bad = std::ranges::find_if(values, [](int8_t value) { return value < -8 || value > 7; });
    throw Error(str_cat("pack_int4: value ", static_cast<int>(*bad), " at index ", bad - values.begin(),
                        " is outside the int4 range -8..7"));
  }
}

void unpack_int4(std::span<const int32_t> packed, std::span<int8_t> values) {
  DSINFER_CHECK(values.size() == packed.size() * kValuesPerWord, "unpack_int4: ", packed.size(),
                " words do not fill ", values.size(), " values");
  const auto words = static_cast<int64_t>(packed.size());
  parallel_for(words, kElementsPerTask / kValuesPerWord, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      const uint32_t word = std::bit_cast<uint32_t>(packed[j]);
      for (int i = 0; i < kValuesPerWord; ++i)
        values[j * kValuesPerWord + i] = static_cast<int8_t>(static_cast<int>((word >> (4 * i)) & 0xfu) - 8);
    }
  });
}

void dequantize_int4(std::span<const int32_t> packed, std::span<const float> scales, int64_t cols,
                     int64_t group_size, std::span<float> out) {
  DSINFER_CHECK(cols > 0 && cols % kValuesPerWord == 0 && group_size > 0 && group_size % kValuesPerWord == 0 &&
                    cols % group_size == 0,
                "dequantize_int4: ", cols, " columns in groups of ", group_size,
                " (both must be multiples of 8, the group dividing the columns)");
  const int64_t words_per_row = cols / kValuesPerWord, groups = cols / group_size;
  const int64_t rows = static_cast<int64_t>(out.size()) / cols;
  DSINFER_CHECK(static_cast<size_t>(rows * cols) == out.size() &&
                    packed.size() == static_cast<size_t>(rows * words_per_row) &&
                    scales.size() == static_cast<size_t>(rows * groups),
                "dequantize_int4: ", packed.size(), " words and ", scales.size(), " scales do not make ",
                out.size(), " values of ", cols, " columns in groups of ", group_size);
  parallel_for(rows, rows_per_task(cols), [&](int64_t row_begin, int64_t row_end) {
    for (int64_t row = row_begin; row < row_end; ++row) {
      for (int64_t j = 0; j < words_per_row; ++j) {
        const uint32_t word = std::bit_cast<uint32_t>(packed[row * words_per_row + j]);
        const float scale = scales[row * groups + j * kValuesPerWord / group_size];
        for (int i = 0; i < kValuesPerWord; ++i)
          out[row * cols + j * kValuesPerWord + i] =
              static_cast<float>(static_cast<int>((word >> (4 * i)) & 0xfu) - 8) * scale;
      }
    }
  });
}

std::vector<NamedTensor> int4_checkpoint_tensors(const std::string& name, const Tensor& weight, int64_t group_size,
                                                 DType scale_dtype) {
  DSINFER_CHECK(weight.dtype() == DType::kF32 && weight.rank() == 2 && name.ends_with(".weight"),
                "int4_checkpoint_tensors: ", name, " must be a float32 [N, K] weight named P.weight");
  const int64_t rows = weight.dim(0), cols = weight.dim(1);
  Int4Groups quantized;
  try {
    quantized = quantize_int4({weight.data<float>(), static_cast<size_t>(weight.numel())}, rows, cols, group_size,
                              scale_dtype);
  } catch (const Error& error) {
    throw Error(str_cat(name, ": ", error.what()));
  }
  Tensor packed = Tensor::empty(DType::kI32, {rows, cols / kValuesPerWord});
  pack_int4(quantized.values, {packed.data<int32_t>(), static_cast<size_t>(packed.numel())});
  Tensor scale = Tensor::empty(scale_dtype, {rows, cols / group_size});
  for (size_t i = 0; i < quantized.scales.size(); ++i) {  // exact: quantize_int4 rounded them to scale_dtype
    const float value = quantized.scales[i];
    switch (scale_dtype) {
      case DType::kBF16: scale.data<uint16_t>()[i] = f32_to_bf16(value); break;
      case DType::kF16: scale.data<uint16_t>()[i] = f32_to_f16(value); break;
      default: scale.data<float>()[i] = value; break;
    }
  }
  Tensor shape = Tensor::empty(DType::kI64, {2});
  shape.data<int64_t>()[0] = rows;
  shape.data<int64_t>()[1] = cols;
  const std::string prefix = name.substr(0, name.size() - 7);  // without ".weight"
  return {{prefix + ".weight_packed", packed}, {prefix + ".weight_scale", scale}, {prefix + ".weight_shape", shape}};
}

Json int4_quantization_config(int64_t group_size) {
  Json weights = Json::object();
  weights["num_bits"] = 4;
  weights["type"] = "int";
  weights["symmetric"] = true;
  weights["strategy"] = "group";
  weights["group_size"] = group_size;
  weights["dynamic"] = false;
  Json group = Json::object();
  // Informative only: dsinfer finds int4 linears by their weight_packed (docs/w4a8.md).
  group["targets"] = Json(Json::Array{Json(R"(re:.*mlp\.experts\.\d+\.(gate|up|down)_proj$)")});
  group["weights"] = std::move(weights);
  group["input_activations"] = nullptr;
  Json config = Json::object();
  config["quant_method"] = "compressed-tensors";
  config["format"] = "pack-quantized";
  config["config_groups"]["group_0"] = std::move(group);
  config["ignore"] = Json::array();
  return config;
}

}  // namespace dsinfer::io
