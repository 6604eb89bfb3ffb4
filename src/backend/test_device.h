// The device the model-level tests run on: the CPU by default, DSINFER_TEST_DEVICE=cuda on a GPU
// machine (scripts/gpu-test.sh). Without a GPU a cuda run fails at the first backend it makes.
#pragma once

#include <cstdlib>
#include <string>

namespace dsinfer::backend {

inline std::string test_device() {
  const char* device = std::getenv("DSINFER_TEST_DEVICE");
  return device ? device : "cpu";
}

}  // namespace dsinfer::backend
