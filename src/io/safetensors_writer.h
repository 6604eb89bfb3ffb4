// Writing safetensors files: test fixtures, and the tools that produce checkpoints.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace dsinfer::io {

using NamedTensor = std::pair<std::string, Tensor>;

// Writes CPU tensors to `path`, listed in the header in the order given. The data region holds them
// by decreasing element size with no gaps, so every tensor is aligned for its dtype and the file
// also satisfies readers that demand contiguous data (the reference implementation does). Throws
// dsinfer::Error naming the path: a repeated name, a tensor not on the CPU, a failed write.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace dsinfer::io
