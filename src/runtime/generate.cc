#include "runtime/generate.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "model/batch_builder.h"

namespace dsinfer::runtime {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

GenerateResult generate(const model::DeepseekModel& model, const std::vector<int32_t>& prompt,
                        const GenerateOptions& options) {
  DSINFER_CHECK(!prompt.empty(), "the prompt is empty");
  auto prompt_length = static_cast<int64_t>(prompt.size());
  int64_t context = model.max_positions();
  DSINFER_CHECK(prompt_length < context, "the prompt has ", prompt_length, " tokens but the model's context is ",
                context);
  int64_t total = std::min(context, prompt_length + std::max<int64_t>(0, options.max_new_tokens));
  int64_t page_count = (total + model::kPageSize - 1) / model::kPageSize;
  model::LatentCache cache = model.make_cache(page_count);
  std::vector<int32_t> pages(page_count);
  std::iota(pages.begin(), pages.end(), 0);

  backend::Backend& backend = model.backend();
  UniformSource uniforms(options.seed);
  GenerateResult result;
  auto sample = [&](const Tensor& logits, int64_t row) {
    Tensor last = logits.slice(row, row + 1);
    Tensor token = backend.to_host(backend.sample(backend.to_device(last), {options.sampling}, {uniforms.next()}));
    return token.data<int32_t>()[0];
  };
  auto is_stop = [&](int32_t token) {
    return std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), token) !=
           options.stop_token_ids.end();
  };

  auto start = std::chrono::steady_clock::now();
  model::BatchBuilder prefill;
  prefill.add(prompt, 0, pages, options.prompt_logits ? model::LogitRows::kAll : model::LogitRows::kLast);
  Tensor logits = model.forward(prefill.build(), cache).logits;  // [rows, vocab]
  if (options.prompt_logits) result.prompt_logits = logits;
  result.prefill_seconds = seconds_since(start);

  start = std::chrono::steady_clock::now();
  int64_t position = prompt_length;
  int64_t row = logits.dim(0) - 1;
  result.finish_reason = "length";
  while (position < total) {
    int32_t token = sample(logits, row);
    result.output_ids.push_back(token);
    if (is_stop(token)) {
      result.finish_reason = "stop";
      break;
    }
    if (position + 1 >= total) break;  // this token fills the last slot: nothing more to compute
    model::BatchBuilder step;
    step.add(std::vector<int32_t>{token}, static_cast<int32_t>(position++), pages, model::LogitRows::kLast);
    logits = model.forward(step.build(), cache).logits;
    row = 0;
  }
  result.decode_seconds = seconds_since(start);
  return result;
}

}  // namespace dsinfer::runtime
