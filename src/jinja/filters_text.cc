// Filters of text and numbers: trim, upper, replace, indent, int, round, default, tojson, ...
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/utf8.h"
#include "jinja/arguments.h"
#include "jinja/filters.h"
#include "jinja/limits.h"
#include "jinja/python_format.h"
#include "jinja/python_str.h"

namespace dsinfer::jinja {
namespace {


// The `title` filter differs from str.title: words start after whitespace, '-' and opening
// brackets only, so "they're" stays "They're".
std::string title_words(std::string_view text) {
  std::string out;
  bool word_start = true;
  for (std::string_view character : characters(text)) {
    bool separator = character == "-" || character == "(" || character == "{" || character == "[" || character == "<";
    uint32_t c;
    if (!separator && utf8_decode(character, &c) == character.size() && is_space(c)) separator = true;
    if (separator) {
      out += character;
      word_start = true;
    } else {
      out += word_start ? to_upper(character) : to_lower(character);
      word_start = false;
    }
  }
  return out;
}

Value upper_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("upper", arguments, {});
  return Value(to_upper(to_string(input)));
}

Value lower_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("lower", arguments, {});
  return Value(to_lower(to_string(input)));
}

Value capitalize_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("capitalize", arguments, {});
  return Value(capitalize(to_string(input)));
}

Value title_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("title", arguments, {});
  return Value(title_words(to_string(input)));
}

Value trim_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("trim", arguments, {"chars"});
  std::string text = to_string(input);
  return Value(strip(text, bound.optional_string(0), true, true));
}

Value replace_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("replace", arguments, {"old", "new", "count"}, 2);
  int64_t count = bound.has(2) && !bound[2].is_none() ? bound.integer(2, -1) : -1;
  std::string result = replace(to_string(input), to_string(bound[0]), to_string(bound[1]), count);
  if (result.size() > kMaxValueBytes) throw RenderError("replace(): result would be too large");
  return Value(std::move(result));
}

Value center_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("center", arguments, {"width"});
  int64_t width = bound.integer(0, 80);
  if (width > static_cast<int64_t>(kMaxValueBytes)) throw RenderError("center(): width is too large");
  return Value(center(to_string(input), width, " "));
}

Value indent_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("indent", arguments, {"width", "first", "blank"});
  if (input.is_undefined()) fail_undefined(input);
  std::string indentation;
  if (bound.has(0) && bound[0].is_string()) {
    indentation = bound[0].as_string();
  } else {
    int64_t width = bound.integer(0, 4);
    if (width > 1024) throw RenderError("indent(): width is too large");
    indentation.assign(static_cast<size_t>(std::max<int64_t>(width, 0)), ' ');
  }
  // jinja2 appends a newline first, so that a trailing newline survives splitlines().
  std::vector<std::string> lines = splitlines(to_string(input) + "\n", false);
  if (indentation.size() * lines.size() > kMaxValueBytes) throw RenderError("indent(): result would be too large");
  bool blank = bound.boolean(2, false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) {
      out += '\n';
      if (blank || !lines[i].empty()) out += indentation;
    }
    out += lines[i];
  }
  if (bound.boolean(1, false)) out.insert(0, indentation);
  return Value(std::move(out));
}

// Python's \w, closely enough: letters, digits and '_', and non-ASCII characters that are not
// spaces, punctuation or symbols.
bool is_word_character(uint32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (c < 0xc0) return c == 0xaa || c == 0xb2 || c == 0xb3 || c == 0xb5 || c == 0xb9 || c == 0xba || (c >= 0xbc && c <= 0xbe);
  if (c == 0xd7 || c == 0xf7 || is_space(c)) return false;
  return !((c >= 0x2000 && c <= 0x2bff) || (c >= 0x3000 && c <= 0x303f) || (c >= 0xfe30 && c <= 0xfe4f) ||
           (c >= 0xff00 && c <= 0xff0f) || (c >= 0x1f000 && c <= 0x1faff));
}

