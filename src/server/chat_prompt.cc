#include "server/chat_prompt.h"

#include <string_view>

#include "core/error.h"
#include "openai/openai_errors.h"

namespace dsinfer::server {
namespace {

// Letters and digits only, so that no template filter (escape, trim, ...) changes it.
constexpr std::string_view kEndOfContinuedMessage = "DsinferContinueFinalMessageHere7f3a9c";

}  // namespace

std::string render_chat_prompt(const chat::ChatTemplate& chat_template, const ChatCompletionRequest& request) {
  if (!request.continue_final_message)
    return chat_template.render(request.template_messages(), request.add_generation_prompt,
                                request.template_context());
  Json messages = request.template_messages();
  Json& last = messages.as_array().back();
  const Json* content = last.find("content");
  last["content"] = str_cat(content != nullptr && content->is_string() ? content->as_string() : "",
                            kEndOfContinuedMessage);
  std::string text = chat_template.render(messages, /*add_generation_prompt=*/false, request.template_context());
  // The last occurrence: the final message is rendered last, after any earlier text that happens to
  // hold the marker.
  const size_t end = text.rfind(kEndOfContinuedMessage);
  if (end == std::string::npos)
    throw invalid_request("continue_final_message: the chat template does not write the last message's content, "
                          "so there is nothing to continue",
                          "continue_final_message");
  text.resize(end);
  return text;
}

}  // namespace dsinfer::server
