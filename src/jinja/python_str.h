// Python str semantics over UTF-8 text: characters are code points, whitespace is Unicode
// whitespace, and case mapping covers Latin, Greek, Cyrillic, Armenian and fullwidth letters.
//
// Templates call str methods (split, strip, title, ...) and filters built on them on message
// content, which is any language; byte-level versions would cut characters in half.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dsinfer::jinja {

bool is_space(uint32_t c);  // str.isspace() for one character

// The characters of text; a byte that is not part of valid UTF-8 counts as one character.
std::vector<std::string_view> characters(std::string_view text);
size_t character_count(std::string_view text);

// str.strip/lstrip/rstrip; chars == nullopt strips whitespace.
std::string_view strip(std::string_view text, const std::optional<std::string>& chars, bool left, bool right);

// str.split and str.rsplit; separator == nullopt splits on runs of whitespace. max_splits < 0: all.
std::vector<std::string> split(std::string_view text, const std::optional<std::string>& separator,
                               int64_t max_splits);
std::vector<std::string> rsplit(std::string_view text, const std::optional<std::string>& separator,
                                int64_t max_splits);
std::vector<std::string> splitlines(std::string_view text, bool keep_ends);

std::string replace(std::string_view text, std::string_view old, std::string_view replacement, int64_t count);
// Index in characters of the first (last) occurrence, or -1.
int64_t find(std::string_view text, std::string_view needle);
int64_t rfind(std::string_view text, std::string_view needle);
int64_t count(std::string_view text, std::string_view needle);

std::string to_upper(std::string_view text);
std::string to_lower(std::string_view text);
std::string capitalize(std::string_view text);  // str.capitalize
std::string title(std::string_view text);       // str.title (not the `title` filter)
std::string swap_case(std::string_view text);
bool is_lower(std::string_view text);  // str.islower
bool is_upper(std::string_view text);  // str.isupper
bool is_whitespace(std::string_view text);  // str.isspace

std::string center(std::string_view text, int64_t width, std::string_view fill);

}  // namespace dsinfer::jinja
