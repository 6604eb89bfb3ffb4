#include "openai/openai_messages.h"

#include <array>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace dsinfer::server {
namespace {

constexpr std::array<std::string_view, 5> kRoles = {"system", "developer", "user", "assistant", "tool"};

std::string parse_role(const RequestFields& message) {
  std::optional<std::string> role = message.string("role");
  if (!role) message.fail("role", "is required");
  for (std::string_view known : kRoles)
    if (*role == known) return *role;
  message.fail("role", str_cat("must be one of 'system', 'developer', 'user', 'assistant', 'tool', got '",
                               *role, "'"));
}

// The text of a list of content parts, joined with "\n".
std::string join_text_parts(const Json::Array& parts, const std::string& path) {
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) {
    RequestFields part(parts[i], str_cat(path, "[", i, "]"));
    std::optional<std::string> type = part.string("type");
    if (!type) part.fail("type", "is required");
    if (*type != "text")
      fail_field(str_cat(path, "[", i, "]"),
                 str_cat("is of type '", *type, "'; only 'text' content parts are supported"));
    std::optional<std::string> part_text = part.string("text");
    if (!part_text) part.fail("text", "is required");
    if (i > 0) text += '\n';
    text += *part_text;
  }
  return text;
}

std::optional<std::string> parse_content(const RequestFields& message, const std::string& role) {
  const Json* content = message.get("content");
  if (content == nullptr) {
    // OpenAI lets an assistant turn that only calls tools go without content.
    if (role == "assistant") return std::nullopt;
    message.fail("content", "is required");
  }
  if (content->is_string()) return content->as_string();
  if (content->is_array()) return join_text_parts(content->as_array(), message.path_of("content"));
  message.fail("content", str_cat("must be a string or a list of content parts, got ",
                                  Json::type_name(content->type())));
}

// An earlier assistant turn's calls, as the chat template reads them back: a function name, and
// arguments as JSON text (OpenAI's form) or an object (which templates write with tojson).
void check_tool_calls(const Json::Array& calls, const std::string& path) {
  for (size_t i = 0; i < calls.size(); ++i) {
    RequestFields call(calls[i], str_cat(path, "[", i, "]"));
    const Json* function = call.object("function");
    if (function == nullptr) call.fail("function", "is required");
    RequestFields fields(*function, call.path_of("function"));
    if (!fields.string("name")) fields.fail("name", "is required");
    const Json* arguments = fields.get("arguments");
    if (arguments == nullptr) fields.fail("arguments", "is required");
    if (!arguments->is_string() && !arguments->is_object())
      fields.fail("arguments", str_cat("must be a string of JSON, got ", Json::type_name(arguments->type())));
  }
}

}  // namespace

std::vector<ChatMessage> parse_messages(const RequestFields& body) {
  const Json::Array* list = body.array("messages");
  if (list == nullptr || list->empty()) body.fail("messages", "must be a non-empty list");
  std::vector<ChatMessage> messages;
  messages.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    RequestFields fields((*list)[i], str_cat("messages[", i, "]"));
    ChatMessage message;
    message.role = parse_role(fields);
    message.content = parse_content(fields, message.role);
    message.name = fields.string("name").value_or("");
    if (const Json::Array* calls = fields.array("tool_calls")) {
      check_tool_calls(*calls, fields.path_of("tool_calls"));
      message.tool_calls = Json(*calls);
    }
    message.tool_call_id = fields.string("tool_call_id").value_or("");
    message.reasoning_content = fields.string("reasoning_content");
    messages.push_back(std::move(message));
  }
  return messages;
}

Json messages_to_json(const std::vector<ChatMessage>& messages) {
  Json list = Json::array();
  for (const ChatMessage& message : messages) {
    Json item = Json::object();
    item["role"] = message.role;
    item["content"] = message.content ? Json(*message.content) : Json();
    if (!message.name.empty()) item["name"] = message.name;
    if (!message.tool_calls.is_null()) item["tool_calls"] = message.tool_calls;
    if (!message.tool_call_id.empty()) item["tool_call_id"] = message.tool_call_id;
    if (message.reasoning_content) item["reasoning_content"] = *message.reasoning_content;
    list.push_back(std::move(item));
  }
  return list;
}

}  // namespace dsinfer::server
