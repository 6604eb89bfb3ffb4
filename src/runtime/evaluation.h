// Held-out evaluation of a model through the engine: exact-match accuracy on checkable tasks, the
// MTP module's next-next-token accuracy (how often a one-token draft would be accepted), and how far
// a KV cache format moves the model's distributions from the compute-dtype cache's.
//
// Task files are JSON lines written by tools/train_small_model.py next to the model:
//   DIR/eval/<task>.jsonl      {"prompt": rendered chat prompt with BOS, "answer": "..."}
//   DIR/eval/mtp_text.jsonl    {"text": a whole rendered conversation, "prompt": its prompt part}
// A completion is right when the text after its last </think>, trimmed, equals the answer, unless
// the caller passes its own check (dsinfer eval scores DIR/eval/tool.jsonl's tool calls so).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/json.h"
#include "runtime/engine.h"

namespace dsinfer::runtime {

struct TaskResult {
  int64_t problems = 0;
  int64_t correct = 0;
  int64_t generated_tokens = 0;
  double seconds = 0.0;
  std::vector<std::string> failures;  // a few wrong completions, for the report
  double accuracy() const { return problems ? static_cast<double>(correct) / problems : 0.0; }
};

// Whether `completion` is right for `row`, a line of a task file.
using AnswerCheck = std::function<bool(const Json& row, const std::string& completion)>;

// The answer a completion gives: the text after its last </think>, trimmed.
std::string final_answer(const std::string& completion);

// The default check: final_answer(completion) equals the row's "answer".
bool answer_matches(const Json& row, const std::string& completion);

// Runs the first `count` problems of a task file (all at once; the engine batches them). Every row
// needs "prompt" and "answer" (shown for wrong completions, whatever `check` compares).
TaskResult evaluate_task(Engine& engine, const tokenizer::Tokenizer& tokenizer, const std::string& path,
                         int64_t count, int64_t max_new_tokens, const AnswerCheck& check = answer_matches);

struct MtpResult {
  int64_t positions = 0;             // predictions made over whole conversations
  int64_t correct = 0;
  int64_t completion_positions = 0;  // of which the predicted token lies in the answer
  int64_t completion_correct = 0;
  double accuracy() const { return positions ? static_cast<double>(correct) / positions : 0.0; }
  double completion_accuracy() const {
    return completion_positions ? static_cast<double>(completion_correct) / completion_positions : 0.0;
  }
};

// Teacher-forced: the main model's hidden state at i and token i + 1 through MTP module 0; the
// prediction is right when its argmax is token i + 2.
MtpResult evaluate_mtp(const model::DeepseekModel& model, const tokenizer::Tokenizer& tokenizer,
                       const std::string& path, int64_t count);

struct CacheKlResult {
  int64_t positions = 0;        // answer tokens scored
  double mean_kl = 0.0;         // KL(reference || model) of the next-token distributions, nats
  double max_kl = 0.0;
  double top1_agreement = 0.0;  // share of positions whose argmax is the reference's
};

// Teacher-forced, as serving runs a conversation: each text's prompt part prefilled, then its answer
// fed one decode step a token; at every step the next-token distribution of `model` (a cache format
// or a quantized checkpoint under test) against `reference`'s (the compute-dtype cache; the same
// weights, or the checkpoint the quantized one came from).
CacheKlResult evaluate_cache_kl(const model::DeepseekModel& reference, const model::DeepseekModel& model,
                                const tokenizer::Tokenizer& tokenizer, const std::string& path, int64_t count);

}  // namespace dsinfer::runtime
