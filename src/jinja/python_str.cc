#include "jinja/python_str.h"

#include <algorithm>

#include "core/utf8.h"

namespace dsinfer::jinja {
namespace {

// One character of text at offset i: its code point (U+FFFD for a stray byte) and length in bytes.
size_t next_character(std::string_view text, size_t i, uint32_t* c) {
  size_t length = utf8_decode(text.substr(i), c);
  if (length == 0) {
    *c = 0xfffd;
    return 1;
  }
  return length;
}

// Pairs of letters at consecutive code points (upper even, lower odd, or the reverse).
bool in_pair_block(uint32_t c, uint32_t first, uint32_t last) { return c >= first && c <= last; }

uint32_t lower_of(uint32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 32;
  if (c == 0x130) return c;  // İ lowers to two characters; handled by to_lower
  if ((in_pair_block(c, 0x100, 0x137) || in_pair_block(c, 0x14a, 0x177)) && c % 2 == 0) return c + 1;
  if ((in_pair_block(c, 0x139, 0x148) || in_pair_block(c, 0x179, 0x17e)) && c % 2 == 1) return c + 1;
  if (c == 0x178) return 0xff;
  if ((c >= 0x391 && c <= 0x3a1) || (c >= 0x3a3 && c <= 0x3ab)) return c + 32;
  if (c == 0x386) return 0x3ac;
  if (c >= 0x388 && c <= 0x38a) return c + 37;
  if (c == 0x38c) return 0x3cc;
  if (c == 0x38e || c == 0x38f) return c + 63;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  if ((in_pair_block(c, 0x460, 0x481) || in_pair_block(c, 0x48a, 0x4bf) || in_pair_block(c, 0x4d0, 0x52f)) &&
      c % 2 == 0)
    return c + 1;
  if (in_pair_block(c, 0x4c1, 0x4ce) && c % 2 == 1) return c + 1;
  if (c == 0x4c0) return 0x4cf;
  if (c >= 0x531 && c <= 0x556) return c + 48;
  if (c >= 0xff21 && c <= 0xff3a) return c + 32;
  return c;
}

uint32_t upper_of(uint32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
  if (c >= 0xe0 && c <= 0xfe && c != 0xf7) return c - 32;
  if (c == 0xff) return 0x178;
  if (c == 0xb5) return 0x39c;
  if (c == 0x131) return 'I';
  if (c == 0x17f) return 'S';
  if ((in_pair_block(c, 0x101, 0x137) || in_pair_block(c, 0x14b, 0x177)) && c % 2 == 1) return c - 1;
  if ((in_pair_block(c, 0x13a, 0x148) || in_pair_block(c, 0x17a, 0x17e)) && c % 2 == 0) return c - 1;
  if ((c >= 0x3b1 && c <= 0x3c1) || (c >= 0x3c3 && c <= 0x3cb)) return c - 32;
  if (c == 0x3c2) return 0x3a3;
  if (c == 0x3ac) return 0x386;
  if (c >= 0x3ad && c <= 0x3af) return c - 37;
  if (c == 0x3cc) return 0x38c;
  if (c == 0x3cd || c == 0x3ce) return c - 63;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  if ((in_pair_block(c, 0x461, 0x481) || in_pair_block(c, 0x48b, 0x4bf) || in_pair_block(c, 0x4d1, 0x52f)) &&
      c % 2 == 1)
    return c - 1;
  if (in_pair_block(c, 0x4c2, 0x4ce) && c % 2 == 0) return c - 1;
  if (c == 0x4cf) return 0x4c0;
  if (c >= 0x561 && c <= 0x586) return c - 48;
  if (c >= 0xff41 && c <= 0xff5a) return c - 32;
  return c;
}

bool is_upper_char(uint32_t c) { return lower_of(c) != c || c == 0x130; }
bool is_lower_char(uint32_t c) { return upper_of(c) != c || c == 0xdf; }

void append_upper(std::string& out, uint32_t c) {
  if (c == 0xdf) out += "SS";  // ß has no single-character capital in Python's mapping
  else utf8_append(out, upper_of(c));
}

void append_lower(std::string& out, uint32_t c) {
  if (c == 0x130) out += "i\xcc\x87";  // İ -> i + combining dot above
  else utf8_append(out, lower_of(c));
}

// Title case of one character: like upper case, except that ß becomes "Ss".
void append_title(std::string& out, uint32_t c) {
  if (c == 0xdf) out += "Ss";
  else append_upper(out, c);
}

template <typename Append>
std::string map_characters(std::string_view text, Append append) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t c;
    size_t length = next_character(text, i, &c);
    if (length == 1 && static_cast<unsigned char>(text[i]) >= 0x80) out += text[i];  // keep stray bytes
    else append(out, c);
    i += length;
  }
  return out;
}

