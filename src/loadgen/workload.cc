#include "loadgen/workload.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <random>
#include <string_view>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::loadgen {
namespace {

// Common short English words: one token each in most byte-level BPE vocabularies once a space
// precedes them, so a prompt of N words is close to N tokens.
constexpr std::string_view kWords[] = {
    "the",   "of",    "and",   "to",    "in",    "is",    "that",  "for",   "it",    "as",    "was",
    "with",  "be",    "by",    "on",    "not",   "he",    "this",  "are",   "or",    "his",   "from",
    "at",    "which", "but",   "have",  "an",    "had",   "they",  "you",   "were",  "their", "one",
    "all",   "we",    "can",   "her",   "has",   "there", "been",  "if",    "more",  "when",  "will",
    "would", "who",   "so",    "no",    "time",  "out",   "up",    "into",  "only",  "new",   "some",
    "could", "these", "two",   "may",   "first", "then",  "do",    "any",   "like"};

// Arrival times come from their own generator, so that the prompts of a seed stay the same
// whatever the rate, and the arrivals whatever the lengths.
constexpr uint64_t kArrivalStream = 0x9e3779b97f4a7c15;

int64_t uniform(std::mt19937_64& rng, LengthRange range) {
  return std::uniform_int_distribution<int64_t>(range.low, range.high)(rng);
}

std::vector<int32_t> prompt_ids(const PromptVocabulary& vocabulary) {
  std::vector<int32_t> ids;
  if (vocabulary.tokenizer == nullptr) {
    DSINFER_CHECK(vocabulary.vocab_size > 0, "random prompts need a vocabulary size above 0");
    ids.resize(static_cast<size_t>(vocabulary.vocab_size));
    for (int32_t id = 0; id < vocabulary.vocab_size; ++id) ids[static_cast<size_t>(id)] = id;
    return ids;
  }
  for (int32_t id = 0; id < vocabulary.tokenizer->vocab_size(); ++id) {
    if (!vocabulary.tokenizer->is_special(id)) ids.push_back(id);
  }
  DSINFER_CHECK(!ids.empty(), "the tokenizer has no ordinary tokens to make prompts of");
  return ids;
}

std::vector<int32_t> random_ids(std::mt19937_64& rng, const std::vector<int32_t>& allowed, int64_t count) {
  std::uniform_int_distribution<size_t> pick(0, allowed.size() - 1);
  std::vector<int32_t> ids(static_cast<size_t>(count));
  for (int32_t& id : ids) id = allowed[pick(rng)];
  return ids;
}

std::string random_words(std::mt19937_64& rng, int64_t count) {
  std::uniform_int_distribution<size_t> pick(0, std::size(kWords) - 1);
  std::string text;
  for (int64_t i = 0; i < count; ++i) {
    if (i) text += ' ';
    text += kWords[pick(rng)];
  }
  return text;
}

// Decoded random ids may encode to a different count (pieces merge across the seams), so the text
// is encoded again and cut to length, as vLLM's random dataset does.
void make_text(Prompt& prompt, std::vector<int32_t> ids, const tokenizer::Tokenizer& tokenizer) {
  std::vector<int32_t> encoded = tokenizer.encode(tokenizer.decode(ids));
  if (encoded.size() > ids.size()) encoded.resize(ids.size());
  prompt.text = tokenizer.decode(encoded);
  prompt.input_len = static_cast<int64_t>(encoded.size());
}

}  // namespace

LengthRange length_range(int64_t mean, double range_ratio, int64_t minimum) {
  LengthRange range;
  range.low = std::max(minimum, static_cast<int64_t>(std::floor(static_cast<double>(mean) * (1 - range_ratio))));
  range.high = std::max(minimum, static_cast<int64_t>(std::ceil(static_cast<double>(mean) * (1 + range_ratio))));
  return range;
}

std::vector<Prompt> make_prompts(const WorkloadOptions& options, PromptFormat format,
                                 const PromptVocabulary& vocabulary) {
  DSINFER_CHECK(options.range_ratio >= 0 && options.range_ratio < 1, "--range-ratio must be in [0, 1), got ",
                options.range_ratio);
  DSINFER_CHECK(options.input_len >= 1 && options.output_len >= 1, "--input-len and --output-len must be at least 1");
  DSINFER_CHECK(options.num_prompts >= 1, "--num-prompts must be at least 1");
  const LengthRange inputs = length_range(options.input_len, options.range_ratio, 1);
  const LengthRange outputs = length_range(options.output_len, options.range_ratio, 1);
  const bool needs_ids = format == PromptFormat::kTokenIds || vocabulary.tokenizer != nullptr;
  const std::vector<int32_t> allowed = needs_ids ? prompt_ids(vocabulary) : std::vector<int32_t>{};

  std::mt19937_64 rng(options.seed);
  std::vector<Prompt> prompts(static_cast<size_t>(options.num_prompts));
  for (Prompt& prompt : prompts) {
    prompt.input_len = uniform(rng, inputs);
    prompt.output_len = uniform(rng, outputs);
    if (format == PromptFormat::kTokenIds) {
      prompt.token_ids = random_ids(rng, allowed, prompt.input_len);
    } else if (vocabulary.tokenizer != nullptr) {
      make_text(prompt, random_ids(rng, allowed, prompt.input_len), *vocabulary.tokenizer);
    } else {
      prompt.text = random_words(rng, prompt.input_len);
    }
  }
  return prompts;
}

std::vector<double> arrival_times(int64_t count, double request_rate, double burstiness, uint64_t seed) {
  DSINFER_CHECK(request_rate > 0, "--request-rate must be above 0 (inf: all at once), got ", request_rate);
  DSINFER_CHECK(burstiness > 0, "--burstiness must be above 0, got ", burstiness);
  std::vector<double> times(static_cast<size_t>(std::max<int64_t>(count, 0)), 0.0);
  if (std::isinf(request_rate) || times.empty()) return times;

  const bool equal_gaps = std::isinf(burstiness);
  std::mt19937_64 rng(seed ^ kArrivalStream);
  const double shape = equal_gaps ? 1.0 : burstiness;
  std::gamma_distribution<double> gap(shape, 1.0 / (request_rate * shape));  // mean 1/rate
  double elapsed = 0;
  for (double& time : times) {
    elapsed += equal_gaps ? 1.0 / request_rate : gap(rng);
    time = elapsed;
  }
  const double scale = static_cast<double>(count) / request_rate / times.back();
  for (double& time : times) time *= scale;
  return times;
}

}  // namespace dsinfer::loadgen
