// The `messages` of a chat request: parsed and checked, then handed to the chat template.
//
// Content is text only. A list of content parts is joined with "\n", as vLLM does for text-only
// models; any other part (image_url, input_audio, file, ...) is refused with a 400 that names it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "openai/openai_fields.h"

namespace dsinfer::server {

struct ChatMessage {
  std::string role;                    // system, developer, user, assistant or tool
  std::optional<std::string> content;  // unset only for an assistant message without content (tool calls)
  std::string name;                    // empty when absent
  Json tool_calls;                     // null, or an assistant message's list of calls, as sent
  std::string tool_call_id;            // empty when absent
  std::optional<std::string> reasoning_content;  // an earlier assistant turn's reasoning, when sent back
};

// Reads body["messages"]: a non-empty list of message objects.
std::vector<ChatMessage> parse_messages(const RequestFields& body);

// The messages as the chat template reads them: role, content (a string, or null), and the
// optional fields only when they were given.
Json messages_to_json(const std::vector<ChatMessage>& messages);

}  // namespace dsinfer::server
