// Offline generation for one sequence: prefill the prompt, then decode token by token until a
// stop token or the length limit. The CLI's `generate` verb and the evaluation tools use it; the
// serving engine (engine.h) batches many sequences instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/deepseek_model.h"
#include "runtime/uniform_source.h"

namespace dsinfer::runtime {

struct GenerateOptions {
  int64_t max_new_tokens = 128;
  backend::SamplingParams sampling;  // temperature 0: greedy
  uint64_t seed = 0;
  std::vector<int32_t> stop_token_ids;
  bool prompt_logits = false;  // keep the logits at every prompt position
};

struct GenerateResult {
  std::vector<int32_t> output_ids;  // including the stop token when one ended generation
  std::string finish_reason;        // "stop" or "length"
  Tensor prompt_logits;             // [prompt, vocab] when asked for
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
};

// Throws dsinfer::Error for an empty prompt, an id outside the vocabulary, or a prompt that does
// not fit the model's context. Generation stops early at the context's end ("length").
GenerateResult generate(const model::DeepseekModel& model, const std::vector<int32_t>& prompt,
                        const GenerateOptions& options);

}  // namespace dsinfer::runtime
