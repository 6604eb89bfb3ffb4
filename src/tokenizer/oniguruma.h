// Oniguruma to PCRE2: rewrites a tokenizer.json pattern (Oniguruma, Ruby syntax, as Hugging Face
// compiles it) into a PCRE2 pattern that matches the same text.
#pragma once

#include <string>
#include <string_view>

namespace dsinfer::tokenizer {

// Throws dsinfer::Error "bad regex ...: ..." for constructs PCRE2 has no equivalent of.
std::string oniguruma_to_pcre2(std::string_view pattern);

}  // namespace dsinfer::tokenizer
