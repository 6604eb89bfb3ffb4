// Test support: the chat fixtures live under $DSINFER_SOURCE_DIR, which ctest sets (core/source_path.h).
#pragma once

#include <string_view>

#include "core/file.h"
#include "core/json.h"
#include "core/source_path.h"

namespace dsinfer::jinja {

using dsinfer::source_path;

inline Json load_json(std::string_view relative) { return Json::parse(read_file(source_path(relative))); }

}  // namespace dsinfer::jinja
