// Sets of characters on which Hugging Face's engines and ours (PCRE2 10.42, Unicode 14) disagree,
// as PCRE2 class items (\x{...} and \x{...}-\x{...}) ready to splice into a character class.
//
//   "L", "M", "N", "Nd", "P", "S"   characters that Oniguruma (Unicode 16) has in that general
//                                    category and Unicode 14 leaves unassigned: new emoji, CJK
//                                    extensions H and I, new scripts.
//   "PunctuationExtra", "PunctuationMissing"   what the Punctuation pre-tokenizer, reading an older
//                                    Unicode table, counts as punctuation beyond, and short of,
//                                    Unicode 14's P and ASCII punctuation.
// The sets are generated from Hugging Face tokenizers itself by tools/make_tokenizer_fixtures.py.
#pragma once

#include <string_view>

namespace dsinfer::tokenizer {

// The items of the named set; empty for a name without one.
std::string_view unicode_set(std::string_view name);

}  // namespace dsinfer::tokenizer
