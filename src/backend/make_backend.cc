#include "backend/make_backend.h"

#include <cstdio>
#include <limits>

#include "core/error.h"

#ifdef DSINFER_HAS_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace dsinfer::backend {
namespace {

bool is_cuda(const std::string& device) { return device == "cuda" || device.rfind("cuda:", 0) == 0; }

}  // namespace

bool backend_built(const std::string& device) {
  if (device == "cpu") return true;
#ifdef DSINFER_HAS_CUDA
  return is_cuda(device);
#else
  return false;
#endif
}

std::string describe_device(const std::string& device) {
  if (!is_cuda(device)) return "";
#ifdef DSINFER_HAS_CUDA
  int index = device.size() > 5 ? std::stoi(device.substr(5)) : 0;
  cuda::CudaDeviceInfo info = cuda::device_info(index);
  char text[160];
  std::snprintf(text, sizeof(text), "cuda: %s (%d SMs, %.1f GiB)", info.name.c_str(), info.multiprocessors,
                static_cast<double>(info.total_bytes) / (1 << 30));
  return text;
#else
  return "";
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& device, const BackendOptions& backend_options) {
  if (device == "cpu") return make_cpu_backend();
  DSINFER_CHECK(is_cuda(device), "--device ", device, " is not known (cpu, cuda, cuda:N)");
#ifdef DSINFER_HAS_CUDA
  cuda::CudaOptions options;
  if (device.size() > 5) {
    std::string index = device.substr(5);
    DSINFER_CHECK(!index.empty() && index.find_first_not_of("0123456789") == std::string::npos,
                  "--device ", device, ": the GPU index must be a number");
    options.device = std::stoi(index);
  }
  if (backend_options.fp8_bf16_activations) options.fp8_gemv_max_rows = std::numeric_limits<int64_t>::max();
  return cuda::make_cuda_backend(options);
#else
  throw Error(str_cat("--device ", device, ": this build has no CUDA backend (nvcc was not found when it was configured)"));
#endif
}

}  // namespace dsinfer::backend
