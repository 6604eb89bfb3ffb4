// Reading parts of values the way jinja2 does: `x.name`, `x[key]` and `x[a:b:c]`.
//
// A missing key, attribute or index gives an undefined value rather than an error, so that
// `message.tool_calls is defined` works; using that undefined value further is the error. As in
// jinja2, `x.name` prefers a method of that name over a dict key, and `x[key]` the reverse.
#pragma once

#include <string_view>

#include "jinja/value.h"

namespace dsinfer::jinja {

Value get_attribute(const Value& object, std::string_view name);
Value get_item(const Value& object, const Value& key);
// Bounds may be none (left out). Python's slicing on str, list and tuple.
Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step);

}  // namespace dsinfer::jinja
