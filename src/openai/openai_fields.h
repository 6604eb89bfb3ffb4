// Typed reading of one JSON object of a request body, where every mismatch becomes a 400
// ProtocolError that names the field: the message says "messages[2].content must be a string,
// got integer" and param is "messages.[2].content", the path form OpenAI puts in `param`.
//
// A null field reads as absent, as the OpenAI API treats it (clients send null for "default").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/json.h"

namespace dsinfer::server {

class RequestFields {
 public:
  // path is where value sits in the body ("" for the body itself, "messages[2]" for a message);
  // value must outlive the reader. Throws the 400 naming path when value is not an object.
  RequestFields(const Json& value, std::string path);

  // nullptr when the field is absent or null.
  const Json* get(std::string_view key) const;

  std::optional<bool> boolean(std::string_view key) const;
  std::optional<int64_t> integer(std::string_view key) const;  // 2.0 counts; 2.5 does not
  std::optional<double> number(std::string_view key) const;
  std::optional<std::string> string(std::string_view key) const;
  const Json::Array* array(std::string_view key) const;
  const Json* object(std::string_view key) const;

  // "messages[2].content" for key "content".
  std::string path_of(std::string_view key) const;
  // Throws a 400 ProtocolError "<path of key> <what>" with the field's param.
  [[noreturn]] void fail(std::string_view key, std::string_view what) const;

 private:
  [[noreturn]] void wrong_type(std::string_view key, std::string_view expected, const Json& value) const;

  const Json& value_;
  std::string path_;
};

// The `param` OpenAI reports for a field path: "messages[2].content" -> "messages.[2].content".
std::string param_of_path(std::string_view path);

// Throws the 400 ProtocolError "<path> <what>" (an empty path names the request body).
[[noreturn]] void fail_field(std::string_view path, std::string_view what);

}  // namespace dsinfer::server
