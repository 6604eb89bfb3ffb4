#include "tokenizer/byte_level.h"

#include <array>

#include "core/utf8.h"

namespace dsinfer::tokenizer {
namespace {

constexpr bool stands_for_itself(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xa1 && byte <= 0xac) || byte >= 0xae;
}

constexpr std::array<uint16_t, 256> kByteToChar = [] {
  std::array<uint16_t, 256> table{};
  uint16_t next = 0x100;
  for (int byte = 0; byte < 256; ++byte) {
    table[byte] = stands_for_itself(byte) ? static_cast<uint16_t>(byte) : next++;
  }
  return table;
}();

// Indexed by code point; every code point of the alphabet is below 0x144.
constexpr std::array<int16_t, 0x144> kCharToByte = [] {
  std::array<int16_t, 0x144> table{};
  table.fill(-1);
  for (int byte = 0; byte < 256; ++byte) table[kByteToChar[byte]] = static_cast<int16_t>(byte);
  return table;
}();

}  // namespace

uint32_t byte_to_char(uint8_t byte) { return kByteToChar[byte]; }

std::optional<uint8_t> char_to_byte(uint32_t c) {
  if (c >= kCharToByte.size() || kCharToByte[c] < 0) return std::nullopt;
  return static_cast<uint8_t>(kCharToByte[c]);
}

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char byte : bytes) utf8_append(out, byte_to_char(static_cast<uint8_t>(byte)));
  return out;
}

std::optional<std::string> from_byte_level(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    uint32_t c = 0;
    size_t length = utf8_decode(token.substr(i), &c);
    if (length == 0) return std::nullopt;
    std::optional<uint8_t> byte = char_to_byte(c);
    if (!byte) return std::nullopt;
    out += static_cast<char>(*byte);
    i += length;
  }
  return out;
}

}  // namespace dsinfer::tokenizer
