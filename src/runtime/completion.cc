#include "runtime/completion.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "model/kv_cache.h"

namespace dsinfer::runtime {

Completion complete_request(Engine& engine, std::vector<int32_t> prompt, RequestOptions options) {
  using Clock = std::chrono::steady_clock;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  Completion completion;
  Clock::time_point start = Clock::now(), first{}, last{};
  engine.submit(std::move(prompt), std::move(options), [&](const StreamOutput& output) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!output.token_ids.empty()) {
      last = Clock::now();
      if (completion.tokens.empty()) first = last;
      completion.tokens.insert(completion.tokens.end(), output.token_ids.begin(), output.token_ids.end());
    }
    completion.text += output.text;
    if (output.finished) {
      completion.finish_reason = output.finish_reason;
      completion.error = output.error;
      done = true;
      finished.notify_all();
    }
  });
  std::unique_lock<std::mutex> lock(mutex);
  finished.wait(lock, [&] { return done; });
  if (!completion.tokens.empty()) {
    completion.first_token_seconds = std::chrono::duration<double>(first - start).count();
    completion.decode_seconds = std::chrono::duration<double>(last - first).count();
  }
  return completion;
}

EngineConfig offline_engine_config(int64_t requests, int64_t prompt_tokens, int64_t max_new_tokens) {
  EngineConfig config;
  int64_t tokens = prompt_tokens + std::max<int64_t>(max_new_tokens, 1);
  config.max_num_seqs = std::max<int64_t>(requests, 1);
  config.max_num_batched_tokens = std::max<int64_t>(config.max_num_batched_tokens, prompt_tokens);
  config.num_pages = config.max_num_seqs * ((tokens + model::kPageSize - 1) / model::kPageSize + 1);
  config.enable_prefix_caching = false;
  return config;
}

}  // namespace dsinfer::runtime
