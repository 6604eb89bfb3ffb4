// The chat template of a model: turns OpenAI-style messages into the prompt text, exactly as
// Hugging Face's tokenizer.apply_chat_template(messages, tokenize=False, ...) does.
//
// The template variables match transformers': `messages`, `add_generation_prompt`, `tools` and
// `documents` (None unless given), `bos_token` and `eos_token`, and any extra keyword arguments
// (`enable_thinking`, `thinking`, ...) as top-level names.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/json.h"
#include "jinja/template.h"

namespace dsinfer::chat {

class ChatTemplate {
 public:
  // From a parsed tokenizer_config.json. "chat_template" is a string, or a list of
  // {"name", "template"} entries of which "default" is used; bos_token and eos_token are strings
  // or {"__type": "AddedToken", "content": ...} objects, and stay undefined in the template when
  // the config has none. `source` names the file in error messages.
  static ChatTemplate from_tokenizer_config(const Json& config, std::string_view source);
  static ChatTemplate from_string(std::string source, std::string bos_token, std::string eos_token);

  // messages: a JSON array of message objects. extra_context: a JSON object of further variables
  // (tools, documents, enable_thinking, ...); it cannot replace messages or add_generation_prompt.
  std::string render(const Json& messages, bool add_generation_prompt,
                     const Json& extra_context = Json::object()) const;

 private:
  ChatTemplate(std::string_view source, std::optional<std::string> bos_token, std::optional<std::string> eos_token);

  jinja::Template template_;
  std::optional<std::string> bos_token_;
  std::optional<std::string> eos_token_;
};

}  // namespace dsinfer::chat