size_t characters_before(std::string_view text, size_t byte_offset) {
  return character_count(text.substr(0, byte_offset));
}

bool contains_character(std::string_view set, std::string_view character) {
  for (std::string_view candidate : characters(set))
    if (candidate == character) return true;
  return false;
}

}  // namespace

bool is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

std::vector<std::string_view> characters(std::string_view text) {
  std::vector<std::string_view> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t c;
    size_t length = next_character(text, i, &c);
    out.push_back(text.substr(i, length));
    i += length;
  }
  return out;
}

size_t character_count(std::string_view text) {
  size_t count = 0;
  for (size_t i = 0; i < text.size(); ++count) {
    uint32_t c;
    i += next_character(text, i, &c);
  }
  return count;
}

std::string_view strip(std::string_view text, const std::optional<std::string>& chars, bool left, bool right) {
  auto strippable = [&](std::string_view character) {
    if (chars) return contains_character(*chars, character);
    uint32_t c;
    return next_character(character, 0, &c) == character.size() && is_space(c);
  };
  std::vector<std::string_view> parts = characters(text);
  size_t begin = 0, end = parts.size();
  if (left)
    while (begin < end && strippable(parts[begin])) ++begin;
  if (right)
    while (end > begin && strippable(parts[end - 1])) --end;
  if (begin == end) return {};
  size_t first = static_cast<size_t>(parts[begin].data() - text.data());
  size_t last = static_cast<size_t>(parts[end - 1].data() - text.data()) + parts[end - 1].size();
  return text.substr(first, last - first);
}

namespace {

std::vector<std::string> split_on_whitespace(std::string_view text, int64_t max_splits, bool from_right) {
  std::vector<std::string_view> parts = characters(text);
  auto space = [&](size_t i) {
    uint32_t c;
    return next_character(parts[i], 0, &c) == parts[i].size() && is_space(c);
  };
  auto join = [&](size_t begin, size_t end) {
    std::string word;
    for (size_t i = begin; i < end; ++i) word += parts[i];
    return word;
  };
  std::vector<std::string> words;
  if (!from_right) {
    size_t i = 0, n = parts.size();
    while (true) {
      while (i < n && space(i)) ++i;
      if (i == n) break;
      if (max_splits >= 0 && static_cast<int64_t>(words.size()) == max_splits) {
        words.push_back(join(i, n));  // the rest, trailing whitespace included
        break;
      }
      size_t start = i;
      while (i < n && !space(i)) ++i;
      words.push_back(join(start, i));
    }
    return words;
  }
  size_t i = parts.size();
  while (true) {
    while (i > 0 && space(i - 1)) --i;
    if (i == 0) break;
    if (max_splits >= 0 && static_cast<int64_t>(words.size()) == max_splits) {
      words.push_back(join(0, i));  // the rest, leading whitespace included
      break;
    }
    size_t end = i;
    while (i > 0 && !space(i - 1)) --i;
    words.push_back(join(i, end));
  }
  std::reverse(words.begin(), words.end());
  return words;
}

}  // namespace

std::vector<std::string> split(std::string_view text, const std::optional<std::string>& separator,
                               int64_t max_splits) {
  if (!separator) return split_on_whitespace(text, max_splits, false);
  std::vector<std::string> parts;
  size_t start = 0;
  while (max_splits < 0 || static_cast<int64_t>(parts.size()) < max_splits) {
    size_t found = text.find(*separator, start);
    if (found == std::string_view::npos) break;
    parts.emplace_back(text.substr(start, found - start));
    start = found + separator->size();
  }
  parts.emplace_back(text.substr(start));
  return parts;
}

