// CompiledGrammar: a grammar made ready for one model's vocabulary (xgrammar's preprocessing: the
// token masks of the grammar's states, worked out once). Immutable, shared by every request that
// asked for the same spec; GrammarMatcher walks it per request. xgrammar stays behind Impl.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace dsinfer::structured {

class CompiledGrammar {
 public:
  struct Impl;  // compiled_grammar_impl.h: the xgrammar object
  CompiledGrammar(std::unique_ptr<const Impl> impl, std::string description);
  ~CompiledGrammar();
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  int32_t vocab_size() const;       // width of a logit row; the bitmask has bitmask_words(it) words
  size_t memory_bytes() const;      // approximate, what the cache counts against its budget
  const std::string& description() const { return description_; }  // GrammarSpec::describe()
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<const Impl> impl_;
  std::string description_;
};

using CompiledGrammarPtr = std::shared_ptr<const CompiledGrammar>;

}  // namespace dsinfer::structured
