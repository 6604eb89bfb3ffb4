#include "router/pd_request.h"

#include "openai/openai_errors.h"

namespace dsinfer::router {
namespace {

constexpr const char* kBootstrapFields[] = {"bootstrap_host", "bootstrap_port", "bootstrap_room"};

bool is_token_ids(const Json& value) {
  if (!value.is_array()) return false;
  for (const Json& id : value.as_array())
    if (!id.is_int()) return false;
  return true;
}

// A completions prompt: a string, token ids, or a list of one of those (OpenAI's batch of one).
std::string completion_prompt_text(const Json& prompt) {
  if (prompt.is_string()) return prompt.as_string();
  if (is_token_ids(prompt) && prompt.size() > 0) return prompt.dump();
  if (prompt.is_array() && prompt.size() == 1) return completion_prompt_text(prompt.at(0));
  if (prompt.is_array() && prompt.size() > 1)
    throw server::invalid_request("the router sends one prompt a request to the prefill and decode instances; send "
                                  "these prompts as separate requests",
                                  "prompt");
  throw server::invalid_request("'prompt' must be a string, a list of token ids, or a list of one of those", "prompt");
}

}  // namespace

bool is_generation_path(std::string_view path) { return path == "/v1/chat/completions" || path == "/v1/completions"; }

std::string prompt_text(std::string_view path, const Json& body) {
  if (!body.is_object()) throw server::invalid_request("the request body must be a JSON object");
  for (const char* field : kBootstrapFields)
    if (body.contains(field))
      throw server::invalid_request(str_cat("'", field, "' is the router's to set: send the request without it"),
                                    field);
  if (path == "/v1/chat/completions") {
    const Json* messages = body.find("messages");
    if (messages == nullptr || !messages->is_array() || messages->size() == 0)
      throw server::invalid_request("'messages' must be a non-empty list", "messages");
    std::string text;
    for (const Json& message : messages->as_array()) text += message.dump();
    return text;
  }
  const Json* prompt = body.find("prompt");
  if (prompt == nullptr) throw server::invalid_request("'prompt' is missing", "prompt");
  return completion_prompt_text(*prompt);
}

uint64_t draw_bootstrap_room(std::mt19937_64& random) { return random() >> 1; }

std::string with_bootstrap_fields(Json body, const std::string& host, uint16_t port, uint64_t room) {
  body["bootstrap_host"] = host;
  body["bootstrap_port"] = static_cast<int64_t>(port);
  body["bootstrap_room"] = room;
  return body.dump();
}

}  // namespace dsinfer::router
