// IncrementalDetokenizer: text for a stream of generated ids, as it becomes final.
//
// A token may end inside a UTF-8 character (byte-level BPE splits emoji and CJK across tokens),
// so push() holds back the bytes of a character that may still complete and returns only text
// that later tokens cannot change. Bytes that can never become valid are given out as U+FFFD, as
// decode() does. The pieces returned by push() and then finish() add up to exactly
// Tokenizer::decode(all ids).
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace dsinfer::tokenizer {

class IncrementalDetokenizer {
 public:
  // tokenizer must outlive this object.
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  // The text that id completes (often empty mid-character, sometimes several characters).
  std::string push(int32_t id);
  // Whatever is held back, an unfinished character becoming U+FFFD. The stream starts afresh.
  std::string finish();

 private:
  const Decoder& decoder_;
  bool skip_special_tokens_;
  bool first_ = true;    // no separator before the first piece
  std::string pending_;  // bytes of a character not yet complete
};

}  // namespace dsinfer::tokenizer
