#include "tokenizer/detokenizer.h"

#include <algorithm>

#include "core/utf8.h"
#include "tokenizer/decoder.h"

namespace dsinfer::tokenizer {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : decoder_(tokenizer.decoder()), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  std::optional<std::string_view> piece = decoder_.piece(id, skip_special_tokens_);
  if (!piece) return "";
  bool separated = !first_ && !decoder_.separator().empty();
  first_ = false;
  // Most tokens are plain ASCII with nothing held back: nothing to hold or repair.
  if (pending_.empty() && !separated &&
      std::all_of(piece->begin(), piece->end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
    return std::string(*piece);
  if (separated) pending_ += decoder_.separator();
  pending_ += *piece;
  // Cutting before a lead byte that still waits for its continuation bytes is safe: the lossy
  // reading of the whole never joins that byte to what comes before it.
  size_t complete = utf8_complete_prefix(pending_);
  std::string text;
  append_utf8_lossy(text, std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return text;
}

std::string IncrementalDetokenizer::finish() {
  std::string text;
  append_utf8_lossy(text, pending_);
  pending_.clear();
  first_ = true;
  return text;
}

}  // namespace dsinfer::tokenizer
