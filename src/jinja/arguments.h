// Binds the arguments of a call to a built-in (filter, test, method, global function) to its
// parameters the way Python does: positionals in order, then keywords by name.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/value.h"

namespace dsinfer::jinja {

class BoundArguments {
 public:
  // Throws RenderError naming `function` for surplus positionals, unknown or repeated keywords,
  // and for any of the first `required` parameters left out.
  BoundArguments(std::string_view function, const Arguments& arguments,
                 std::initializer_list<std::string_view> parameters, size_t required = 0);

  bool has(size_t index) const { return values_[index] != nullptr; }
  const Value& operator[](size_t index) const { return *values_[index]; }
  Value get(size_t index, Value fallback) const { return has(index) ? *values_[index] : std::move(fallback); }
  // Typed reads: a value of the wrong type is a RenderError naming the parameter.
  int64_t integer(size_t index, int64_t fallback) const;
  bool boolean(size_t index, bool fallback) const;  // any value, by truthiness
  std::string string(size_t index, std::string fallback) const;
  std::optional<std::string> optional_string(size_t index) const;  // absent or None: nullopt

 private:
  std::string_view function_;
  std::vector<std::string_view> names_;
  std::vector<const Value*> values_;
};

}  // namespace dsinfer::jinja
