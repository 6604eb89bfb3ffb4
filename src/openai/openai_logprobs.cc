#include "openai/openai_logprobs.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <cmath>

#include "core/error.h"
#include "core/utf8.h"

namespace dsinfer::server {
namespace {

constexpr double kRuledOut = -9999.0;

// The float as the shortest decimal that reads back as it (-0.1, not -0.10000000149011612), the way
// a client printing float32 values would show them; -inf and NaN become kRuledOut.
Json logprob_json(float logprob) {
  if (!std::isfinite(logprob)) return Json(kRuledOut);
  char buffer[32];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), logprob);
  double value = logprob;
  std::from_chars(buffer, end, value);
  return Json(std::max(value, kRuledOut));
}

Json bytes_json(const std::string& text) {
  Json bytes = Json::array();
  for (char c : text) bytes.push_back(Json(static_cast<int64_t>(static_cast<unsigned char>(c))));
  return bytes;
}

Json chat_entry(const std::string& token, float logprob) {
  Json entry = Json::object();
  entry["token"] = token;
  entry["logprob"] = logprob_json(logprob);
  entry["bytes"] = bytes_json(token);
  return entry;
}

// Characters as Python's len() counts them; each byte of invalid UTF-8 counts as one.
int64_t code_points(std::string_view text) {
  int64_t count = 0;
  uint32_t code_point;
  for (size_t i = 0; i < text.size(); ++count) {
    size_t length = utf8_decode(text.substr(i), &code_point);
    i += length == 0 ? 1 : length;
  }
  return count;
}

Json prompt_entry(float logprob, int32_t rank, std::string decoded) {
  Json entry = Json::object();
  entry["logprob"] = logprob_json(logprob);
  entry["rank"] = static_cast<int64_t>(rank);
  entry["decoded_token"] = std::move(decoded);
  return entry;
}

}  // namespace

Json chat_logprobs(std::span<const runtime::TokenLogprob> logprobs, const TokenText& token_text) {
  DSINFER_CHECK(token_text, "logprobs need the tokenizer's token text");
  Json content = Json::array();
  for (const runtime::TokenLogprob& chosen : logprobs) {
    Json entry = chat_entry(token_text(chosen.token_id), chosen.logprob);
    Json top = Json::array();
    for (const auto& [id, logprob] : chosen.top) top.push_back(chat_entry(token_text(id), logprob));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  Json object = Json::object();
  object["content"] = std::move(content);
  return object;
}

Json completion_logprobs(std::span<const runtime::TokenLogprob> logprobs, const TokenText& token_text,
                         int64_t& text_offset) {
  DSINFER_CHECK(token_text, "logprobs need the tokenizer's token text");
  Json tokens = Json::array(), token_logprobs = Json::array(), top_logprobs = Json::array(),
       offsets = Json::array();
  for (const runtime::TokenLogprob& chosen : logprobs) {
    std::string token = token_text(chosen.token_id);
    Json top = Json::object();
    for (const auto& [id, logprob] : chosen.top) top[token_text(id)] = logprob_json(logprob);
    if (!top.contains(token)) top[token] = logprob_json(chosen.logprob);
    tokens.push_back(Json(token));
    token_logprobs.push_back(logprob_json(chosen.logprob));
    top_logprobs.push_back(std::move(top));
    offsets.push_back(Json(text_offset));
    text_offset += code_points(token);
  }
  Json object = Json::object();
  object["tokens"] = std::move(tokens);
  object["token_logprobs"] = std::move(token_logprobs);
  object["top_logprobs"] = std::move(top_logprobs);
  object["text_offset"] = std::move(offsets);
  return object;
}

Json prompt_logprobs_json(std::span<const runtime::PromptLogprob> scored, const TokenText& token_text) {
  DSINFER_CHECK(token_text, "prompt logprobs need the tokenizer's token text");
  Json list = Json::array();
  list.push_back(Json());  // the first prompt token: nothing before it to score it against
  for (const runtime::PromptLogprob& token : scored) {
    // Keys are token ids as strings, as Python's json writes vLLM's dict[int, Logprob]. A prompt
    // token among the top N shows its place there (which differs from its count only on a tie), as
    // vLLM's dict keeps the top entry's value: so the ranks shown are 1..N once each.
    auto place = std::find_if(token.top.begin(), token.top.end(),
                              [&](const auto& entry) { return entry.first == token.token_id; });
    const int32_t own_rank =
        place == token.top.end() ? token.rank : static_cast<int32_t>(place - token.top.begin()) + 1;
    Json entry = Json::object();
    entry[std::to_string(token.token_id)] = prompt_entry(token.logprob, own_rank, token_text(token.token_id));
    int32_t rank = 0;
    for (const auto& [id, logprob] : token.top) {
      ++rank;
      if (id != token.token_id) entry[std::to_string(id)] = prompt_entry(logprob, rank, token_text(id));
    }
    list.push_back(std::move(entry));
  }
  return list;
}

}  // namespace dsinfer::server
