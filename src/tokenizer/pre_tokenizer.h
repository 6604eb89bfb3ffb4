// PreTokenizer: cuts text into the pieces ("words") that the BPE model encodes one at a time,
// as tokenizer.json's "pre_tokenizer" says.
//
// Every supported form reduces to a list of steps over the current pieces:
//   Split           a regex (or literal string) and what to do with its matches: keep them as their
//                   own pieces (Isolated), drop them (Removed), glue them to the piece before
//                   (MergedWithPrevious) or after (MergedWithNext), or merge runs (Contiguous);
//                   `invert` swaps matches and the text between them.
//   ByteLevel       prepend a space to pieces that lack one (add_prefix_space), split with GPT-2's
//                   regex (use_regex), and mark the pieces as bytes for the model.
//   Whitespace, WhitespaceSplit, Digits, Punctuation: the same as Hugging Face's, as Splits.
//   Sequence        the steps of its members, in order.
// Pieces stay raw UTF-8 bytes: the byte-level alphabet is applied by the model, not here, so
// ByteLevel must be the last step.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "tokenizer/regex.h"

namespace dsinfer::tokenizer {

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Working memory for PreTokenizer::split, reusable from call to call. The pieces point into the
// text given to split() or into memory held here, until the next split().
class Pieces {
 public:
  const std::vector<std::string_view>& views() const { return current_; }

 private:
  friend class PreTokenizer;
  struct Segment {
    size_t begin, end;
    bool is_match;
  };
  std::vector<std::string_view> current_, next_;
  std::vector<Match> matches_;
  std::vector<Segment> segments_;
  std::vector<Match> kept_;           // the spans of the piece that become pieces
  std::deque<std::string> prefixed_;  // pieces made by add_prefix_space (a deque never moves them)
};

class PreTokenizer {
 public:
  // From tokenizer.json's "pre_tokenizer"; null means the whole text is one piece. Throws
  // dsinfer::Error naming an unsupported type or a bad field.
  static PreTokenizer from_json(const Json& config);

  // Splits text, which must be valid UTF-8 (Tokenizer::encode checks), into pieces (none empty).
  void split(std::string_view text, Pieces& pieces) const;

  // Whether the pieces are to be read as bytes in GPT-2's byte-level alphabet (a ByteLevel step).
  bool byte_level() const { return byte_level_; }

 private:
  struct Step {
    enum class Kind { kSplit, kPrefixSpace } kind;
    std::optional<Regex> regex;
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
  };

  void add_steps(const Json& config);
  void add_split(Regex regex, SplitBehavior behavior, bool invert);
  void apply_split(const Step& step, std::string_view piece, Pieces& pieces) const;

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace dsinfer::tokenizer
