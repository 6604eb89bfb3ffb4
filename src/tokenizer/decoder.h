// Decoder: what each id contributes to decoded text, as tokenizer.json's "decoder" says.
//
// ByteLevel (DeepSeek's): a token whose characters are all in GPT-2's byte-level alphabet stands
// for those bytes; any other token (an added token such as "<｜User｜>") for its own UTF-8. The
// bytes of all ids are joined and then read as UTF-8, each invalid sequence becoming U+FFFD, as
// Rust's String::from_utf8_lossy does. No decoder: the tokens joined by single spaces.
// The pieces are worked out once, at load, so decoding is copying.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"

namespace dsinfer::tokenizer {

class AddedTokens;
class BpeModel;

class Decoder {
 public:
  // From "decoder" (null: no decoder). Throws dsinfer::Error on a type not supported.
  static Decoder from_json(const Json& config, const BpeModel& model, const AddedTokens& added);

  // The bytes id contributes, or nullopt when it contributes nothing: an id neither vocabulary
  // has (Hugging Face skips those too), or a special token when skip_special.
  std::optional<std::string_view> piece(int32_t id, bool skip_special) const;
  // What goes between two pieces.
  std::string_view separator() const { return separator_; }

 private:
  enum Flags : uint8_t { kKnown = 1, kSpecial = 2 };
  std::string bytes_;              // every piece, back to back
  std::vector<uint32_t> offsets_;  // piece of id i: bytes_[offsets_[i], offsets_[i + 1])
  std::vector<uint8_t> flags_;     // by id
  std::string separator_;
};

// Appends bytes read as UTF-8, each maximal invalid subsequence replaced by U+FFFD (Unicode's
// recommended practice, which Rust's from_utf8_lossy follows).
void append_utf8_lossy(std::string& out, std::string_view bytes);

}  // namespace dsinfer::tokenizer