Value wordcount_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("wordcount", arguments, {});
  std::string text = to_string(input);
  int64_t words = 0;
  bool in_word = false;
  for (std::string_view character : characters(text)) {
    uint32_t c;
    bool word = utf8_decode(character, &c) == character.size() && is_word_character(c);
    if (word && !in_word) ++words;
    in_word = word;
  }
  return Value(words);
}

std::string html_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value escape_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("escape", arguments, {});
  return Value(html_escape(to_string(input)));
}

// Autoescaping is off in transformers' environment, so marking text safe only makes it a string.
Value safe_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("safe", arguments, {});
  return Value(to_string(input));
}

Value string_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("string", arguments, {});
  return Value(to_string(input));
}

// Python's float(text): surrounding whitespace, '_' between digits, inf and nan.
bool parse_python_float(std::string_view text, double* out) {
  std::string digits(strip(text, std::nullopt, true, true));
  std::string cleaned;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (digits[i] == '_') {
      bool between = i > 0 && i + 1 < digits.size() && std::isdigit(static_cast<unsigned char>(digits[i - 1])) &&
                     std::isdigit(static_cast<unsigned char>(digits[i + 1]));
      if (!between) return false;
      continue;
    }
    cleaned += digits[i];
  }
  if (cleaned.empty() || cleaned.find_first_of("xXpP") != std::string::npos) return false;  // no hex floats
  char* end = nullptr;
  *out = std::strtod(cleaned.c_str(), &end);
  return end == cleaned.c_str() + cleaned.size();
}

// Python's int(text, base): whitespace, sign, '_' separators and, for base 16/8/2 (or 0), a prefix.
bool parse_python_int(std::string_view text, int64_t base, int64_t* out) {
  std::string digits(strip(text, std::nullopt, true, true));
  bool negative = false;
  size_t i = 0;
  if (i < digits.size() && (digits[i] == '+' || digits[i] == '-')) negative = digits[i++] == '-';
  auto has_prefix = [&](char letter) {
    return i + 1 < digits.size() && digits[i] == '0' && (digits[i + 1] | 0x20) == letter;
  };
  if ((base == 16 || base == 0) && has_prefix('x')) base = 16, i += 2;
  else if ((base == 8 || base == 0) && has_prefix('o')) base = 8, i += 2;
  else if ((base == 2 || base == 0) && has_prefix('b')) base = 2, i += 2;
  if (base == 0) base = 10;
  if (base < 2 || base > 36 || i >= digits.size()) return false;
  int64_t value = 0;
  bool previous_digit = false;
  for (; i < digits.size(); ++i) {
    char c = digits[i];
    if (c == '_' && previous_digit && i + 1 < digits.size()) {
      previous_digit = false;
      continue;
    }
    int digit = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? (c | 0x20) - 'a' + 10 : 99;
    if (digit >= base) return false;
    if (__builtin_mul_overflow(value, base, &value) || __builtin_add_overflow(value, digit, &value)) return false;
    previous_digit = true;
  }
  if (!previous_digit) return false;
  *out = negative ? -value : value;
  return true;
}

bool float_to_int(double number, int64_t* out) {
  if (!std::isfinite(number) || std::fabs(number) >= 9.2e18) return false;
  *out = static_cast<int64_t>(number);  // truncates toward zero, as int() does
  return true;
}

Value int_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("int", arguments, {"default", "base"});
  if (input.is_undefined()) fail_undefined(input);
  int64_t result;
  if (input.is_int() || input.is_bool()) return Value(input.as_int());
  if (input.is_float() && float_to_int(input.as_float(), &result)) return Value(result);
  if (input.is_string()) {
    if (parse_python_int(input.as_string(), bound.integer(1, 10), &result)) return Value(result);
    double number;
    if (parse_python_float(input.as_string(), &number) && float_to_int(number, &result)) return Value(result);
  }
  return bound.get(0, Value(0));
}

Value float_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("float", arguments, {"default"});
  if (input.is_undefined()) fail_undefined(input);
  if (input.is_number()) return Value(input.as_float());
  double number;
  if (input.is_string() && parse_python_float(input.as_string(), &number)) return Value(number);
  return bound.get(0, Value(0.0));
}

