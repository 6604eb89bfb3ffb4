// Test support: the chat fixtures live under $DSINFER_SOURCE_DIR, which ctest sets.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/file.h"
#include "core/json.h"

namespace dsinfer::chat {

inline std::string source_path(std::string_view relative) {
  const char* root = std::getenv("DSINFER_SOURCE_DIR");
  if (root == nullptr || *root == '\0')
    throw std::runtime_error("DSINFER_SOURCE_DIR is not set: run the tests through ctest, or export it");
  return str_cat(root, "/", relative);
}

inline Json load_json(std::string_view relative) { return Json::parse(read_file(source_path(relative))); }

}  // namespace dsinfer::chat
