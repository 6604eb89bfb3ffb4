// The built-in tests, `value is name(arguments)`: defined, none, string, mapping, odd,
// divisibleby, in, eq, lt, ... as jinja2 defines them.
#pragma once

#include <string_view>

#include "jinja/value.h"

namespace dsinfer::jinja {

// nullptr when there is no test of that name.
TestFunction find_test(std::string_view name);

}  // namespace dsinfer::jinja
