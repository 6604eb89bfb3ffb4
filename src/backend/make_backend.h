// Backends by the name users give them (--device cpu|cuda).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace dsinfer::backend {

// "cpu", "cuda" or "cuda:N". Throws a dsinfer::Error a user can act on when this build has no CUDA
// backend or the machine has no such GPU.
std::unique_ptr<Backend> make_backend(const std::string& device);
// Whether this build can make the backend at all (not whether a GPU is present).
bool backend_built(const std::string& device);
// The GPU behind "cuda[:N]" for result files and logs ("cuda: NVIDIA H200 (132 SMs, 139.8 GiB)");
// empty for "cpu".
std::string describe_device(const std::string& device);

}  // namespace dsinfer::backend
