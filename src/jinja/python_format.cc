#include "jinja/python_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/utf8.h"
#include "jinja/python_str.h"
#include "jinja/limits.h"

namespace dsinfer::jinja {
namespace {

// str.isprintable() is false for control, format, separator (but ' '), surrogate, private-use and
// unassigned characters. This covers the assigned ones that occur in practice; unassigned code
// points print as themselves.
bool is_printable(uint32_t c) {
  static constexpr uint32_t kHidden[][2] = {
      {0x00, 0x1f},       {0x7f, 0xa0},       {0xad, 0xad},       {0x600, 0x605},     {0x61c, 0x61c},
      {0x6dd, 0x6dd},     {0x70f, 0x70f},     {0x1680, 0x1680},   {0x180e, 0x180e},   {0x2000, 0x200f},
      {0x2028, 0x202f},   {0x205f, 0x2064},   {0x2066, 0x206f},   {0x3000, 0x3000},   {0xd800, 0xf8ff},
      {0xfeff, 0xfeff},   {0xfff9, 0xfffb},   {0x110bd, 0x110bd}, {0x1d173, 0x1d17a}, {0xe0001, 0xe0001},
      {0xe0020, 0xe007f}, {0xf0000, 0x10ffff}};
  for (const auto& range : kHidden)
    if (c >= range[0] && c <= range[1]) return false;
  return true;
}

void append_escape(std::string& out, uint32_t c) {
  char buffer[16];
  if (c < 0x100) std::snprintf(buffer, sizeof buffer, "\\x%02x", c);
  else if (c < 0x10000) std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
  else std::snprintf(buffer, sizeof buffer, "\\U%08x", c);
  out += buffer;
}

std::string json_key(const Value& key) {
  if (key.is_string()) return key.as_string();
  if (key.is_bool()) return key.as_bool() ? "true" : "false";
  if (key.is_int()) return std::to_string(key.as_int());
  if (key.is_float()) return format_float(key.as_float());
  if (key.is_none()) return "null";
  throw RenderError(str_cat("keys must be str, int, float, bool or None, not ", type_name(key)));
}

void append_newline(std::string& out, const JsonStyle& style, int depth) {
  out += '\n';
  for (int i = 0; i < depth; ++i) out += style.indent;
}

void append_json(std::string& out, const Value& value, const JsonStyle& style, int depth) {
  if (depth > kMaxValueDepth) throw RenderError("Circular reference detected (or nesting deeper than 256 levels)");
  using Kind = Value::Kind;
  switch (value.kind()) {
    case Kind::kNone: out += "null"; return;
    case Kind::kBool: out += value.as_bool() ? "true" : "false"; return;
    case Kind::kInt: out += std::to_string(value.as_int()); return;
    case Kind::kFloat: {
      double number = value.as_float();
      if (std::isnan(number)) out += "NaN";
      else if (std::isinf(number)) out += number > 0 ? "Infinity" : "-Infinity";
      else out += format_float(number);
      return;
    }
    case Kind::kString: json_escape(out, value.as_string(), style.ensure_ascii); return;
    case Kind::kList: {
      const auto& items = value.as_list().items;
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += style.item_separator;
        if (style.indented) append_newline(out, style, depth + 1);
        append_json(out, items[i], style, depth + 1);
      }
      if (style.indented && !items.empty()) append_newline(out, style, depth);
      out += ']';
      return;
    }
    case Kind::kDict: {
      if (value.is_namespace()) break;
      std::vector<const std::pair<Value, Value>*> entries;
      for (const auto& entry : value.as_dict().entries) entries.push_back(&entry);
      if (style.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto* a, const auto* b) { return less(a->first, b->first); });
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += style.item_separator;
        if (style.indented) append_newline(out, style, depth + 1);
        json_escape(out, json_key(entries[i]->first), style.ensure_ascii);
        out += style.key_separator;
        append_json(out, entries[i]->second, style, depth + 1);
      }
      if (style.indented && !entries.empty()) append_newline(out, style, depth);
      out += '}';
      return;
    }
    default: break;
  }
  throw RenderError(str_cat("Object of type ", type_name(value), " is not JSON serializable"));
}

