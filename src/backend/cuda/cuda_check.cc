// The error path of DSINFER_CUDA_CHECK: turns a failed CUDA call into a dsinfer::Error that names
// the error, the call and where it was made, so a user's bug report says what failed.
#include "backend/cuda/cuda_check.h"

namespace dsinfer::backend::cuda {

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  throw Error(str_cat("CUDA error: ", cudaGetErrorString(status), " (", cudaGetErrorName(status), ") in ", call,
                      " at ", file, ":", line));
}

}  // namespace dsinfer::backend::cuda
