#include "structured/compiled_grammar.h"

#include <utility>

#include "structured/compiled_grammar_impl.h"

namespace dsinfer::structured {

CompiledGrammar::CompiledGrammar(std::unique_ptr<const Impl> impl, std::string description)
    : impl_(std::move(impl)), description_(std::move(description)) {}

CompiledGrammar::~CompiledGrammar() = default;

int32_t CompiledGrammar::vocab_size() const { return impl_->grammar.GetTokenizerInfo().GetVocabSize(); }

size_t CompiledGrammar::memory_bytes() const { return impl_->grammar.MemorySizeBytes(); }

}  // namespace dsinfer::structured
