// Loading the pieces of a model directory that several verbs need.
#pragma once

#include <string>

#include "tokenizer/chat/chat_template.h"

namespace dsinfer::cli {

// DIR/tokenizer_config.json's chat template. Throws dsinfer::Error naming the file.
chat::ChatTemplate load_chat_template(const std::string& dir);

}  // namespace dsinfer::cli
