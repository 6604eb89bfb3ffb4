// Typed reads of tokenizer.json / tokenizer_config.json fields, with errors that name the field.
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"
#include "core/json.h"

namespace dsinfer::tokenizer {

// The member `key` of `object`; throws dsinfer::Error "\"key\" is missing" when absent.
inline const Json& required_field(const Json& object, std::string_view key) {
  DSINFER_CHECK(object.is_object(), "expected an object, got ", Json::type_name(object.type()));
  const Json* value = object.find(key);
  DSINFER_CHECK(value, "\"", key, "\" is missing");
  return *value;
}

// A boolean member, `fallback` when absent or null.
inline bool bool_field(const Json& object, std::string_view key, bool fallback) {
  const Json* value = object.find(key);
  if (!value || value->is_null()) return fallback;
  DSINFER_CHECK(value->is_bool(), "\"", key, "\" must be a boolean, got ",
                Json::type_name(value->type()));
  return value->as_bool();
}

// A string member; throws naming the field when absent or not a string.
inline const std::string& string_field(const Json& object, std::string_view key) {
  const Json& value = required_field(object, key);
  DSINFER_CHECK(value.is_string(), "\"", key, "\" must be a string, got ",
                Json::type_name(value.type()));
  return value.as_string();
}

// The "type" of a component such as {"type": "Split", ...}.
inline const std::string& type_field(const Json& component) {
  return string_field(component, "type");
}

}  // namespace dsinfer::tokenizer
