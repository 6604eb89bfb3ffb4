#include "structured/xgrammar_error.h"

#include <cctype>

namespace dsinfer::structured {
namespace {

// The position just past "file:123: " when `text` starts with "[time] file:123: ", else 0.
size_t location_prefix_end(std::string_view text) {
  // "[HH:MM:SS] "
  constexpr std::string_view kTimeShape = "[00:00:00] ";
  if (text.size() < kTimeShape.size()) return 0;
  for (size_t i = 0; i < kTimeShape.size(); ++i) {
    bool digit = std::isdigit(static_cast<unsigned char>(text[i]));
    if (kTimeShape[i] == '0' ? !digit : text[i] != kTimeShape[i]) return 0;
  }
  for (size_t colon = text.find(':', kTimeShape.size()); colon != std::string_view::npos;
       colon = text.find(':', colon + 1)) {
    size_t digits = colon + 1;
    while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
    if (digits > colon + 1 && text.substr(digits, 2) == ": ") return digits + 2;
  }
  return 0;
}

}  // namespace

std::string user_message(std::string_view what) {
  what.remove_prefix(location_prefix_end(what));
  // XGRAMMAR_CHECK's "Check failed: (condition) is false: " names their code, not the input.
  if (what.rfind("Check failed: ", 0) == 0) {
    size_t end = what.find(" is false: ");
    if (end != std::string_view::npos) what.remove_prefix(end + 11);
  }
  while (!what.empty() && std::isspace(static_cast<unsigned char>(what.back()))) what.remove_suffix(1);
  std::string out;
  out.reserve(what.size());
  for (char c : what) out += c == '\n' ? ' ' : c;
  return out;
}

}  // namespace dsinfer::structured
