#include "structured/grammar_compiler.h"

#include <xgrammar/xgrammar.h>

#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/json.h"
#include "structured/compile_workers.h"
#include "structured/compiled_grammar_impl.h"
#include "structured/grammar_vocabulary.h"
#include "structured/structural_tag.h"
#include "structured/xgrammar_error.h"

namespace dsinfer::structured {
namespace {

// A string literal of xgrammar's EBNF: quotes and backslashes escaped, control characters as
// fixed-width \uXXXX (its \x takes any number of hex digits and would swallow what follows).
std::string ebnf_literal(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      out += "\\u00";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Our parser's message for text that is not JSON (xgrammar's quotes its parser's internals).
void check_json(std::string_view text) {
  try {
    Json::parse(text);
  } catch (const Error& error) {
    throw Error(str_cat("not valid JSON: ", error.what()));
  }
}

std::string choice_grammar(const std::vector<std::string>& choices) {
  DSINFER_CHECK(!choices.empty(), "choice needs at least one string");
  std::string grammar = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    DSINFER_CHECK(!choices[i].empty(), "choice ", i, " is an empty string");
    if (i) grammar += " | ";
    grammar += ebnf_literal(choices[i]);
  }
  return grammar + "\n";
}

}  // namespace

struct GrammarCompiler::Backend {
  xgrammar::GrammarCompiler compiler;
  std::shared_ptr<const std::vector<bool>> never_allowed;  // CompiledGrammar::Impl's
};

bool PendingGrammar::ready() const {
  return future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

CompiledGrammarPtr PendingGrammar::get() const {
  try {
    return future_.get();
  } catch (const std::future_error&) {
    throw Error("the grammar compiler shut down before compiling this grammar");
  }
}

GrammarCompiler::GrammarCompiler(const tokenizer::Tokenizer& tokenizer, GrammarCompilerOptions options)
    : options_(std::move(options)), cache_(options_.cache_bytes) {
  DSINFER_CHECK(options_.xgrammar_threads >= 1, "grammar compiler: xgrammar_threads must be at least 1");
  DSINFER_CHECK(options_.json_max_whitespace >= 0, "grammar compiler: json_max_whitespace must be >= 0");
  GrammarVocabulary vocabulary =
      make_grammar_vocabulary(tokenizer, options_.vocab_size, options_.stop_token_ids);
  vocab_size_ = vocabulary.vocab_size;
  try {
    xgrammar::TokenizerInfo info(vocabulary.token_bytes, xgrammar::VocabType::RAW, vocabulary.vocab_size,
                                 vocabulary.stop_token_ids);
    // xgrammar's own cache is off: ours is keyed by the whole spec and bounded.
    auto never_allowed = std::make_shared<std::vector<bool>>(vocabulary.vocab_size, false);
    for (int32_t id : info.GetSpecialTokenIds()) (*never_allowed)[id] = true;
    backend_ = std::make_unique<Backend>(Backend{
        xgrammar::GrammarCompiler(info, options_.xgrammar_threads, /*cache_enabled=*/false),
        std::move(never_allowed)});
  } catch (const std::exception& error) {
    throw Error(str_cat("structured output: xgrammar refused the vocabulary: ", user_message(error)));
  }
  workers_ = std::make_unique<CompileWorkers>(options_.compile_threads);
}

GrammarCompiler::~GrammarCompiler() = default;

CompiledGrammarPtr GrammarCompiler::build(const GrammarSpec& spec) const {
  xgrammar::GrammarCompiler& compiler = backend_->compiler;
  std::optional<int> max_whitespace;
  if (options_.json_max_whitespace > 0) max_whitespace = options_.json_max_whitespace;
  try {
    std::optional<xgrammar::CompiledGrammar> compiled;
    switch (spec.kind) {
      case GrammarKind::kJsonObject:
        // Any object, whatever its members: OpenAI's json_object (xgrammar's builtin JSON grammar
        // would also take a bare array).
        compiled = compiler.CompileJSONSchema(R"({"type": "object"})", options_.json_any_whitespace,
                                              std::nullopt, std::nullopt, /*strict_mode=*/false,
                                              max_whitespace);
        break;
      case GrammarKind::kJsonSchema:
        check_json(spec.text);
        compiled = compiler.CompileJSONSchema(spec.text, options_.json_any_whitespace, std::nullopt,
                                              std::nullopt, spec.strict, max_whitespace);
        break;
      case GrammarKind::kRegex:
        compiled = compiler.CompileRegex(spec.text);
        break;
      case GrammarKind::kChoice:
        compiled = compiler.CompileGrammar(choice_grammar(spec.choices), "root");
        break;
      case GrammarKind::kEbnf:
        compiled = compiler.CompileGrammar(spec.text, "root");
        break;
      case GrammarKind::kStructuralTag: {
        std::string tag = structural_tag_for_xgrammar(spec.text);
        if (max_whitespace) tag = bound_json_whitespace(tag, *max_whitespace);
        compiled = compiler.CompileStructuralTag(tag);
        break;
      }
    }
    DSINFER_CHECK(compiled, "unknown grammar kind");
    auto impl = std::make_unique<const CompiledGrammar::Impl>(CompiledGrammar::Impl{std::move(*compiled), backend_->never_allowed});
    return std::make_shared<const CompiledGrammar>(std::move(impl), spec.describe());
  } catch (const Error& error) {
    throw Error(str_cat(spec.describe(), ": ", error.what()));
  } catch (const std::exception& error) {
    throw Error(str_cat(spec.describe(), ": ", user_message(error)));
  }
}

void GrammarCompiler::fulfil(const GrammarSpec& spec, const std::string& key, GrammarCache::Promise& promise) {
  try {
    CompiledGrammarPtr grammar = build(spec);
    size_t bytes = grammar->memory_bytes();
    promise.set_value(std::move(grammar));
    cache_.finished(key, bytes);
  } catch (...) {
    promise.set_exception(std::current_exception());
    cache_.forget(key);
  }
}

CompiledGrammarPtr GrammarCompiler::compile(const GrammarSpec& spec) {
  std::string key = spec.cache_key();
  GrammarCache::Lookup lookup = cache_.find_or_reserve(key);
  if (lookup.promise) fulfil(spec, key, *lookup.promise);
  return PendingGrammar(lookup.future).get();
}

PendingGrammar GrammarCompiler::compile_async(const GrammarSpec& spec) {
  std::string key = spec.cache_key();
  GrammarCache::Lookup lookup = cache_.find_or_reserve(key);
  if (lookup.promise) {
    try {
      workers_->submit([this, spec, key, promise = lookup.promise] { fulfil(spec, key, *promise); });
    } catch (const Error&) {
      cache_.forget(key);
      throw;
    }
  }
  return PendingGrammar(lookup.future);
}

}  // namespace dsinfer::structured
