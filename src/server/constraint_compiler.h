// ConstraintCompiler: a request's structured-output spec (openai_structured.h) compiled for the
// served model, on the request thread that prepares the request, so that a schema, regex or
// grammar that does not compile is a 400 with xgrammar's message before the engine sees it, and
// the engine thread never compiles. Compiled grammars are cached by spec (structured/grammar_cache.h):
// the same schema from many requests compiles once.
//
// xgrammar's token tables for the vocabulary (about a second for DeepSeek-V3's 129k tokens) are
// built on the first constrained request, not at start: a server that never sees one never pays.
// Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "runtime/engine.h"
#include "runtime/request.h"
#include "openai/openai_structured.h"
#include "structured/grammar_compiler.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::server {

class ConstraintCompiler {
 public:
  ConstraintCompiler();
  ~ConstraintCompiler();

  // The engine's constraint for `request`. reasoning: the grammar applies after </think> (the
  // server runs the reasoning parser, so the answer is what follows it). Throws a 400
  // ProtocolError naming the request's field when the spec does not compile.
  runtime::OutputConstraint compile(const StructuredOutputRequest& request, const tokenizer::Tokenizer& tokenizer,
                                    const runtime::Engine& engine, bool reasoning);

 private:
  std::mutex mutex_;  // guards the first use
  std::unique_ptr<structured::GrammarCompiler> compiler_;
  std::vector<int32_t> reasoning_end_;
};

}  // namespace dsinfer::server
