// NumPy .npy files (format 1.0/2.0, little-endian, C order): logits out, fixtures in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace dsinfer {

// Writes a CPU tensor of F32, I32 or I64 as .npy. Throws dsinfer::Error naming the path.
void write_npy(const std::string& path, const Tensor& tensor);
// Reads a .npy of float32, int32 or int64 ('<f4', '<i4', '<i8'). Throws dsinfer::Error naming the path.
Tensor read_npy(const std::string& path);

}  // namespace dsinfer