struct FormatSpec {
  std::string fill = " ";
  char align = 0;  // '<', '>', '^', or '=' (pad between sign and digits)
  char sign = '-';
  int64_t width = 0;
  int64_t precision = -1;
  char type = 0;
};

FormatSpec parse_spec(std::string_view spec) {
  FormatSpec parsed;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  size_t i = 0;
  std::vector<std::string_view> parts = characters(spec);
  if (parts.size() >= 2 && parts[1].size() == 1 && is_align(parts[1][0])) {
    parsed.fill = parts[0];
    parsed.align = parts[1][0];
    i = parts[0].size() + 1;
  } else if (!spec.empty() && is_align(spec[0])) {
    parsed.align = spec[0];
    i = 1;
  }
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) parsed.sign = spec[i++];
  if (i < spec.size() && spec[i] == '0') {
    if (parsed.align == 0) {
      parsed.fill = "0";
      parsed.align = '=';
    }
    ++i;
  }
  auto read_number = [&] {
    int64_t number = 0;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') {
      number = number * 10 + (spec[i++] - '0');
      if (number > static_cast<int64_t>(kMaxValueBytes)) throw RenderError("format width is too large");
    }
    return number;
  };
  parsed.width = read_number();
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    parsed.precision = read_number();
  }
  if (i < spec.size()) parsed.type = spec[i++];
  if (i != spec.size()) throw RenderError(str_cat("invalid format specifier '", spec, "'"));
  return parsed;
}

std::string format_number(const Value& value, const FormatSpec& spec, std::string* sign) {
  double number = value.as_float();
  bool negative = value.is_float() ? std::signbit(number) : value.as_int() < 0;
  std::string digits;
  char type = spec.type;
  if (type == 'd' || (type == 0 && !value.is_float() && spec.precision < 0)) {
    if (value.is_float()) throw RenderError("unknown format code 'd' for object of type 'float'");
    int64_t integer = value.as_int();
    digits = std::to_string(integer);
    if (negative) digits.erase(0, 1);
  } else if (type == 0 && spec.precision < 0) {
    digits = format_float(std::fabs(number));
  } else {
    char conversion = type == 0 ? 'g' : type == '%' ? 'f' : type;
    if (std::string_view("fFeEgG").find(conversion) == std::string_view::npos)
      throw RenderError(str_cat("unknown format code '", type, "' for a number"));
    double shown = std::fabs(type == '%' ? number * 100 : number);
    char format[8] = {'%', '.', '*', conversion, 0};
    char buffer[512];
    int length = std::snprintf(buffer, sizeof buffer, format, static_cast<int>(spec.precision < 0 ? 6 : spec.precision), shown);
    if (length < 0 || static_cast<size_t>(length) >= sizeof buffer) throw RenderError("formatted number is too long");
    digits.assign(buffer, static_cast<size_t>(length));
    if (type == '%') digits += '%';
  }
  sign->clear();
  if (negative) *sign += '-';
  else if (spec.sign == '+' || spec.sign == ' ') *sign += spec.sign;
  return digits;
}

std::string apply_spec(const Value& value, std::string_view spec_text) {
  if (spec_text.empty()) return to_string(value);
  FormatSpec spec = parse_spec(spec_text);
  std::string sign, body;
  bool numeric = value.is_number() && !value.is_bool();
  if (numeric) {
    body = format_number(value, spec, &sign);
  } else {
    if (spec.type != 0 && spec.type != 's')
      throw RenderError(str_cat("unknown format code '", spec.type, "' for object of type '", type_name(value), "'"));
    body = to_string(value);
    if (spec.precision >= 0) {
      std::vector<std::string_view> parts = characters(body);
      if (static_cast<size_t>(spec.precision) < parts.size()) {
        std::string cut;
        for (int64_t i = 0; i < spec.precision; ++i) cut += parts[static_cast<size_t>(i)];
        body = std::move(cut);
      }
    }
  }
  int64_t padding = spec.width - static_cast<int64_t>(character_count(sign) + character_count(body));
  if (padding <= 0) return sign + body;
  char align = spec.align ? spec.align : numeric ? '>' : '<';
  auto fill = [&](int64_t count) {
    std::string out;
    for (int64_t i = 0; i < count; ++i) out += spec.fill;
    return out;
  };
  switch (align) {
    case '<': return sign + body + fill(padding);
    case '^': return fill(padding / 2) + sign + body + fill(padding - padding / 2);
    case '=': return sign + fill(padding) + body;
    default: return fill(padding) + sign + body;
  }
}

}  // namespace