std::vector<std::string> rsplit(std::string_view text, const std::optional<std::string>& separator,
                                int64_t max_splits) {
  if (!separator) return split_on_whitespace(text, max_splits, true);
  std::vector<std::string> parts;
  size_t end = text.size();
  while (max_splits < 0 || static_cast<int64_t>(parts.size()) < max_splits) {
    if (end < separator->size()) break;
    size_t found = text.rfind(*separator, end - separator->size());
    if (found == std::string_view::npos) break;
    parts.emplace_back(text.substr(found + separator->size(), end - found - separator->size()));
    end = found;
  }
  parts.emplace_back(text.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> splitlines(std::string_view text, bool keep_ends) {
  std::vector<std::string> lines;
  size_t start = 0, i = 0;
  while (i < text.size()) {
    uint32_t c;
    size_t length = next_character(text, i, &c);
    bool line_break = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e) ||
                      c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!line_break) {
      i += length;
      continue;
    }
    size_t end = i + length;
    if (c == '\r' && end < text.size() && text[end] == '\n') ++end;
    lines.emplace_back(text.substr(start, (keep_ends ? end : i) - start));
    start = i = end;
  }
  if (start < text.size()) lines.emplace_back(text.substr(start));
  return lines;
}

std::string replace(std::string_view text, std::string_view old, std::string_view replacement, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts the replacement around every character
    std::vector<std::string_view> parts = characters(text);
    int64_t done = 0;
    for (std::string_view part : parts) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      out += part;
    }
    if (count < 0 || done < count) out += replacement;
    return out;
  }
  size_t start = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    size_t found = text.find(old, start);
    if (found == std::string_view::npos) break;
    out.append(text.substr(start, found - start));
    out.append(replacement);
    start = found + old.size();
  }
  out.append(text.substr(start));
  return out;
}

int64_t find(std::string_view text, std::string_view needle) {
  size_t found = text.find(needle);
  return found == std::string_view::npos ? -1 : static_cast<int64_t>(characters_before(text, found));
}

int64_t rfind(std::string_view text, std::string_view needle) {
  size_t found = text.rfind(needle);
  return found == std::string_view::npos ? -1 : static_cast<int64_t>(characters_before(text, found));
}

int64_t count(std::string_view text, std::string_view needle) {
  if (needle.empty()) return static_cast<int64_t>(character_count(text)) + 1;
  int64_t n = 0;
  for (size_t found = text.find(needle); found != std::string_view::npos; found = text.find(needle, found + needle.size()))
    ++n;
  return n;
}

std::string to_upper(std::string_view text) { return map_characters(text, append_upper); }

std::string to_lower(std::string_view text) { return map_characters(text, append_lower); }

std::string swap_case(std::string_view text) {
  return map_characters(text, [](std::string& out, uint32_t c) {
    if (is_upper_char(c)) append_lower(out, c);
    else if (is_lower_char(c)) append_upper(out, c);
    else utf8_append(out, c);
  });
}

std::string capitalize(std::string_view text) {
  bool first = true;
  return map_characters(text, [&](std::string& out, uint32_t c) {
    if (first) append_title(out, c);
    else append_lower(out, c);
    first = false;
  });
}

std::string title(std::string_view text) {
  bool previous_cased = false;
  return map_characters(text, [&](std::string& out, uint32_t c) {
    bool cased = is_upper_char(c) || is_lower_char(c);
    if (!cased) utf8_append(out, c);
    else if (previous_cased) append_lower(out, c);
    else append_title(out, c);
    previous_cased = cased;
  });
}

bool is_lower(std::string_view text) {
  bool any_cased = false;
  for (size_t i = 0; i < text.size();) {
    uint32_t c;
    i += next_character(text, i, &c);
    if (is_upper_char(c)) return false;
    any_cased = any_cased || is_lower_char(c);
  }
  return any_cased;
}

bool is_upper(std::string_view text) {
  bool any_cased = false;
  for (size_t i = 0; i < text.size();) {
    uint32_t c;
    i += next_character(text, i, &c);
    if (is_lower_char(c)) return false;
    any_cased = any_cased || is_upper_char(c);
  }
  return any_cased;
}

bool is_whitespace(std::string_view text) {
  if (text.empty()) return false;
  for (size_t i = 0; i < text.size();) {
    uint32_t c;
    i += next_character(text, i, &c);
    if (!is_space(c)) return false;
  }
  return true;
}

std::string center(std::string_view text, int64_t width, std::string_view fill) {
  int64_t margin = width - static_cast<int64_t>(character_count(text));
  if (margin <= 0) return std::string(text);
  int64_t left = margin / 2 + (margin & width & 1);  // CPython's rounding
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += text;
  for (int64_t i = left; i < margin; ++i) out += fill;
  return out;
}

}  // namespace dsinfer::jinja
