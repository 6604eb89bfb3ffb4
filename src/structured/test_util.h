// Helpers shared by the structured-output tests: the DeepSeek-V3 tokenizer and one compiler for
// it (both built once per test binary: the tokenizer is a 7.8 MB JSON, the compiler's token
// tables cover 129,280 ids), and a random "model" that writes whatever the grammar allows.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "structured/grammar_compiler.h"
#include "structured/grammar_matcher.h"
#include "structured/token_bitmask.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::structured::test_util {

constexpr int32_t kDeepseekV3Vocab = 129280;  // the model's logit width (config.json vocab_size)

inline const tokenizer::Tokenizer& deepseek_v3() {
  static const tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(DSINFER_DEEPSEEK_V3_TOKENIZER_DIR);
  return tokenizer;
}

inline GrammarCompilerOptions options_with_vocab(int32_t vocab_size) {
  GrammarCompilerOptions options;
  options.vocab_size = vocab_size;
  return options;
}

inline GrammarCompiler& deepseek_v3_compiler() {
  static GrammarCompiler compiler(deepseek_v3(), options_with_vocab(kDeepseekV3Vocab));
  return compiler;
}

inline std::vector<int32_t> allowed_tokens(const std::vector<int32_t>& bitmask, int32_t vocab) {
  std::vector<int32_t> allowed;
  for (int32_t id = 0; id < vocab; ++id) {
    if (token_allowed(bitmask.data(), id)) allowed.push_back(id);
  }
  return allowed;
}

struct Generation {
  std::vector<int32_t> tokens;  // the stop token last when terminated
  std::string text;             // decoded, without the stop token
  bool terminated = false;
  double fill_microseconds = 0;  // mean fill_bitmask time
  int rejected_checks = 0;       // disallowed tokens that accept() refused
};

// A seeded random model biased to short output: where the grammar leaves few choices it picks
// one uniformly; in free text (a string's contents) it mostly picks the first allowed token of
// `closers` (a quote, a brace, ...), so strings end soon. It ends as soon as the grammar allows a
// stop token (nine times in ten). At every step it also checks that accept() refuses a token the
// mask forbids, and that the refusal changes nothing.
inline Generation generate(GrammarMatcher& matcher, uint64_t seed, int max_steps = 400) {
  const tokenizer::Tokenizer& tokenizer = deepseek_v3();
  const int32_t vocab = matcher.vocab_size();
  std::vector<int32_t> closers;
  for (const char* text : {"\"", "}", "]", ",", "1", "0", "a"}) {
    if (std::optional<int32_t> id = tokenizer.token_to_id(tokenizer::to_byte_level(text))) closers.push_back(*id);
  }
  const int32_t eos = *tokenizer.eos_id();
  std::mt19937_64 random(seed);
  std::vector<int32_t> bitmask(bitmask_words(vocab));
  Generation out;
  double fill_total = 0;
  int fills = 0;
  for (int step = 0; step < max_steps && !matcher.is_terminated(); ++step) {
    auto start = std::chrono::steady_clock::now();
    matcher.fill_bitmask(bitmask.data());
    fill_total += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    ++fills;
    std::vector<int32_t> allowed = allowed_tokens(bitmask, vocab);
    if (allowed.empty()) {
      ADD_FAILURE() << "no token allowed after " << step << " tokens";
      break;
    }
    if (allowed.size() < static_cast<size_t>(vocab)) {
      int32_t forbidden;
      do forbidden = static_cast<int32_t>(random() % vocab);
      while (token_allowed(bitmask.data(), forbidden));
      EXPECT_FALSE(matcher.accept(forbidden)) << "token " << forbidden << " is masked but accepted";
      ++out.rejected_checks;
    }
    std::uniform_real_distribution<double> coin(0, 1);
    int32_t chosen = allowed[random() % allowed.size()];
    if (token_allowed(bitmask.data(), eos) && coin(random) < 0.9) {
      chosen = eos;
    } else if (allowed.size() > 64 && coin(random) < 0.7) {
      for (int32_t closer : closers) {
        if (token_allowed(bitmask.data(), closer)) {
          chosen = closer;
          break;
        }
      }
    }
    if (!matcher.accept(chosen)) {
      ADD_FAILURE() << "allowed token " << chosen << " was refused";
      break;
    }
    out.tokens.push_back(chosen);
  }
  out.terminated = matcher.is_terminated();
  std::vector<int32_t> text_tokens = out.tokens;
  if (out.terminated) text_tokens.pop_back();
  out.text = tokenizer.decode(text_tokens);
  out.fill_microseconds = fills ? fill_total / fills : 0;
  return out;
}

}  // namespace dsinfer::structured::test_util
