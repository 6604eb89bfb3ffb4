#include "jinja/arguments.h"

namespace dsinfer::jinja {

BoundArguments::BoundArguments(std::string_view function, const Arguments& arguments,
                               std::initializer_list<std::string_view> parameters, size_t required)
    : function_(function), names_(parameters), values_(parameters.size(), nullptr) {
  if (arguments.positional.size() > values_.size())
    throw RenderError(str_cat(function, "() takes at most ", values_.size(), " argument(s) (",
                              arguments.positional.size(), " given)"));
  for (size_t i = 0; i < arguments.positional.size(); ++i) values_[i] = &arguments.positional[i];
  for (const auto& [name, value] : arguments.keyword) {
    size_t index = 0;
    while (index < names_.size() && names_[index] != name) ++index;
    if (index == names_.size())
      throw RenderError(str_cat(function, "() got an unexpected keyword argument '", name, "'"));
    if (values_[index] != nullptr)
      throw RenderError(str_cat(function, "() got multiple values for argument '", name, "'"));
    values_[index] = &value;
  }
  for (size_t i = 0; i < required && i < values_.size(); ++i)
    if (values_[i] == nullptr)
      throw RenderError(str_cat(function, "() missing required argument '", names_[i], "'"));
}

int64_t BoundArguments::integer(size_t index, int64_t fallback) const {
  if (!has(index)) return fallback;
  const Value& value = *values_[index];
  if (!value.is_int() && !value.is_bool())
    throw RenderError(str_cat(function_, "(): '", names_[index], "' must be an integer, not ", type_name(value)));
  return value.as_int();
}

bool BoundArguments::boolean(size_t index, bool fallback) const {
  return has(index) ? truthy(*values_[index]) : fallback;
}

std::string BoundArguments::string(size_t index, std::string fallback) const {
  if (!has(index)) return fallback;
  const Value& value = *values_[index];
  if (!value.is_string())
    throw RenderError(str_cat(function_, "(): '", names_[index], "' must be a string, not ", type_name(value)));
  return value.as_string();
}

std::optional<std::string> BoundArguments::optional_string(size_t index) const {
  if (!has(index) || values_[index]->is_none()) return std::nullopt;
  return string(index, {});
}

}  // namespace dsinfer::jinja
