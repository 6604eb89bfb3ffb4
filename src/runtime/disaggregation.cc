#include "runtime/disaggregation.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/json.h"

namespace dsinfer::runtime {
namespace {

const Json& member(const Json& object, std::string_view key, const char* what) {
  const Json* value = object.find(key);
  DSINFER_CHECK(value != nullptr, what, ": '", key, "' is missing");
  return *value;
}

// JSON has no infinity: a logprob of -inf (a token the constraints ruled out) travels as null.
Json logprob_value(float logprob) { return std::isfinite(logprob) ? Json(static_cast<double>(logprob)) : Json(); }
float logprob_of(const Json& value) {
  return value.is_null() ? -std::numeric_limits<float>::infinity() : static_cast<float>(value.as_double());
}

void check_room(const std::string& room, const char* what) {
  DSINFER_CHECK(!room.empty() && room.size() <= kMaxRoomBytes, what, ": a room of ", room.size(), " bytes (1 to ",
                kMaxRoomBytes, ")");
}

}  // namespace

std::string KvDestination::to_string() const {
  Json pages_json = Json::array();
  for (int32_t page : pages) pages_json.push_back(Json(page));
  Json object = Json::object();
  object["room"] = room;
  object["agent_address"] = transfer::blob_to_hex(agent_address);
  object["cache_description"] = transfer::blob_to_hex(cache_description);
  object["pages"] = std::move(pages_json);
  object["first_token"] = first_token;
  object["drafts"] = drafts;
  return object.dump();
}

KvDestination KvDestination::from_string(std::string_view text) {
  const Json object = Json::parse(text);
  DSINFER_CHECK(object.is_object(), "KV destination: a JSON object expected, got ", Json::type_name(object.type()));
  KvDestination destination;
  destination.room = member(object, "room", "KV destination").as_string();
  check_room(destination.room, "KV destination");
  destination.agent_address = transfer::blob_from_hex(member(object, "agent_address", "KV destination").as_string(),
                                                        "KV destination: agent_address");
  destination.cache_description =
      transfer::blob_from_hex(member(object, "cache_description", "KV destination").as_string(),
                              "KV destination: cache_description");
  for (const Json& page : member(object, "pages", "KV destination").as_array()) {
    const int64_t id = page.as_int();
    DSINFER_CHECK(id >= 0 && id <= std::numeric_limits<int32_t>::max(), "KV destination: page ", id);
    destination.pages.push_back(static_cast<int32_t>(id));
  }
  destination.first_token = member(object, "first_token", "KV destination").as_int();
  DSINFER_CHECK(destination.first_token >= 0, "KV destination: first_token ", destination.first_token);
  if (const Json* drafts = object.find("drafts")) destination.drafts = drafts->as_bool();
  return destination;
}

transfer::Blob HandoffNote::encode() const {
  Json object = Json::object();
  object["room"] = room;
  object["token"] = token;
  if (logprob) {
    Json top = Json::array();
    for (const auto& [id, value] : logprob->top) top.push_back(Json(Json::Array{Json(id), logprob_value(value)}));
    Json entry = Json::object();
    entry["token"] = logprob->token_id;
    entry["logprob"] = logprob_value(logprob->logprob);
    entry["top"] = std::move(top);
    object["logprob"] = std::move(entry);
  }
  transfer::Blob blob = object.dump();
  DSINFER_CHECK(blob.size() <= transfer::KvTransfer::kMaxNoteBytes, "KV handoff: the note of room '", room, "' takes ",
                blob.size(), " bytes, over the transfer's ", transfer::KvTransfer::kMaxNoteBytes);
  return blob;
}

HandoffNote HandoffNote::decode(const transfer::Blob& blob) {
  const Json object = Json::parse(blob);
  DSINFER_CHECK(object.is_object(), "KV handoff note: a JSON object expected");
  HandoffNote note;
  note.room = member(object, "room", "KV handoff note").as_string();
  check_room(note.room, "KV handoff note");
  note.token = static_cast<int32_t>(member(object, "token", "KV handoff note").as_int());
  if (const Json* entry = object.find("logprob")) {
    TokenLogprob logprob;
    logprob.token_id = static_cast<int32_t>(member(*entry, "token", "KV handoff note").as_int());
    logprob.logprob = logprob_of(member(*entry, "logprob", "KV handoff note"));
    for (const Json& pair : member(*entry, "top", "KV handoff note").as_array()) {
      DSINFER_CHECK(pair.size() == 2, "KV handoff note: a top logprob of ", pair.size(), " values");
      logprob.top.emplace_back(static_cast<int32_t>(pair.at(0).as_int()), logprob_of(pair.at(1)));
    }
    note.logprob = std::move(logprob);
  }
  return note;
}

}  // namespace dsinfer::runtime
