// The xgrammar object behind CompiledGrammar. Only src/structured/*.cc include this (and with it
// xgrammar's headers), so the rest of dsinfer builds without them.
#pragma once

#include <xgrammar/xgrammar.h>

#include <memory>
#include <vector>

#include "structured/compiled_grammar.h"

namespace dsinfer::structured {

struct CompiledGrammar::Impl {
  xgrammar::CompiledGrammar grammar;
  // By id: special tokens (not stop tokens) and padding ids, which no grammar ever allows. The
  // matcher refuses them itself: xgrammar logs a warning to stderr for each one it is given.
  std::shared_ptr<const std::vector<bool>> never_allowed;
};

}  // namespace dsinfer::structured
