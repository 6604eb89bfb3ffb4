#include "runtime/output_constraint.h"

#include <algorithm>
#include <cmath>

#include "runtime/engine.h"
#include "structured/token_bitmask.h"

namespace dsinfer::runtime {
namespace {

// Whether a mask row of `vocab` tokens allows a token outside `banned`.
bool allows_other_than(const int32_t* mask, int64_t vocab, std::span<const int32_t> banned) {
  const int64_t words = structured::bitmask_words(static_cast<int32_t>(vocab));
  for (int64_t word = 0; word < words; ++word) {
    auto bits = static_cast<uint32_t>(mask[word]);
    if (word == words - 1 && vocab % 32) bits &= (1u << (vocab % 32)) - 1u;  // bits past the vocabulary
    if (bits == 0) continue;
    for (int32_t token : banned)
      if (token >= 0 && token / 32 == word) bits &= ~(1u << (token % 32));
    if (bits != 0) return true;
  }
  return false;
}

}  // namespace

void check_logit_bias(std::vector<LogitBias>& logit_bias, int64_t vocab) {
  for (const LogitBias& entry : logit_bias) {
    if (entry.token < 0 || entry.token >= vocab)
      throw InvalidRequest(str_cat("biased token id ", entry.token, " is outside the vocabulary of ", vocab,
                                   " tokens"),
                           RequestPart::kLogitBias);
    if (!std::isfinite(entry.bias))
      throw InvalidRequest(str_cat("the bias of token ", entry.token, " is not a finite number"),
                           RequestPart::kLogitBias);
  }
  std::sort(logit_bias.begin(), logit_bias.end(),
            [](const LogitBias& a, const LogitBias& b) { return a.token < b.token; });
  auto twice = std::adjacent_find(logit_bias.begin(), logit_bias.end(),
                                  [](const LogitBias& a, const LogitBias& b) { return a.token == b.token; });
  if (twice != logit_bias.end())
    throw InvalidRequest(str_cat("biased token id ", twice->token, " is given twice"), RequestPart::kLogitBias);
}

std::unique_ptr<structured::GrammarMatcher> make_matcher(const OutputConstraint& constraint, int64_t vocab) {
  if (!constraint.grammar) throw InvalidRequest("the output constraint has no compiled grammar", RequestPart::kConstraint);
  if (constraint.grammar->vocab_size() != vocab)
    throw InvalidRequest(str_cat("the grammar (", constraint.grammar->description(), ") was compiled for ",
                                 constraint.grammar->vocab_size(), " tokens, the model has ", vocab),
                         RequestPart::kConstraint);
  return std::make_unique<structured::GrammarMatcher>(constraint.grammar,
                                                      structured::MatcherOptions{constraint.reasoning_end});
}

bool add_bitmask_row(structured::GrammarMatcher& matcher, backend::SamplingBatch& batch, int row,
                     std::span<const int32_t>& banned) {
  const int32_t vocab = matcher.vocab_size();
  const auto words = static_cast<size_t>(structured::bitmask_words(vocab));
  const size_t offset = batch.bitmask.size();
  batch.bitmask.resize(offset + words);
  int32_t* mask = batch.bitmask.data() + offset;
  if (!matcher.fill_bitmask(mask)) {
    batch.bitmask.resize(offset);
    return false;
  }
  batch.bitmask_row.at(row) = static_cast<int32_t>(offset / words);
  if (!banned.empty() && !allows_other_than(mask, vocab, banned)) banned = {};
  return true;
}

}  // namespace dsinfer::runtime