Value abs_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("abs", arguments, {});
  if (input.is_float()) return Value(std::fabs(input.as_float()));
  if (input.is_int() || input.is_bool()) {
    if (input.as_int() == INT64_MIN) throw RenderError("integer overflow (beyond 64 bits)");
    return Value(input.as_int() < 0 ? -input.as_int() : input.as_int());
  }
  throw RenderError(str_cat("bad operand type for abs(): '", type_name(input), "'"));
}

// Python's round(x, n): the correctly rounded decimal, ties to even (what printf does on glibc).
double round_half_even(double value, int64_t precision) {
  if (!std::isfinite(value)) return value;
  if (precision < 0) {
    double scale = std::pow(10.0, static_cast<double>(-precision));
    return std::nearbyint(value / scale) * scale;
  }
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, "%.*f", static_cast<int>(std::min<int64_t>(precision, 300)), value);
  return std::strtod(buffer, nullptr);
}

Value round_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("round", arguments, {"precision", "method"});
  int64_t precision = bound.integer(0, 0);
  std::string method = bound.string(1, "common");
  if (method != "common" && method != "ceil" && method != "floor")
    throw RenderError("method must be common, ceil or floor");
  if (!input.is_number()) throw RenderError(str_cat("type ", type_name(input), " doesn't define __round__ method"));
  if (method == "common") {
    if (!input.is_float() && precision >= 0) return Value(input.as_int());
    return Value(round_half_even(input.as_float(), precision));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double scaled = input.as_float() * scale;
  return Value((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
}

Value default_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("default", arguments, {"default_value", "boolean"});
  if (input.is_undefined() || (bound.boolean(1, false) && !truthy(input))) return bound.get(0, Value(""));
  return input;
}

// transformers' override: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value tojson_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("tojson", arguments, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonStyle style;
  style.ensure_ascii = bound.boolean(0, false);
  if (bound.has(1) && !bound[1].is_none()) {
    style.indented = true;
    style.item_separator = std::string(1, ',');
    if (bound[1].is_string()) style.indent = bound[1].as_string();
    else style.indent.assign(static_cast<size_t>(std::clamp<int64_t>(bound.integer(1, 0), 0, 1024)), ' ');
  }
  if (bound.has(2) && !bound[2].is_none()) {
    const Value& separators = bound[2];
    if (!separators.is_list() || separators.as_list().items.size() != 2 || !separators.as_list().items[0].is_string() ||
        !separators.as_list().items[1].is_string())
      throw RenderError("tojson(): separators must be an (item_separator, key_separator) pair of strings");
    style.item_separator = separators.as_list().items[0].as_string();
    style.key_separator = separators.as_list().items[1].as_string();
  }
  style.sort_keys = bound.boolean(3, false);
  return Value(to_json(input, style));
}

constexpr NamedFilter kTextFilters[] = {
    {"abs", abs_filter},
    {"capitalize", capitalize_filter},
    {"center", center_filter},
    {"d", default_filter},
    {"default", default_filter},
    {"e", escape_filter},
    {"escape", escape_filter},
    {"float", float_filter},
    {"forceescape", escape_filter},
    {"indent", indent_filter},
    {"int", int_filter},
    {"lower", lower_filter},
    {"replace", replace_filter},
    {"round", round_filter},
    {"safe", safe_filter},
    {"string", string_filter},
    {"title", title_filter},
    {"tojson", tojson_filter},
    {"trim", trim_filter},
    {"upper", upper_filter},
    {"wordcount", wordcount_filter},
};

}  // namespace

std::span<const NamedFilter> text_filters() { return kTextFilters; }

FilterFunction find_filter(std::string_view name) {
  for (auto table : {text_filters(), sequence_filters()})
    for (const NamedFilter& filter : table)
      if (filter.name == name) return filter.function;
  return nullptr;
}

}  // namespace dsinfer::jinja
