#include "structured/grammar_vocabulary.h"

#include <optional>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "tokenizer/decoder.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::structured {

GrammarVocabulary make_grammar_vocabulary(const tokenizer::Tokenizer& tokenizer, int32_t vocab_size,
                                          std::vector<int32_t> stop_token_ids) {
  const int32_t tokenizer_vocab = tokenizer.vocab_size();
  if (vocab_size == 0) vocab_size = tokenizer_vocab;
  DSINFER_CHECK(vocab_size >= tokenizer_vocab, "structured output: the model's vocabulary (", vocab_size,
                ") is smaller than the tokenizer's (", tokenizer_vocab, ")");
  if (stop_token_ids.empty() && tokenizer.eos_id()) stop_token_ids.push_back(*tokenizer.eos_id());
  DSINFER_CHECK(!stop_token_ids.empty(),
                "structured output: no stop token (the tokenizer has no EOS and none was given)");
  for (int32_t id : stop_token_ids) {
    DSINFER_CHECK(id >= 0 && id < vocab_size, "structured output: stop token id ", id,
                  " is outside the vocabulary of ", vocab_size);
  }

  GrammarVocabulary vocabulary;
  vocabulary.vocab_size = vocab_size;
  vocabulary.stop_token_ids = std::move(stop_token_ids);
  vocabulary.token_bytes.resize(tokenizer_vocab);
  const tokenizer::Decoder& decoder = tokenizer.decoder();
  for (int32_t id = 0; id < tokenizer_vocab; ++id) {
    if (tokenizer.is_special(id)) continue;
    std::optional<std::string_view> piece = decoder.piece(id, /*skip_special=*/false);
    if (piece) vocabulary.token_bytes[id] = std::string(*piece);
  }
  return vocabulary;
}

}  // namespace dsinfer::structured
