#include "core/utf8.h"

namespace dsinfer {
namespace {

// Expected sequence length from the lead byte; 0 for a continuation or invalid lead byte.
size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

}  // namespace

size_t utf8_decode(std::string_view text, uint32_t* code_point) {
  if (text.empty()) return 0;
  auto lead = static_cast<unsigned char>(text[0]);
  size_t length = sequence_length(lead);
  if (length == 0 || text.size() < length) return 0;
  if (length == 1) {
    *code_point = lead;
    return 1;
  }
  uint32_t code = lead & (0x7f >> length);
  for (size_t i = 1; i < length; ++i) {
    auto byte = static_cast<unsigned char>(text[i]);
    if ((byte & 0xc0) != 0x80) return 0;
    code = (code << 6) | (byte & 0x3f);
  }
  if ((length == 3 && code < 0x800) || (length == 4 && (code < 0x10000 || code > 0x10ffff)) ||
      (code >= 0xd800 && code < 0xe000))
    return 0;
  *code_point = code;
  return length;
}

void utf8_append(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xc0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xe0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  }
}

bool utf8_valid(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    uint32_t code;
    size_t length = utf8_decode(text.substr(i), &code);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

size_t utf8_complete_prefix(std::string_view text) {
  size_t size = text.size();
  // Only a lead byte among the last three can start a sequence that runs past the end; the bytes
  // skipped on the way back are all continuation bytes, so such a sequence may still complete.
  for (size_t back = 1; back <= 3 && back <= size; ++back) {
    auto byte = static_cast<unsigned char>(text[size - back]);
    if ((byte & 0xc0) == 0x80) continue;
    return sequence_length(byte) > back ? size - back : size;
  }
  return size;
}

}  // namespace dsinfer
