// Regex: the tokenizer's one door to PCRE2 (UTF-8, Unicode properties, JIT-compiled).
//
// tokenizer.json holds patterns in Oniguruma's Ruby syntax, which is what Hugging Face tokenizers
// compiles them with; Regex::from_oniguruma rewrites them for PCRE2 first (oniguruma.h). A compiled
// Regex is immutable and may be used by many threads at once: the per-match scratch (match data,
// JIT stack) is per thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dsinfer::tokenizer {

struct Match {
  size_t begin = 0;  // byte offsets into the subject, [begin, end)
  size_t end = 0;
};

class Regex {
 public:
  // Compiles a PCRE2 pattern. Throws dsinfer::Error "bad regex "...": <PCRE2 message> at offset N".
  explicit Regex(std::string_view pattern);
  // Compiles a pattern written for Oniguruma (Ruby syntax), matching as Oniguruma would.
  static Regex from_oniguruma(std::string_view pattern);

  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  // The first match starting at or after `start`. The whole subject is visible to the pattern,
  // so lookbehind sees text before `start`. Subjects must be valid UTF-8 (dsinfer::Error if not).
  bool find(std::string_view subject, size_t start, Match* match) const;

  // Every match, left to right, the way Oniguruma's find_iter reports them: after a match the
  // search resumes at its end; an empty match moves the search one character on, and the first
  // empty match found after a non-empty one is dropped. Appends to `out`.
  void find_all(std::string_view subject, std::vector<Match>& out) const;
  // The same for a subject the caller has already checked to be valid UTF-8 (the tokenizer
  // checks its input once rather than every piece in every pass). Invalid UTF-8 here is
  // undefined behaviour.
  void find_all_in_valid(std::string_view subject, std::vector<Match>& out) const;

  // The pattern as compiled (after any Oniguruma rewriting).
  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  void check_subject(std::string_view subject) const;
  bool find_valid(std::string_view subject, size_t start, Match* match) const;

  std::string pattern_;
  std::unique_ptr<Code> code_;
};

}  // namespace dsinfer::tokenizer
