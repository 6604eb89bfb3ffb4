// UTF-8 helpers: decode one code point, encode one, find where complete characters end.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dsinfer {

// Decodes the code point at the start of text. Returns its length in bytes (1-4), or 0 when the
// bytes there are not valid UTF-8 (overlong forms, surrogates and values past U+10FFFF included).
size_t utf8_decode(std::string_view text, uint32_t* code_point);

void utf8_append(std::string& out, uint32_t code_point);

bool utf8_valid(std::string_view text);

// Length of the longest prefix of text that does not end inside a multi-byte sequence that might
// still be completed by later bytes. Invalid bytes count as complete (they will never become valid).
size_t utf8_complete_prefix(std::string_view text);

}  // namespace dsinfer
