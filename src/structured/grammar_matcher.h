// GrammarMatcher: one request's place in its grammar. Per decode step the engine asks for the
// tokens allowed next (fill_bitmask, before sampling) and reports the token sampled (accept).
//
//   fill_bitmask(row)  writes bitmask_words(vocab_size()) words (token_bitmask.h); returns false
//                      when every token is allowed (the sampler may skip the row)
//   accept(token)      true when the grammar allows it; false leaves the state unchanged (the
//                      engine then fails the request: its sampler ignored the mask)
//   is_terminated()    a stop token was accepted where the grammar may end
//   rollback(n)        undoes the last n accepted tokens (speculative decoding rejects drafts);
//                      cheap: xgrammar keeps its per-token states
//   reset()            back to the start, as after construction
//
// With MatcherOptions::reasoning_end set, the grammar applies only after those tokens
// (reasoning_gate.h): before, every token is allowed and accept() always succeeds.
// Not thread-safe: one request's matcher is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/reasoning_gate.h"

namespace dsinfer::structured {

struct MatcherOptions {
  std::vector<int32_t> reasoning_end;  // reasoning_end_tokens(tokenizer); empty: constrain from the start
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(CompiledGrammarPtr grammar, MatcherOptions options = {});
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;
  ~GrammarMatcher();

  int32_t vocab_size() const { return vocab_size_; }
  bool fill_bitmask(int32_t* bitmask_row);
  bool accept(int32_t token);
  bool is_terminated() const;
  // The grammar applies now (the reasoning gate, if any, is open).
  bool constraining() const { return gate_.open(); }
  void rollback(int n);
  void reset();
  // Tokens accepted since construction or reset(), less those rolled back.
  int accepted_tokens() const { return gate_.tokens() + grammar_tokens_; }

 private:
  struct Impl;  // the xgrammar matcher
  CompiledGrammarPtr grammar_;
  std::unique_ptr<Impl> impl_;
  ReasoningGate gate_;
  int32_t vocab_size_ = 0;
  int grammar_tokens_ = 0;  // accepted by the grammar, i.e. after the gate opened
};

}  // namespace dsinfer::structured
