// The prompt text of a chat request: its messages through the model's chat template.
//
// With continue_final_message (vLLM's field) the answer continues the last message, an
// assistant's, instead of opening a new turn: the template renders that message as a finished turn
// and closes it with its end-of-turn text (DeepSeek's "<｜end▁of▁sentence｜>"), which must go. The
// text after the message's content depends on the template, so it is found rather than assumed:
// the message is rendered with a marker after its content, and the prompt ends where the marker
// starts. That keeps whatever the template does to the content (DeepSeek-R1's drops the reasoning
// before "</think>") and cuts only what follows it.
#pragma once

#include <string>

#include "openai/openai_request.h"
#include "tokenizer/chat/chat_template.h"

namespace dsinfer::server {

// The text to tokenize (without adding special tokens: the template writes them). Throws a 400
// ProtocolError when the final message is to be continued but the template does not render its
// content, and dsinfer::Error for the template's own errors (raise_exception, ...).
std::string render_chat_prompt(const chat::ChatTemplate& chat_template, const ChatCompletionRequest& request);

}  // namespace dsinfer::server