std::string format_string(std::string_view format, const Arguments& arguments) {
  std::string out;
  size_t next_automatic = 0;
  size_t i = 0;
  while (i < format.size()) {
    char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        i += 2;
        continue;
      }
      throw RenderError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      i += 2;
      continue;
    }
    size_t close = format.find('}', i);
    if (close == std::string_view::npos) throw RenderError("Single '{' encountered in format string");
    std::string_view field = format.substr(i + 1, close - i - 1);
    i = close + 1;
    std::string_view spec, conversion;
    if (size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (size_t bang = field.find('!'); bang != std::string_view::npos) {
      conversion = field.substr(bang + 1);
      field = field.substr(0, bang);
    }
    const Value* value = nullptr;
    if (field.empty() || (field.size() < 10 && field.find_first_not_of("0123456789") == std::string_view::npos)) {
      size_t index = field.empty() ? next_automatic++ : static_cast<size_t>(std::stoul(std::string(field)));
      if (index >= arguments.positional.size())
        throw RenderError(str_cat("Replacement index ", index, " out of range for positional args tuple"));
      value = &arguments.positional[index];
    } else {
      for (const auto& [name, argument] : arguments.keyword)
        if (name == field) value = &argument;
      if (value == nullptr) throw RenderError(str_cat("KeyError: '", field, "'"));
    }
    Value converted;
    if (conversion == "r") converted = Value(repr(*value));
    else if (conversion == "s") converted = Value(to_string(*value));
    else if (!conversion.empty()) throw RenderError(str_cat("Unknown conversion specifier ", conversion));
    else converted = *value;
    out += apply_spec(converted, spec);
    if (out.size() > kMaxValueBytes) throw RenderError("formatted string would be too large");
  }
  return out;
}

std::string format_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in the form [-]d[.ddd]e(+|-)xx, then laid out the way repr() does.
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string_view text(buffer, static_cast<size_t>(result.ptr - buffer));
  std::string out;
  if (text.front() == '-') {
    out += '-';
    text.remove_prefix(1);
  }
  size_t e = text.find('e');
  std::string digits;
  for (char c : text.substr(0, e))
    if (c != '.') digits += c;
  int exponent = std::stoi(std::string(text.substr(e + 1)));
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    } else {
      size_t integer_digits = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= integer_digits) {
        out += digits;
        out.append(integer_digits - digits.size(), '0');
        out += ".0";
      } else {
        out += digits.substr(0, integer_digits);
        out += '.';
        out += digits.substr(integer_digits);
      }
    }
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out += digits.substr(1);
  }
  out += exponent < 0 ? "e-" : "e+";
  int magnitude = std::abs(exponent);
  if (magnitude < 10) out += '0';
  out += std::to_string(magnitude);
  return out;
}

void append_quoted(std::string& out, std::string_view text) {
  char quote = text.find('\'') != std::string_view::npos && text.find('"') == std::string_view::npos ? '"' : '\'';
  out += quote;
  size_t i = 0;
  while (i < text.size()) {
    uint32_t c;
    size_t length = utf8_decode(text.substr(i), &c);
    if (length == 0) {  // not UTF-8: show the byte
      append_escape(out, static_cast<unsigned char>(text[i]));
      ++i;
      continue;
    }
    if (c == static_cast<uint32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == ' ' || is_printable(c)) {
      out.append(text.substr(i, length));
    } else {
      append_escape(out, c);
    }
    i += length;
  }
  out += quote;
}

std::string to_json(const Value& value, const JsonStyle& style) {
  std::string out;
  append_json(out, value, style, 0);
  return out;
}

}  // namespace dsinfer::jinja
