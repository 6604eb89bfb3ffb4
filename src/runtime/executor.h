// What the engine runs each step: a model with its KV cache behind one call, so the engine's
// scheduling and bookkeeping can be tested and timed with a stand-in model.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/deepseek_model.h"

namespace dsinfer::runtime {

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  // Runs one step; returns the logits of batch.logit_rows, [rows, vocab] float32 on the host.
  virtual Tensor run(const model::ForwardBatch& batch) = 0;
  // Samples one token per row of host logits.
  virtual std::vector<int32_t> sample(const Tensor& logits, const std::vector<backend::SamplingParams>& params,
                                      const std::vector<float>& uniforms) = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t max_model_len() const = 0;
  virtual int64_t num_pages() const = 0;
  virtual std::vector<int32_t> eos_token_ids() const = 0;
};

// The real thing: a DeepseekModel and a latent cache of `pages` pages.
std::unique_ptr<StepExecutor> make_model_executor(const model::DeepseekModel& model, int64_t pages);

// Pages for a KV cache: enough for `sequences` contexts of `context` tokens, within `bytes`.
int64_t pages_for(const model::DeepseekModel& model, int64_t sequences, int64_t context, int64_t bytes);

}  // namespace dsinfer::runtime
