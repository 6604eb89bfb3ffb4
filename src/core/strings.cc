#include "core/strings.h"

#include <charconv>
#include <limits>

#include "core/error.h"

namespace dsinfer {

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

std::string_view trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += separator;
    out += parts[i];
  }
  return out;
}

bool parse_int64(std::string_view text, int64_t* out) {
  if (text.empty()) return false;
  const char* first = text.data();
  if (*first == '+') ++first;
  auto [end, error] = std::from_chars(first, text.data() + text.size(), *out);
  return error == std::errc() && end == text.data() + text.size();
}

bool parse_double(std::string_view text, double* out) {
  if (text.empty()) return false;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return error == std::errc() && end == text.data() + text.size();
}

std::vector<int32_t> parse_int_list(std::string_view text, std::string_view what) {
  std::vector<int32_t> values;
  if (trim(text).empty()) return values;
  for (const std::string& part : split(text, ',')) {
    int64_t value;
    DSINFER_CHECK(parse_int64(trim(part), &value) && value >= std::numeric_limits<int32_t>::min() &&
                      value <= std::numeric_limits<int32_t>::max(),
                  what, ": '", part, "' is not an integer");
    values.push_back(static_cast<int32_t>(value));
  }
  return values;
}

}  // namespace dsinfer
