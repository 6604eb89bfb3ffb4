#include "server/constraint_compiler.h"

#include <algorithm>

#include "core/error.h"
#include "openai/openai_errors.h"
#include "structured/reasoning_gate.h"

namespace dsinfer::server {

ConstraintCompiler::ConstraintCompiler() = default;
ConstraintCompiler::~ConstraintCompiler() = default;

runtime::OutputConstraint ConstraintCompiler::compile(const StructuredOutputRequest& request,
                                                      const tokenizer::Tokenizer& tokenizer,
                                                      const runtime::Engine& engine, bool reasoning) {
  structured::GrammarCompiler* compiler = nullptr;
  std::vector<int32_t> reasoning_end;
  {
    std::lock_guard lock(mutex_);
    if (!compiler_) {
      structured::GrammarCompilerOptions options;
      options.vocab_size = static_cast<int32_t>(engine.vocab_size());
      options.stop_token_ids = engine.eos_token_ids();
      std::sort(options.stop_token_ids.begin(), options.stop_token_ids.end());
      options.stop_token_ids.erase(std::unique(options.stop_token_ids.begin(), options.stop_token_ids.end()),
                                   options.stop_token_ids.end());
      compiler_ = std::make_unique<structured::GrammarCompiler>(tokenizer, options);
      reasoning_end_ = structured::reasoning_end_tokens(tokenizer);
    }
    compiler = compiler_.get();
    if (reasoning) reasoning_end = reasoning_end_;
  }
  try {
    return runtime::OutputConstraint{compiler->compile(request.spec), std::move(reasoning_end)};
  } catch (const Error& error) {
    throw invalid_request(str_cat("structured output: ", error.what()), request.field);
  }
}

}  // namespace dsinfer::server
