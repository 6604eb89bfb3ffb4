// libFuzzer target: the bodies of POST /v1/chat/completions and POST /v1/completions, the
// untrusted input of every generation request. Each input goes through both parsers.
//
// Refusing an input with dsinfer::Error (ProtocolError is one) is the expected outcome for most
// inputs. Any other exception, a crash, a sanitizer report, or an accepted request whose values
// break the parser's promises (the ranges checked below) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "core/json.h"
#include "openai/openai_request.h"

namespace {

using dsinfer::server::GenerationParams;

void check_accepted(const GenerationParams& params) {
  bool in_range = params.temperature >= 0 && params.temperature <= 2 && params.top_p > 0 && params.top_p <= 1 &&
                  params.top_k >= 0 && params.min_p >= 0 && params.min_p <= 1 &&
                  params.presence_penalty >= -2 && params.presence_penalty <= 2 &&
                  params.frequency_penalty >= -2 && params.frequency_penalty <= 2 && params.repetition_penalty > 0 &&
                  params.min_tokens >= 0 && (!params.max_tokens || *params.max_tokens >= 1) &&
                  params.logprobs >= -1 && params.logprobs <= 20 && (params.stream || !params.include_usage);
  for (const std::string& stop : params.stop) in_range = in_range && !stop.empty();
  for (int32_t id : params.stop_token_ids) in_range = in_range && id >= 0;
  if (!in_range) std::abort();
}

// The engine's options for a short prompt in a small context; a max_tokens past it is refused.
template <typename Request>
void check_options(const Request& request) {
  try {
    dsinfer::runtime::RequestOptions options = request.request_options(100, 4096);
    if (options.max_tokens < 1 || options.max_tokens > 3996) std::abort();
  } catch (const dsinfer::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dsinfer::Json body;
  try {
    body = dsinfer::server::parse_json_body(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const dsinfer::Error&) {
    return 0;  // malformed JSON: refused with the parser's position
  }
  try {
    dsinfer::server::ChatCompletionRequest chat = dsinfer::server::parse_chat_request(body);
    check_accepted(chat.params);
    check_options(chat);
    if (!chat.template_messages().is_array() || !chat.template_context().is_object()) std::abort();
  } catch (const dsinfer::Error&) {
  }
  try {
    dsinfer::server::CompletionRequest completion = dsinfer::server::parse_completion_request(body);
    check_accepted(completion.params);
    check_options(completion);
  } catch (const dsinfer::Error&) {
  }
  return 0;
}
