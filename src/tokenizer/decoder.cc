#include "tokenizer/decoder.h"

#include <algorithm>

#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"

namespace dsinfer::tokenizer {
namespace {

constexpr std::string_view kReplacementCharacter = "\xef\xbf\xbd";  // U+FFFD

bool is_continuation(uint8_t byte) { return (byte & 0xc0) == 0x80; }

// Bytes in the sequence a lead byte starts; 1 for ASCII and for bytes that start none.
size_t sequence_width(uint8_t lead) {
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 1;
}

// Length of the maximal subpart at the start of bytes, which does not start a valid character:
// the longest prefix that some valid sequence begins with, or 1 when there is none.
size_t invalid_sequence_length(std::string_view bytes) {
  auto lead = static_cast<uint8_t>(bytes[0]);
  size_t width = sequence_width(lead);
  if (width == 1 || bytes.size() < 2) return 1;
  // The second byte's range depends on the lead (no overlong forms, surrogates, or > U+10FFFF).
  auto second = static_cast<uint8_t>(bytes[1]);
  uint8_t low = lead == 0xe0 ? 0xa0 : lead == 0xf0 ? 0x90 : 0x80;
  uint8_t high = lead == 0xed ? 0x9f : lead == 0xf4 ? 0x8f : 0xbf;
  if (second < low || second > high) return 1;
  size_t length = 2;
  while (length < width && length < bytes.size() && is_continuation(bytes[length])) ++length;
  return length;
}

}  // namespace

void append_utf8_lossy(std::string& out, std::string_view bytes) {
  size_t valid_from = 0;  // start of the run of valid characters not yet copied
  size_t at = 0;
  while (at < bytes.size()) {
    uint32_t code_point;
    if (size_t length = utf8_decode(bytes.substr(at), &code_point)) {
      at += length;
      continue;
    }
    out.append(bytes.substr(valid_from, at - valid_from));
    out += kReplacementCharacter;
    at += invalid_sequence_length(bytes.substr(at));
    valid_from = at;
  }
  out.append(bytes.substr(valid_from));
}

Decoder Decoder::from_json(const Json& config, const BpeModel& model, const AddedTokens& added) {
  Decoder decoder;
  bool byte_level = false;
  if (!config.is_null()) {
    const std::string& type = type_field(config);
    DSINFER_CHECK(type == "ByteLevel", "decoder type \"", type, "\" is not supported");
    byte_level = true;
  } else {
    decoder.separator_.push_back(' ');  // Hugging Face joins tokens with spaces
  }
  int32_t id_limit = std::max(model.id_limit(), added.id_limit());
  decoder.offsets_.reserve(static_cast<size_t>(id_limit) + 1);
  decoder.flags_.assign(static_cast<size_t>(id_limit), 0);
  for (int32_t id = 0; id < id_limit; ++id) {
    decoder.offsets_.push_back(static_cast<uint32_t>(decoder.bytes_.size()));
    std::optional<std::string_view> token;
    if (const AddedToken* added_token = added.find(id)) {
      token = added_token->content;
      if (added.is_special(id)) decoder.flags_[id] |= kSpecial;
    } else {
      token = model.id_to_token(id);
    }
    if (!token) continue;
    decoder.flags_[id] |= kKnown;
    std::optional<std::string> bytes = byte_level ? from_byte_level(*token) : std::nullopt;
    decoder.bytes_ += bytes ? *bytes : *token;
  }
  decoder.offsets_.push_back(static_cast<uint32_t>(decoder.bytes_.size()));
  return decoder;
}

std::optional<std::string_view> Decoder::piece(int32_t id, bool skip_special) const {
  if (id < 0 || static_cast<size_t>(id) >= flags_.size() || !(flags_[id] & kKnown))
    return std::nullopt;
  if (skip_special && (flags_[id] & kSpecial)) return std::nullopt;
  return std::string_view(bytes_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
}

}  // namespace dsinfer::tokenizer
