// ReasoningGate: for reasoning models (DeepSeek-R1, V3.1 thinking), the grammar constrains the
// answer, not the thinking. The gate stays closed, and every token is allowed, until the output
// ends with the reasoning end marker's tokens (`</think>`: one added token in R1's and V3.1's
// tokenizers, several in V3's). Detection is by token ids, as vLLM's and SGLang's reasoners do: a
// model that spells the marker with other tokens has not ended its reasoning.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace dsinfer::tokenizer {
class Tokenizer;
}

namespace dsinfer::structured {

// The ids that mark the end of reasoning: the marker's own id when it is one token, else how the
// tokenizer encodes it.
std::vector<int32_t> reasoning_end_tokens(const tokenizer::Tokenizer& tokenizer,
                                          std::string_view marker = "</think>");

class ReasoningGate {
 public:
  // An empty marker: the gate is open from the start.
  explicit ReasoningGate(std::vector<int32_t> end_marker = {});

  bool open() const { return open_; }
  // A token generated while the gate was closed; it may open it.
  void accept(int32_t token);
  // Forgets the last n tokens accepted while closed (n <= tokens()); may close the gate again.
  void rollback(int n);
  void reset();
  int tokens() const { return static_cast<int>(history_.size()); }

 private:
  void update();

  std::vector<int32_t> end_marker_;
  std::vector<int32_t> history_;  // tokens accepted while closed, to find the marker after a rollback
  bool open_ = true;
};

}  // namespace dsinfer::structured
