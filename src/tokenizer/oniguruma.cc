#include "tokenizer/oniguruma.h"

#include "core/error.h"
#include "core/json.h"
#include "tokenizer/unicode_sets.h"

namespace dsinfer::tokenizer {
namespace {

// The items of a class for one general category, with the characters Unicode 16 added to it
// (unicode_sets.h): \p{L}\x{1c89}-\x{1c8a}...
std::string category_items(std::string_view category) {
  return str_cat("\\p{", category, "}", unicode_set(category));
}

class Translator {
 public:
  explicit Translator(std::string_view pattern) : pattern_(pattern) {
    out_.reserve(pattern.size() + 64);
  }

  std::string run() {
    for (i_ = 0; i_ < pattern_.size(); ++i_) {
      char c = pattern_[i_];
      if (c == '\\' && i_ + 1 < pattern_.size()) {
        escape(pattern_[++i_]);
      } else if (in_class_) {
        class_char(c);
      } else if (c == '[') {
        open_class();
      } else {
        out_ += c;
      }
    }
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    std::string quoted;
    json_escape(quoted, pattern_);
    throw Error(str_cat("bad regex ", quoted, ": ", what, " at offset ", i_));
  }

  // A set of characters given as class items: its own class outside one, spliced in inside one.
  // Inside a class a negated set cannot be spliced (PCRE2 10.42 has no class subtraction), so
  // `fallback`, PCRE2's nearest escape, stands in for it.
  void set(const std::string& items, bool negated, std::string_view fallback) {
    if (!in_class_) {
      out_ += negated ? "[^" : "[";
      out_ += items;
      out_ += ']';
    } else if (!negated) {
      out_ += items;
    } else {
      out_ += fallback;
    }
  }

  // The escapes whose meaning differs between the two engines:
  //   \s \S  Oniguruma: White_Space, which includes U+0085; PCRE2: tab..CR and Z only.
  //   \h \H  Oniguruma: an ASCII hex digit; PCRE2: horizontal white space.
  //   \w \W  Oniguruma: Alphabetic | Mark | Decimal_Number | Connector_Punctuation, and the
  //          Latin-1 numbers ² ³ ¹ ¼ ½ ¾; PCRE2: L | N | '_'.
  //   \d \D \p{..} \P{..}: the same categories, but with Unicode 16's characters.
  //   \uHHHH Oniguruma only; PCRE2 spells it \x{HHHH}.
  void escape(char e) {
    switch (e) {
      case 's': out_ += "\\p{White_Space}"; return;
      case 'S': out_ += "\\P{White_Space}"; return;
      case 'h': out_ += "\\p{AHex}"; return;
      case 'H': out_ += "\\P{AHex}"; return;
      case 'd': set(category_items("Nd"), false, ""); return;
      case 'D': set(category_items("Nd"), true, "\\D"); return;
      case 'w':
      case 'W':
        set(str_cat("\\p{Alphabetic}", unicode_set("L"), category_items("M"), category_items("Nd"),
                    "\\p{Pc}\\xb2\\xb3\\xb9\\xbc-\\xbe"),
            e == 'W', "\\W");
        return;
      case 'p':
      case 'P': property(e == 'P'); return;
      case 'u':
        if (i_ + 4 >= pattern_.size()) fail("\\u needs four hex digits");
        out_ += str_cat("\\x{", pattern_.substr(i_ + 1, 4), "}");
        i_ += 4;
        return;
      default: out_ += '\\'; out_ += e;
    }
  }

  // \p{Name}, \p{^Name} or \P{Name}, i_ at the 'p'.
  void property(bool negated) {
    size_t open = i_ + 1, close = pattern_.find('}', open);
    if (open >= pattern_.size() || pattern_[open] != '{' || close == std::string_view::npos) {
      out_ += '\\';
      out_ += pattern_[i_];  // let PCRE2 report the malformed escape
      return;
    }
    std::string_view name = pattern_.substr(open + 1, close - open - 1);
    std::string_view original = pattern_.substr(i_ - 1, close + 2 - i_);
    i_ = close;
    if (!name.empty() && name.front() == '^') {
      negated = !negated;
      name.remove_prefix(1);
    }
    if (unicode_set(name).empty()) {
      out_ += original;
    } else {
      set(category_items(name), negated, original);
    }
  }

  void open_class() {
    in_class_ = true;
    class_start_ = i_ + 1;
    if (class_start_ < pattern_.size() && pattern_[class_start_] == '^') ++class_start_;
    out_ += pattern_.substr(i_, class_start_ - i_);
    i_ = class_start_ - 1;
  }

  // Nested classes and class intersection (&&) have no PCRE2 equivalent; POSIX [:name:] does.
  void class_char(char c) {
    if (c == '[' && i_ + 1 < pattern_.size() && pattern_[i_ + 1] == ':') {
      size_t close = pattern_.find(":]", i_ + 2);
      if (close == std::string_view::npos) fail("unterminated POSIX class");
      out_ += pattern_.substr(i_, close + 2 - i_);
      i_ = close + 1;
      return;
    }
    if (c == '[') fail("nested character classes are not supported");
    if (c == '&' && i_ + 1 < pattern_.size() && pattern_[i_ + 1] == '&') {
      fail("class intersection && is not supported");
    }
    if (c == ']' && i_ > class_start_) in_class_ = false;  // a ']' first in a class is literal
    out_ += c;
  }

  std::string_view pattern_;
  std::string out_;
  size_t i_ = 0;
  bool in_class_ = false;
  size_t class_start_ = 0;  // index just past "[" or "[^"
};

}  // namespace

std::string oniguruma_to_pcre2(std::string_view pattern) { return Translator(pattern).run(); }

}  // namespace dsinfer::tokenizer
