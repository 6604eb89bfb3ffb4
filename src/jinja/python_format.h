// Python's text forms of values: repr() of floats and strings, and json.dumps.
//
// Templates print numbers and containers and serialise tool schemas with `tojson`; the model saw
// Python's exact spelling in training (1.0 not 1, 1e-05, single-quoted reprs, ", " separators), so
// these follow CPython byte for byte.
#pragma once

#include <string>
#include <string_view>

#include "jinja/value.h"

namespace dsinfer::jinja {

// repr(float): shortest round-trip digits, exponent form below 1e-4 and from 1e16.
std::string format_float(double value);

// repr(str): single quotes unless the text holds ' and no ", escapes for non-printable characters.
void append_quoted(std::string& out, std::string_view text);

// str.format: {} {0} {name} fields, !s and !r conversions, and format specs of the form
// [[fill]align][sign][0][width][.precision][type] with type s, d, f, e, g or %.
std::string format_string(std::string_view format, const Arguments& arguments);

// json.dumps(value, indent=..., separators=..., sort_keys=..., ensure_ascii=...).
struct JsonStyle {
  bool indented = false;
  std::string indent;  // one level of indentation, when indented
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
std::string to_json(const Value& value, const JsonStyle& style);

}  // namespace dsinfer::jinja
