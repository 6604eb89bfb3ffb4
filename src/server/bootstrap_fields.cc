#include "server/bootstrap_fields.h"

#include <string_view>

#include "core/strings.h"
#include "openai/openai_errors.h"

namespace dsinfer::server {
namespace {

constexpr const char* kFields[] = {"bootstrap_host", "bootstrap_port", "bootstrap_room"};

const Json* present(const Json& body, const char* field) {
  const Json* value = body.find(field);
  return value == nullptr || value->is_null() ? nullptr : value;
}

bool all_digits(std::string_view text) {
  if (text.empty() || text.size() > 19) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace

std::optional<BootstrapFields> bootstrap_fields(const Json& body, InstanceRole role) {
  if (!body.is_object()) return std::nullopt;
  if (present(body, "kv_transfer_params") != nullptr)
    throw invalid_request("'kv_transfer_params' is vLLM's disaggregation protocol (its NIXL connector), which dsinfer "
                          "does not speak: dsinfer's prefill and decode instances take SGLang's bootstrap_host, "
                          "bootstrap_port and bootstrap_room, as `dsinfer router` and SGLang's gateway send them",
                          "kv_transfer_params");
  const Json* given = nullptr;
  const char* first = nullptr;
  for (const char* field : kFields)
    if (const Json* value = present(body, field); value != nullptr && given == nullptr) given = value, first = field;
  if (given == nullptr) return std::nullopt;
  if (role == InstanceRole::kBoth)
    throw invalid_request(str_cat("'", first, "' asks for prefill/decode disaggregation, but this server runs both "
                                  "phases (it was started without --disaggregation-mode); send the request without it, "
                                  "or to a prefill or decode instance"),
                          first);
  BootstrapFields fields;
  for (const char* field : kFields)
    if (present(body, field) == nullptr)
      throw invalid_request(str_cat("'", field, "' is missing: a request of a prefill or decode instance gives "
                                    "bootstrap_host, bootstrap_port and bootstrap_room together"),
                            field);
  const Json& host = *present(body, "bootstrap_host");
  if (!host.is_string() || host.as_string().empty())
    throw invalid_request("'bootstrap_host' must be a non-empty string (the prefill instance's host)", "bootstrap_host");
  fields.host = host.as_string();
  const Json& port = *present(body, "bootstrap_port");
  if (!port.is_int() || port.as_int() < 1 || port.as_int() > 65535)
    throw invalid_request("'bootstrap_port' must be an integer in [1, 65535]", "bootstrap_port");
  fields.port = static_cast<uint16_t>(port.as_int());
  const Json& room = *present(body, "bootstrap_room");
  if (room.is_int() && room.as_int() >= 0) {
    fields.room = std::to_string(room.as_int());
  } else if (room.is_string() && all_digits(room.as_string())) {
    fields.room = room.as_string();
  } else {
    throw invalid_request("'bootstrap_room' must be a non-negative integer", "bootstrap_room");
  }
  return fields;
}

runtime::KvHandoff kv_handoff(const BootstrapFields& fields, InstanceRole role) {
  runtime::KvHandoff handoff;
  handoff.role = role == InstanceRole::kPrefill ? runtime::KvHandoff::Role::kSend : runtime::KvHandoff::Role::kReceive;
  handoff.room = fields.room;
  handoff.peer = str_cat(fields.host, ":", fields.port);
  return handoff;
}

void refuse_bootstrap_fanout(int64_t choices) {
  if (choices > 1)
    throw invalid_request(str_cat("a request with bootstrap_room asks for one answer (its room names one sequence), "
                                  "this one for ", choices, " (n, or a batch of prompts): send them one by one"),
                          "n");
}

}  // namespace dsinfer::server
