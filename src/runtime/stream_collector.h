// Test-only: collects one request's stream from the engine (engine_test, engine_structured_test,
// prompt_logprobs_test); wait() blocks until the last delivery. Header-only.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/request.h"

namespace dsinfer::runtime {

struct Collector {
  std::mutex mutex;
  std::condition_variable done_cv;
  std::vector<int32_t> tokens;
  std::string text;
  bool done = false;
  StreamOutput last;
  int deliveries = 0;
  int after_finish = 0;  // deliveries after the last one: must stay 0
  std::vector<TokenLogprob> logprobs;  // one per new token, when the request asked for them
  std::vector<PromptLogprob> prompt_logprobs;
  std::vector<int> prompt_logprob_deliveries;  // which deliveries (0 the first) carried prompt logprobs

  StreamSink sink() {
    return [this](const StreamOutput& output) {
      std::lock_guard<std::mutex> lock(mutex);
      if (done) ++after_finish;
      tokens.insert(tokens.end(), output.token_ids.begin(), output.token_ids.end());
      text += output.text;
      logprobs.insert(logprobs.end(), output.logprobs.begin(), output.logprobs.end());
      if (!output.prompt_logprobs.empty()) {
        prompt_logprob_deliveries.push_back(deliveries);
        prompt_logprobs.insert(prompt_logprobs.end(), output.prompt_logprobs.begin(), output.prompt_logprobs.end());
      }
      ++deliveries;
      if (output.finished) {
        done = true;
        last = output;
        done_cv.notify_all();
      }
    };
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    ASSERT_TRUE(done_cv.wait_for(lock, std::chrono::seconds(60), [&] { return done; })) << "request never finished";
  }
};

}  // namespace dsinfer::runtime
