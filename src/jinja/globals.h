// The global functions of transformers' template environment: jinja2's range, dict and
// namespace, and transformers' raise_exception and strftime_now.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace dsinfer::jinja {

const std::vector<std::pair<std::string, Value>>& global_functions();

}  // namespace dsinfer::jinja
