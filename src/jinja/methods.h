// The Python methods templates call on values: str (split, strip, startswith, format, ...),
// list (append, index, count), dict (items, keys, values, get) and loop.cycle.
//
// list.append goes beyond transformers, whose sandbox forbids mutating methods; templates that
// build lists with it render here instead of failing.
#pragma once

#include <optional>
#include <string_view>

#include "jinja/value.h"

namespace dsinfer::jinja {

bool has_method(const Value& receiver, std::string_view name);

// nullopt when the receiver has no method of that name.
std::optional<Value> call_method(Interpreter& interpreter, const Value& receiver, std::string_view name,
                                 const Arguments& arguments);

}  // namespace dsinfer::jinja
