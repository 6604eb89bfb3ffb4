#include "runtime/testing_executor.h"

#include <algorithm>

#include "backend/cpu/ops.h"
#include "model/kv_cache.h"

namespace dsinfer::runtime {
namespace {

uint64_t mix(uint64_t hash, uint64_t value) {
  hash ^= value + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
  return hash;
}

}  // namespace

HashingExecutor::HashingExecutor(int64_t vocab, int64_t pages, int64_t max_model_len, std::vector<int32_t> eos_ids,
                                 int32_t first_token)
    : vocab_(vocab), pages_(pages), max_model_len_(max_model_len), eos_ids_(std::move(eos_ids)),
      first_token_(first_token), slots_(pages * model::kPageSize, -1) {}

int32_t HashingExecutor::next_token(const std::vector<int32_t>& context) const {
  uint64_t hash = 1469598103934665603ull;
  for (int32_t token : context) hash = mix(hash, static_cast<uint64_t>(token));
  return first_token_ + static_cast<int32_t>(hash % static_cast<uint64_t>(vocab_ - first_token_));
}

std::vector<int32_t> HashingExecutor::expected(std::vector<int32_t> prompt, int64_t count) const {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < count; ++i) {
    out.push_back(next_token(prompt));
    prompt.push_back(out.back());
  }
  return out;
}

Tensor HashingExecutor::run(const model::ForwardBatch& batch) {
  const backend::AttentionBatch& attention = batch.attention;
  for (size_t t = 0; t < batch.token_ids.size(); ++t) slots_.at(attention.slot_mapping[t]) = batch.token_ids[t];
  tokens_run_ = batch.num_tokens();
  // One buffer reused across steps, as a device backend reuses its logits memory: the engine's
  // own time is what the benchmark measures, not the allocator's.
  auto rows = static_cast<int64_t>(batch.logit_rows.size());
  if (logits_.numel() < rows * vocab_) logits_ = Tensor::empty(DType::kF32, {rows * 2, vocab_});
  Tensor logits = logits_.slice(0, rows);
  std::fill_n(logits.data<float>(), rows * vocab_, 0.0f);
  for (size_t r = 0; r < batch.logit_rows.size(); ++r) {
    int32_t row = batch.logit_rows[r];
    int b = 0;
    while (attention.query_start[b + 1] <= row) ++b;
    std::vector<int32_t> context;
    for (int32_t p = 0; p <= attention.positions[row]; ++p) {
      int64_t slot = static_cast<int64_t>(attention.pages(b)[p / model::kPageSize]) * model::kPageSize +
                     p % model::kPageSize;
      context.push_back(slots_.at(slot));
    }
    float* out = logits.data<float>() + r * vocab_;
    out[next_token(context)] = 10.0f;
    out[first_token_ + (next_token(context) + 1 - first_token_) % (vocab_ - first_token_)] = 5.0f;
  }
  return logits;
}

std::vector<int32_t> HashingExecutor::sample(const Tensor& logits, const std::vector<backend::SamplingParams>& params,
                                             const std::vector<float>& uniforms) {
  Tensor tokens = backend::cpu::sample(logits, params, uniforms);
  return std::vector<int32_t>(tokens.data<int32_t>(), tokens.data<int32_t>() + tokens.numel());
}

}  // namespace dsinfer::runtime
