// StreamRecorder: each SSE event parsed as an OpenAI chunk and sorted into token, usage, error or
// the end.
#include "loadgen/stream_recorder.h"

#include "core/error.h"
#include "core/json.h"

namespace dsinfer::loadgen {
namespace {

bool has_text(const Json* text) { return text != nullptr && text->is_string() && !text->as_string().empty(); }

// Whether the chunk's first choice carries generated text.
bool is_token_chunk(const Json& chunk) {
  const Json* choices = chunk.find("choices");
  if (choices == nullptr || !choices->is_array() || choices->size() == 0) return false;
  const Json& choice = choices->at(0);
  if (has_text(choice.find("text"))) return true;
  const Json* delta = choice.find("delta");
  return delta != nullptr && (has_text(delta->find("content")) || has_text(delta->find("reasoning_content")));
}

std::optional<int64_t> count(const Json& usage, std::string_view key) {
  const Json* value = usage.find(key);
  if (value == nullptr || !value->is_int()) return std::nullopt;
  return value->as_int();
}

std::string error_message(const Json& error) {
  const Json* message = error.is_object() ? error.find("message") : nullptr;
  return message != nullptr && message->is_string() ? message->as_string() : error.dump();
}

}  // namespace

void StreamRecorder::on_piece(std::string_view bytes, double arrival_s) {
  for (const std::string& data : reader_.feed(bytes)) on_event(data, arrival_s);
}

void StreamRecorder::on_end(double arrival_s) {
  for (const std::string& data : reader_.finish()) on_event(data, arrival_s);
}

void StreamRecorder::on_event(const std::string& data, double arrival_s) {
  if (done_ || !error_.empty()) return;  // nothing after the end counts
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  Json chunk;
  try {
    chunk = Json::parse(data);
  } catch (const Error& e) {
    error_ = str_cat("a stream event is not JSON (", e.what(), ")");
    return;
  }
  if (const Json* error = chunk.find("error"); error != nullptr && !error->is_null()) {
    error_ = error_message(*error);
    return;
  }
  if (is_token_chunk(chunk)) token_chunk_times_.push_back(arrival_s);
  if (const Json* usage = chunk.find("usage"); usage != nullptr && usage->is_object()) {
    prompt_tokens_ = count(*usage, "prompt_tokens");
    completion_tokens_ = count(*usage, "completion_tokens");
  }
}

}  // namespace dsinfer::loadgen
