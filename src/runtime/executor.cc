#include "runtime/executor.h"

#include <algorithm>

namespace dsinfer::runtime {
namespace {

class ModelExecutor final : public StepExecutor {
 public:
  ModelExecutor(const model::DeepseekModel& model, int64_t pages) : model_(model), cache_(model.make_cache(pages)) {}

  backend::SampledTokens run(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) override {
    model::ForwardResult result = model_.forward_on_device(batch, cache_);
    return model_.backend().sample_tokens(result.logits, sampling);
  }

  int64_t vocab_size() const override { return model_.config().vocab_size; }
  int64_t max_model_len() const override { return model_.max_positions(); }
  int64_t num_pages() const override { return cache_.num_pages(); }
  std::vector<int32_t> eos_token_ids() const override {
    std::vector<int32_t> ids;
    for (int64_t id : model_.config().eos_token_ids) ids.push_back(static_cast<int32_t>(id));
    return ids;
  }

 private:
  const model::DeepseekModel& model_;
  model::LatentCache cache_;
};

}  // namespace

std::unique_ptr<StepExecutor> make_model_executor(const model::DeepseekModel& model, int64_t pages) {
  return std::make_unique<ModelExecutor>(model, pages);
}

int64_t pages_for(const model::DeepseekModel& model, int64_t sequences, int64_t context, int64_t bytes) {
  int64_t page_bytes = model.page_bytes();
  int64_t wanted = sequences * ((context + model::kPageSize - 1) / model::kPageSize);
  return std::max<int64_t>(1, std::min(wanted, bytes / page_bytes));
}

}  // namespace dsinfer::runtime
