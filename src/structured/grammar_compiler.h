// GrammarCompiler: turns a request's GrammarSpec into a CompiledGrammar for one model.
//
// Made once per model from its tokenizer (grammar_vocabulary.h); xgrammar's token tables for the
// vocabulary are built here, once. Compiled grammars are cached by spec (grammar_cache.h), so the
// same schema from many requests is compiled once, even when the requests arrive together.
//
// Two ways to compile:
//   compile(spec)        on the calling thread (a server request worker, which may wait);
//   compile_async(spec)  on the compiler's own threads; the PendingGrammar it returns is polled
//                        with ready(), so the engine thread never waits on a compile.
// A spec that does not compile (bad JSON, an unsupported schema, a bad regex or grammar) throws
// dsinfer::Error, from compile() or PendingGrammar::get(), whose message is fit for a 400 body:
// the spec's describe(), then what is wrong: `regex "[a-z": Regex parsing error at position 5:
// Unclosed '['`, `json_schema (strict) "{\"type\": \"nonsense\"}": Unsupported type "nonsense"`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/grammar_cache.h"
#include "structured/grammar_spec.h"

namespace dsinfer::tokenizer {
class Tokenizer;
}

namespace dsinfer::structured {

class CompileWorkers;

struct GrammarCompilerOptions {
  int32_t vocab_size = 0;               // the model's logit width (0: the tokenizer's vocabulary)
  std::vector<int32_t> stop_token_ids;  // the engine's EOS list (empty: the tokenizer's EOS)
  size_t cache_bytes = size_t{512} << 20;
  int compile_threads = 1;   // compile_async's threads (grammars compiled at once)
  int xgrammar_threads = 2;  // threads one compile uses for its token tables
  // JSON forms: whitespace between tokens is free (any_whitespace, as vLLM's default) but at most
  // json_max_whitespace characters in a row, so that a model cannot loop on blanks (0: unbounded).
  bool json_any_whitespace = true;
  int json_max_whitespace = 16;
};

// A compile in flight (or done). Copyable; cheap.
class PendingGrammar {
 public:
  explicit PendingGrammar(std::shared_future<CompiledGrammarPtr> future) : future_(std::move(future)) {}
  bool ready() const;             // never waits
  CompiledGrammarPtr get() const;  // waits; throws dsinfer::Error when the spec did not compile

 private:
  std::shared_future<CompiledGrammarPtr> future_;
};

class GrammarCompiler {
 public:
  // Throws dsinfer::Error when the vocabulary does not fit the options (grammar_vocabulary.h).
  GrammarCompiler(const tokenizer::Tokenizer& tokenizer, GrammarCompilerOptions options = {});
  ~GrammarCompiler();
  GrammarCompiler(const GrammarCompiler&) = delete;
  GrammarCompiler& operator=(const GrammarCompiler&) = delete;

  CompiledGrammarPtr compile(const GrammarSpec& spec);
  PendingGrammar compile_async(const GrammarSpec& spec);

  int32_t vocab_size() const { return vocab_size_; }
  GrammarCacheStats cache_stats() const { return cache_.stats(); }

 private:
  struct Backend;  // xgrammar's compiler for our vocabulary
  // Compiles without the cache; throws dsinfer::Error.
  CompiledGrammarPtr build(const GrammarSpec& spec) const;
  // Runs a miss's compile and fulfils its promise (value or error); never throws.
  void fulfil(const GrammarSpec& spec, const std::string& key, GrammarCache::Promise& promise);

  GrammarCompilerOptions options_;
  int32_t vocab_size_ = 0;
  std::unique_ptr<Backend> backend_;
  GrammarCache cache_;
  std::unique_ptr<CompileWorkers> workers_;  // last: stopped before what its tasks use goes away
};

}  // namespace dsinfer::structured
