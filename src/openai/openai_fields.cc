#include "openai/openai_fields.h"

#include "core/error.h"
#include "openai/openai_errors.h"

namespace dsinfer::server {

std::string param_of_path(std::string_view path) {
  std::string param;
  for (char c : path) {
    if (c == '[' && !param.empty()) param += '.';
    param += c;
  }
  return param;
}

void fail_field(std::string_view path, std::string_view what) {
  if (path.empty()) throw invalid_request(str_cat("the request body ", what));
  throw invalid_request(str_cat(path, " ", what), param_of_path(path));
}

RequestFields::RequestFields(const Json& value, std::string path) : value_(value), path_(std::move(path)) {
  if (!value.is_object()) fail_field(path_, str_cat("must be an object, got ", Json::type_name(value.type())));
}

const Json* RequestFields::get(std::string_view key) const {
  const Json* field = value_.find(key);
  return field == nullptr || field->is_null() ? nullptr : field;
}

std::optional<bool> RequestFields::boolean(std::string_view key) const {
  const Json* field = get(key);
  if (field == nullptr) return std::nullopt;
  if (!field->is_bool()) wrong_type(key, "a boolean", *field);
  return field->as_bool();
}

std::optional<int64_t> RequestFields::integer(std::string_view key) const {
  const Json* field = get(key);
  if (field == nullptr) return std::nullopt;
  if (!field->is_number()) wrong_type(key, "an integer", *field);
  try {
    return field->as_int();
  } catch (const Error&) {
    fail(key, str_cat("must be an integer, got ", field->dump()));
  }
}

std::optional<double> RequestFields::number(std::string_view key) const {
  const Json* field = get(key);
  if (field == nullptr) return std::nullopt;
  if (!field->is_number()) wrong_type(key, "a number", *field);
  return field->as_double();
}

std::optional<std::string> RequestFields::string(std::string_view key) const {
  const Json* field = get(key);
  if (field == nullptr) return std::nullopt;
  if (!field->is_string()) wrong_type(key, "a string", *field);
  return field->as_string();
}

const Json::Array* RequestFields::array(std::string_view key) const {
  const Json* field = get(key);
  if (field == nullptr) return nullptr;
  if (!field->is_array()) wrong_type(key, "a list", *field);
  return &field->as_array();
}

const Json* RequestFields::object(std::string_view key) const {
  const Json* field = get(key);
  if (field == nullptr) return nullptr;
  if (!field->is_object()) wrong_type(key, "an object", *field);
  return field;
}

std::string RequestFields::path_of(std::string_view key) const {
  return path_.empty() ? std::string(key) : str_cat(path_, ".", key);
}

void RequestFields::fail(std::string_view key, std::string_view what) const { fail_field(path_of(key), what); }

void RequestFields::wrong_type(std::string_view key, std::string_view expected, const Json& value) const {
  fail(key, str_cat("must be ", expected, ", got ", Json::type_name(value.type())));
}

}  // namespace dsinfer::server
