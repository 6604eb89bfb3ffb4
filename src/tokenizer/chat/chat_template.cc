#include "tokenizer/chat/chat_template.h"

#include "core/error.h"

namespace dsinfer::chat {
namespace {

// A special token in tokenizer_config.json: "text", {"content": "text", ...} or absent/null.
std::optional<std::string> special_token(const Json& config, std::string_view key, std::string_view source) {
  const Json* token = config.find(key);
  if (token == nullptr || token->is_null()) return std::nullopt;
  if (token->is_string()) return token->as_string();
  const Json* content = token->find("content");
  DSINFER_CHECK(content != nullptr && content->is_string(), source, ": ", key,
                " must be a string or an object with a string \"content\"");
  return content->as_string();
}

std::string template_source(const Json& config, std::string_view source) {
  const Json* chat_template = config.find("chat_template");
  DSINFER_CHECK(chat_template != nullptr && !chat_template->is_null(), source, ": chat_template is missing");
  if (chat_template->is_string()) return chat_template->as_string();
  DSINFER_CHECK(chat_template->is_array(), source, ": chat_template must be a string or a list of named templates");
  for (const Json& entry : chat_template->as_array()) {
    const Json* name = entry.find("name");
    const Json* text = entry.find("template");
    if (name != nullptr && name->is_string() && name->as_string() == "default") {
      DSINFER_CHECK(text != nullptr && text->is_string(), source, ": the default chat_template has no \"template\" string");
      return text->as_string();
    }
  }
  throw Error(str_cat(source, ": chat_template has no template named \"default\""));
}

}  // namespace

ChatTemplate::ChatTemplate(std::string_view source, std::optional<std::string> bos_token,
                           std::optional<std::string> eos_token)
    : template_(source),
      bos_token_(std::move(bos_token)),
      eos_token_(std::move(eos_token)) {}

ChatTemplate ChatTemplate::from_tokenizer_config(const Json& config, std::string_view source) {
  DSINFER_CHECK(config.is_object(), source, ": expected a JSON object");
  return ChatTemplate(template_source(config, source), special_token(config, "bos_token", source),
                      special_token(config, "eos_token", source));
}

ChatTemplate ChatTemplate::from_string(std::string source, std::string bos_token, std::string eos_token) {
  return ChatTemplate(source, std::move(bos_token), std::move(eos_token));
}

std::string ChatTemplate::render(const Json& messages, bool add_generation_prompt, const Json& extra_context) const {
  DSINFER_CHECK(messages.is_array(), "chat messages must be a JSON array, got ", Json::type_name(messages.type()));
  DSINFER_CHECK(extra_context.is_object(), "chat template context must be a JSON object, got ",
                Json::type_name(extra_context.type()));
  // The order of transformers' render call: its keyword arguments override the special tokens.
  Json variables = Json::object();
  if (bos_token_) variables["bos_token"] = *bos_token_;
  if (eos_token_) variables["eos_token"] = *eos_token_;
  variables["tools"] = nullptr;
  variables["documents"] = nullptr;
  for (const auto& [name, value] : extra_context.as_object())
    if (name != "messages" && name != "add_generation_prompt") variables[name] = value;
  variables["messages"] = messages;
  variables["add_generation_prompt"] = add_generation_prompt;
  return template_.render(variables);
}

}  // namespace dsinfer::chat
