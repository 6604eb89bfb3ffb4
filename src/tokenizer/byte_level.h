// GPT-2's byte-level alphabet: every byte gets a printable Unicode character, so that a
// vocabulary of strings can spell arbitrary bytes. Printable Latin-1 bytes ('!'..'~', 0xA1..0xAC,
// 0xAE..0xFF) stand for themselves; the other 68 bytes map, in order, to U+0100..U+0143 (the space
// 0x20 becomes 'Ġ' U+0120, the newline 0x0A becomes 'Ċ' U+010A).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dsinfer::tokenizer {

// The code point that stands for `byte`.
uint32_t byte_to_char(uint8_t byte);

// The byte that code point `c` stands for, or nullopt when c is not in the alphabet.
std::optional<uint8_t> char_to_byte(uint32_t c);

// Raw bytes -> their byte-level spelling (UTF-8), as vocabulary entries are written.
std::string to_byte_level(std::string_view bytes);

// A vocabulary entry -> the raw bytes it spells, or nullopt when some character of it is not in
// the alphabet (an added token such as "<｜User｜>"), or it is not valid UTF-8.
std::optional<std::string> from_byte_level(std::string_view token);

}  // namespace dsinfer::tokenizer
