#include "structured/grammar_matcher.h"

#include <xgrammar/xgrammar.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "core/error.h"
#include "structured/compiled_grammar_impl.h"
#include "structured/token_bitmask.h"
#include "structured/xgrammar_error.h"

namespace dsinfer::structured {

struct GrammarMatcher::Impl {
  xgrammar::GrammarMatcher matcher;
};

GrammarMatcher::GrammarMatcher(CompiledGrammarPtr grammar, MatcherOptions options)
    : grammar_(std::move(grammar)), gate_(std::move(options.reasoning_end)) {
  DSINFER_CHECK(grammar_, "GrammarMatcher needs a compiled grammar");
  vocab_size_ = grammar_->vocab_size();
  impl_ = std::make_unique<Impl>(Impl{xgrammar::GrammarMatcher(grammar_->impl().grammar)});
}

GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;
GrammarMatcher::~GrammarMatcher() = default;

bool GrammarMatcher::fill_bitmask(int32_t* bitmask_row) {
  const int32_t words = bitmask_words(vocab_size_);
  if (!gate_.open()) {
    std::fill(bitmask_row, bitmask_row + words, ~int32_t{0});
    return false;
  }
  if (impl_->matcher.IsTerminated()) {
    // Only what ended it may come again; the engine has normally stopped the request by now.
    std::fill(bitmask_row, bitmask_row + words, 0);
    for (int32_t id : impl_->matcher.GetStopTokenIds()) bitmask_row[id >> 5] |= int32_t(1u << (id & 31));
    return true;
  }
  int64_t shape[1] = {words};
  DLTensor tensor{};
  tensor.data = bitmask_row;
  tensor.device = DLDevice{kDLCPU, 0};
  tensor.ndim = 1;
  tensor.dtype = xgrammar::GetBitmaskDLType();
  tensor.shape = shape;
  tensor.strides = nullptr;
  tensor.byte_offset = 0;
  try {
    return impl_->matcher.FillNextTokenBitmask(&tensor);
  } catch (const std::exception& error) {
    throw Error(str_cat("structured output (", grammar_->description(), "): ", user_message(error)));
  }
}

bool GrammarMatcher::accept(int32_t token) {
  if (token < 0 || token >= vocab_size_) return false;
  if (!gate_.open()) {
    gate_.accept(token);
    return true;
  }
  if (impl_->matcher.IsTerminated() || (*grammar_->impl().never_allowed)[token]) return false;
  if (!impl_->matcher.AcceptToken(token)) return false;
  ++grammar_tokens_;
  return true;
}

bool GrammarMatcher::is_terminated() const { return gate_.open() && impl_->matcher.IsTerminated(); }

void GrammarMatcher::rollback(int n) {
  DSINFER_CHECK(n >= 0 && n <= accepted_tokens(), "GrammarMatcher: cannot roll back ", n, " of ",
                accepted_tokens(), " accepted tokens");
  int from_grammar = std::min(n, grammar_tokens_);
  if (from_grammar > 0) impl_->matcher.Rollback(from_grammar);
  grammar_tokens_ -= from_grammar;
  if (n > from_grammar) gate_.rollback(n - from_grammar);
}

void GrammarMatcher::reset() {
  impl_->matcher.Reset();
  grammar_tokens_ = 0;
  gate_.reset();
}

}  // namespace dsinfer::structured
