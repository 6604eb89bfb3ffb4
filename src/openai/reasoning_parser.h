// DeepSeek-R1's reasoning format (`--reasoning-parser deepseek-r1`): the model thinks inside
// <think>...</think> and answers after it. The thinking goes to `reasoning_content`, the answer
// to `content`, as DeepSeek's own API and vLLM present them.
//
// The rules mirror vLLM's deepseek_r1 parser:
//   - Text before the first </think> is reasoning. A <think> at the very start is dropped; it is
//     often absent, because R1's newer chat templates open <think> in the prompt.
//   - Output that never closes </think> is all reasoning (a model cut off while thinking, and
//     also a model that does not think at all: the parser is for reasoning models).
//   - Nothing is stripped. The blank line R1 writes after </think> starts the content, as in
//     vLLM, and reasoning + content is exactly the model's text minus the tags.
//   - Empty content after </think> is "no content" (null in the answer), as in vLLM.
// One deliberate difference: a <think> later in the text is kept as text. vLLM's non-streamed
// path drops everything before such a tag while its streamed path keeps it; here both agree.
//
// Streaming: push() takes the text pieces in order and returns what can be told apart so far.
// A piece that ends inside a tag ("...</thi") is held back until the next piece settles it;
// finish() returns what is still held. The concatenated deltas always equal split() of the
// whole text (the tests check this for every way of cutting a text into three pieces).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dsinfer::server {

// What an answer shows of the thinking when the server runs a reasoning parser, per request.
enum class ReasoningOutput {
  kSeparate,  // reasoning_content beside content (the default)
  kOmit,      // content only, the thinking dropped: vLLM's include_reasoning: false
  kInline,    // the model's text as it is, tags included, in content: SGLang's separate_reasoning: false
};

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

struct ReasoningSplit {
  std::string reasoning;
  std::optional<std::string> content;  // unset when nothing follows </think>, or there is no </think>
};

class ReasoningParser {
 public:
  ReasoningDelta push(std::string_view text);
  ReasoningDelta finish();

  // The whole text at once (non-streamed answers).
  static ReasoningSplit split(std::string_view text);

 private:
  enum class Phase { kStart, kReasoning, kContent };  // in time order
  Phase phase_ = Phase::kStart;
  std::string held_;  // text not yet classified: a possible <think> or </think> prefix
};

}  // namespace dsinfer::server
