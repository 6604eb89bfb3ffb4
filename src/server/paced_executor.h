// A stand-in model for the server tests that need long or failing streams (server_resilience_test,
// server_fanout_test): HashingExecutor's tokens (runtime/testing_executor.h), `pace` per step, and a
// step computing kPoisonToken at position 1 (only a prompt puts it there: generated tokens never
// poison a step) throws, as a step whose op fails does. Test-only, header-only.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "core/error.h"
#include "runtime/testing_executor.h"

namespace dsinfer::server {

inline constexpr int32_t kPoisonToken = 7;

class PacedExecutor final : public runtime::StepExecutor {
 public:
  PacedExecutor(int64_t vocab, std::chrono::milliseconds pace) : inner_(vocab, 64, 4096, {}), pace_(pace) {}

  backend::SampledTokens run(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) override {
    for (size_t i = 0; i < batch.token_ids.size(); ++i)
      if (batch.token_ids[i] == kPoisonToken && batch.attention.positions[i] == 1)
        throw Error("the step failed: an op reported an error");
    std::this_thread::sleep_for(pace_);  // returns at once for a zero pace
    return inner_.run(batch, sampling);
  }
  int64_t vocab_size() const override { return inner_.vocab_size(); }
  int64_t max_model_len() const override { return inner_.max_model_len(); }
  int64_t num_pages() const override { return inner_.num_pages(); }
  std::vector<int32_t> eos_token_ids() const override { return {}; }

 private:
  runtime::HashingExecutor inner_;
  std::chrono::milliseconds pace_;
};

}  // namespace dsinfer::server
