// Files of the repository for tests and benchmarks: $DSINFER_SOURCE_DIR (ctest sets it) joined
// with a relative path. Throws dsinfer::Error when the variable is unset, so that a test run
// outside ctest fails loudly instead of passing with nothing checked.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"

namespace dsinfer {

inline std::string source_path(std::string_view relative) {
  const char* root = std::getenv("DSINFER_SOURCE_DIR");
  if (root == nullptr || *root == '\0')
    throw Error("DSINFER_SOURCE_DIR is not set (run the tests through ctest, or export it)");
  return str_cat(root, "/", relative);
}

}  // namespace dsinfer
