// The workload of `dsinfer bench serve`: random prompts and the times at which they are sent, both
// reproducible from a seed.
//
// Lengths follow vLLM's random dataset (vllm/benchmarks/datasets/random.py): each request's input
// and output lengths are drawn uniformly from the integers [floor(N*(1-R)), ceil(N*(1+R))], outputs
// at least 1. A prompt is random token ids, sent as a token-id prompt so that its length is exact,
// or text for the chat endpoint: random ids decoded by the model's tokenizer when one is given, else
// random English words (a token or so each; the server's usage.prompt_tokens has the true count).
//
// Arrivals follow vLLM's get_request (vllm/benchmarks/serve.py): gaps drawn from a gamma
// distribution of mean 1/rate and shape `burstiness` (1: a Poisson process; inf: equal gaps),
// summed, then scaled so that the last request goes out at num_prompts/rate exactly, which keeps the
// offered load the same whatever the seed. An infinite rate sends every request at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dsinfer::tokenizer {
class Tokenizer;
}

namespace dsinfer::loadgen {

struct LengthRange {
  int64_t low = 0;
  int64_t high = 0;  // inclusive
};
// [floor(mean*(1-range_ratio)), ceil(mean*(1+range_ratio))], both at least `minimum`.
LengthRange length_range(int64_t mean, double range_ratio, int64_t minimum);

struct WorkloadOptions {
  int64_t num_prompts = 0;
  int64_t input_len = 0;   // tokens, the middle of the range
  int64_t output_len = 0;  // tokens, the middle of the range
  double range_ratio = 0;  // in [0, 1)
  uint64_t seed = 0;
};

enum class PromptFormat { kTokenIds, kText };

// The ids random prompts are drawn from, and how text is made of them.
struct PromptVocabulary {
  // Without a tokenizer: ids in [0, vocab_size), text of random words. With one: its ids that are
  // not special tokens, text by decoding them.
  int32_t vocab_size = 0;
  const tokenizer::Tokenizer* tokenizer = nullptr;
};

struct Prompt {
  std::vector<int32_t> token_ids;  // PromptFormat::kTokenIds
  std::string text;                // PromptFormat::kText
  int64_t input_len = 0;           // tokens (for text without a tokenizer: words, an estimate)
  int64_t output_len = 0;          // tokens asked for
};

// Throws dsinfer::Error on options no prompt can satisfy (a range ratio outside [0, 1), ...).
std::vector<Prompt> make_prompts(const WorkloadOptions& options, PromptFormat format,
                                 const PromptVocabulary& vocabulary);

// Seconds after the start at which each of `count` requests goes out, in order.
std::vector<double> arrival_times(int64_t count, double request_rate, double burstiness, uint64_t seed);

}  // namespace dsinfer::loadgen
