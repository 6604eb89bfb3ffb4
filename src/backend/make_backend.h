// Backends by the name users give them (--device cpu|cuda).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace dsinfer::backend {

// Choices a caller may make on any backend; a backend ignores what it has no use for.
struct BackendOptions {
  // FP8 linears multiply the bf16 activations as they are (our one-pass GEMV) instead of quantizing
  // them to e4m3 per token and 128 columns for cuBLASLt, as DeepSeek's inference does: slower for
  // long prompts, and closer to a reference that does not quantize activations (Hugging Face's).
  bool fp8_bf16_activations = false;
};

// "cpu", "cuda" or "cuda:N". Throws a dsinfer::Error a user can act on when this build has no CUDA
// backend or the machine has no such GPU.
std::unique_ptr<Backend> make_backend(const std::string& device, const BackendOptions& options = {});
// Whether this build can make the backend at all (not whether a GPU is present).
bool backend_built(const std::string& device);
// The GPU behind "cuda[:N]" for result files and logs ("cuda: NVIDIA H200 (132 SMs, 139.8 GiB)");
// empty for "cpu".
std::string describe_device(const std::string& device);

}  // namespace dsinfer::backend
