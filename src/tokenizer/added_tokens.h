// AddedTokens: the tokens of tokenizer.json's "added_tokens" (special tokens such as
// <｜User｜> and plain ones), found in the text before anything else happens to it.
//
// Matching follows Hugging Face's AddedVocabulary: tokens with normalized=false are found in the
// raw text first, then tokens with normalized=true in the text between those matches (our
// normalizers change nothing, so both passes see the same characters). Each pass takes the
// leftmost match, the longest there, and goes on after it. A single_word token only counts when
// no word character touches it; lstrip and rstrip let it swallow the white space beside it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/json.h"
#include "tokenizer/regex.h"
#include "tokenizer/word_cache.h"

namespace dsinfer::tokenizer {

class BpeModel;

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
};

// A stretch of input: an added token (id >= 0) or text for the pre-tokenizer (id == -1).
struct TextSegment {
  std::string_view text;
  int32_t added_id = -1;
};

class AddedTokens {
 public:
  // From "added_tokens" (null or absent: none). Ids are assigned as Hugging Face does: a content
  // already in the model's vocabulary keeps that id; the others count up from the number of
  // vocabulary entries, in file order (these agree with the file's ids in every well-formed
  // tokenizer.json).
  static AddedTokens from_json(const Json& config, const BpeModel& model);

  // Replaces `out` with the segments of text, in order; none is empty.
  void split(std::string_view text, std::vector<TextSegment>& out) const;

  const AddedToken* find(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view content) const;
  bool is_special(int32_t id) const;
  int32_t id_limit() const { return id_limit_; }  // one past the largest id; 0 when none

 private:
  // A byte trie over token contents, answering "leftmost-longest match at or after here".
  class Matcher {
   public:
    void add(std::string_view content, int32_t token_index);
    bool empty() const { return nodes_.size() <= 1; }
    // The earliest match starting at or after `from` (longest there): its token index, or -1.
    int32_t find(std::string_view text, size_t from, Match* match) const;

   private:
    struct Node {
      std::vector<std::pair<uint8_t, int32_t>> children;  // (byte, node index)
      int32_t token_index = -1;
    };
    int32_t child(int32_t node, uint8_t byte) const;
    std::vector<Node> nodes_{Node{}};
    std::array<bool, 256> first_bytes_{};
  };

  void find_in(std::string_view sentence, const Matcher& matcher,
               std::vector<TextSegment>& out) const;
  bool stands_alone(std::string_view sentence, size_t begin, size_t end) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> index_by_id_;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> id_by_content_;
  std::unordered_set<std::string, StringHash, std::equal_to<>> special_contents_;
  Matcher raw_matcher_;         // normalized == false
  Matcher normalized_matcher_;  // normalized == true
  std::optional<Regex> word_char_;
  int32_t id_limit_ = 0;
};

}  // namespace dsinfer::tokenizer
