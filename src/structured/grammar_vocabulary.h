// GrammarVocabulary: what a grammar needs to know of the model's tokens, taken from our tokenizer.
//
// Each id's bytes are what our decoder says it contributes to decoded text (tokenizer/decoder.h):
// for DeepSeek's byte-level BPE the GPT-2 alphabet is undone here, once, so xgrammar gets the raw
// bytes (its RAW vocabulary type) and there is one definition of a token's bytes in the project.
//   - Special added tokens (BOS, EOS, <｜User｜>, ...) and ids no vocabulary has (the model's padding
//     past the tokenizer, e.g. 128815..129279 for DeepSeek-V3) get an empty string, which xgrammar
//     treats as "never allowed", except the stop tokens, which it allows where the grammar may end.
//   - Non-special added tokens keep their literal text ("</think>", "<｜tool▁sep｜>"): a structural
//     tag that names them then matches them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dsinfer::tokenizer {
class Tokenizer;
}

namespace dsinfer::structured {

struct GrammarVocabulary {
  std::vector<std::string> token_bytes;  // by id, [tokenizer's vocab_size()]
  int32_t vocab_size = 0;                // the model's (logit row width), >= token_bytes.size()
  std::vector<int32_t> stop_token_ids;   // ids that end generation once the grammar is complete
};

// vocab_size: the model's vocabulary (0: the tokenizer's). stop_token_ids: the engine's EOS list
// (empty: the tokenizer's EOS). Throws dsinfer::Error when vocab_size is below the tokenizer's,
// a stop id is out of range, or there is no stop token at all.
GrammarVocabulary make_grammar_vocabulary(const tokenizer::Tokenizer& tokenizer, int32_t vocab_size,
                                          std::vector<int32_t> stop_token_ids);

}  // namespace dsinfer::structured
