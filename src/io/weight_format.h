// Stored weight formats turned into float32 for the CPU backend.
//
// The published DeepSeek-V3/R1 checkpoints keep most linear weights as FP8 E4M3 with one float32
// scale per 128x128 block (`NAME.weight_scale_inv`, shape [ceil(N/128), ceil(K/128)]):
// w[n][k] = fp8(q[n][k]) * scale_inv[n/128][k/128].
#pragma once

#include <string_view>

#include "core/tensor.h"
#include "io/checkpoint.h"

namespace dsinfer::io {

// Any stored float tensor (F32, BF16, F16) as a new float32 CPU tensor of the same shape. F8_E4M3
// converts too, as raw unscaled values; block-scaled weights go through dequantize_fp8_blocks.
Tensor to_f32(const Tensor& stored);

// q: [N, K] F8_E4M3; scale_inv: [ceil(N/block_n), ceil(K/block_k)] F32 (or BF16). Returns [N, K] F32.
// Throws dsinfer::Error naming `name` when the shapes disagree.
Tensor dequantize_fp8_blocks(const Tensor& q, const Tensor& scale_inv, int block_n, int block_k,
                             std::string_view name);

// Loads checkpoint tensor `name` as float32: dequantizes FP8 with `name`_scale_inv (the name with
// ".weight" replaced by ".weight_scale_inv") using the given block size, converts other dtypes.
Tensor load_f32(const Checkpoint& checkpoint, std::string_view name, int block_n = 128, int block_k = 128);

}  // namespace dsinfer::io
