#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "core/utf8.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/json_fields.h"

namespace dsinfer::tokenizer {
namespace {

// Rust's \w, which Hugging Face uses to decide what touches a single_word token:
// Alphabetic | Mark | Decimal_Number | Connector_Punctuation | Join_Control. Compiled as an
// Oniguruma pattern to know Unicode 16's characters (\p{L} adds the new letters).
constexpr std::string_view kWordCharPattern =
    R"([\p{Alphabetic}\p{L}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])";

// Unicode's White_Space property (what Rust's \s matches, and what lstrip/rstrip swallow).
bool is_white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

// Start of the character that ends at `end` (text is valid UTF-8, end > 0).
size_t previous_char_start(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xc0) == 0x80) --start;
  return start;
}

uint32_t char_at(std::string_view text, size_t at, size_t* length) {
  uint32_t c = 0;
  *length = std::max<size_t>(1, utf8_decode(text.substr(at), &c));
  return c;
}

// Where the run of white space that ends text begins.
size_t trailing_space_start(std::string_view text) {
  size_t start = text.size();
  while (start > 0) {
    size_t before = previous_char_start(text, start), length;
    if (!is_white_space(char_at(text, before, &length))) break;
    start = before;
  }
  return start;
}

// Bytes of white space that begin text.
size_t leading_space_length(std::string_view text) {
  size_t end = 0, length;
  while (end < text.size() && is_white_space(char_at(text, end, &length))) end += length;
  return end;
}

}  // namespace

void AddedTokens::Matcher::add(std::string_view content, int32_t token_index) {
  int32_t node = 0;
  for (char c : content) {
    auto byte = static_cast<uint8_t>(c);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_[node].children.emplace_back(byte, next);
      nodes_.emplace_back();
    }
    node = next;
  }
  nodes_[node].token_index = token_index;
  first_bytes_[static_cast<uint8_t>(content[0])] = true;
}

int32_t AddedTokens::Matcher::child(int32_t node, uint8_t byte) const {
  for (auto [label, next] : nodes_[node].children) {
    if (label == byte) return next;
  }
  return -1;
}

int32_t AddedTokens::Matcher::find(std::string_view text, size_t from, Match* match) const {
  for (size_t begin = from; begin < text.size(); ++begin) {
    if (!first_bytes_[static_cast<uint8_t>(text[begin])]) continue;
    int32_t node = 0, found = -1;
    for (size_t at = begin; at < text.size(); ++at) {
      node = child(node, static_cast<uint8_t>(text[at]));
      if (node < 0) break;
      if (nodes_[node].token_index >= 0) {
        found = nodes_[node].token_index;
        *match = Match{begin, at + 1};
      }
    }
    if (found >= 0) return found;
  }
  return -1;
}

AddedTokens AddedTokens::from_json(const Json& config, const BpeModel& model) {
  AddedTokens added;
  added.word_char_.emplace(Regex::from_oniguruma(kWordCharPattern));
  if (config.is_null()) return added;
  DSINFER_CHECK(config.is_array(), "\"added_tokens\" must be an array");
  auto next_id = static_cast<int32_t>(model.vocab_size());
  for (size_t i = 0; i < config.size(); ++i) {
    const Json& entry = config.at(i);
    AddedToken token;
    try {
      token.content = string_field(entry, "content");
      token.special = bool_field(entry, "special", false);
      token.single_word = bool_field(entry, "single_word", false);
      token.lstrip = bool_field(entry, "lstrip", false);
      token.rstrip = bool_field(entry, "rstrip", false);
      token.normalized = bool_field(entry, "normalized", !token.special);
    } catch (const Error& error) {
      throw Error(str_cat("added token ", i, ": ", error.what()));
    }
    if (token.content.empty()) continue;
    std::optional<int32_t> known = added.token_to_id(token.content);
    if (!known) known = model.token_to_id(token.content);
    token.id = known ? *known : next_id++;
    if (const Json* id = entry.find("id"); id && id->is_int() && id->as_int() != token.id) {
      log_warning("added token ", token.content, " has id ", id->as_int(), " in the file but ",
                  token.id, " by Hugging Face's numbering; using ", token.id);
    }
    if (token.special) added.special_contents_.insert(token.content);
    added.id_by_content_.emplace(token.content, token.id);
    auto [slot, fresh] = added.index_by_id_.emplace(token.id, added.tokens_.size());
    if (fresh) {
      added.tokens_.push_back(std::move(token));
    } else {
      added.tokens_[slot->second] = std::move(token);  // the same content again: new flags win
    }
  }
  for (size_t index = 0; index < added.tokens_.size(); ++index) {
    const AddedToken& token = added.tokens_[index];
    Matcher& matcher = token.normalized ? added.normalized_matcher_ : added.raw_matcher_;
    matcher.add(token.content, static_cast<int32_t>(index));
    added.id_limit_ = std::max(added.id_limit_, token.id + 1);
  }
  return added;
}

const AddedToken* AddedTokens::find(int32_t id) const {
  auto found = index_by_id_.find(id);
  return found == index_by_id_.end() ? nullptr : &tokens_[found->second];
}

std::optional<int32_t> AddedTokens::token_to_id(std::string_view content) const {
  auto found = id_by_content_.find(content);
  if (found == id_by_content_.end()) return std::nullopt;
  return found->second;
}

bool AddedTokens::is_special(int32_t id) const {
  const AddedToken* token = find(id);
  return token && special_contents_.contains(token->content);
}

bool AddedTokens::stands_alone(std::string_view sentence, size_t begin, size_t end) const {
  Match unused;
  if (begin > 0) {
    size_t before = previous_char_start(sentence, begin);
    if (word_char_->find(sentence.substr(before, begin - before), 0, &unused)) return false;
  }
  if (end == sentence.size()) return true;
  size_t length;
  char_at(sentence, end, &length);
  return !word_char_->find(sentence.substr(end, length), 0, &unused);
}

// Hugging Face's AddedVocabulary::find_matches: the span an lstrip/rstrip token claims may reach
// into white space before it (never before the previous token) and after it.
void AddedTokens::find_in(std::string_view sentence, const Matcher& matcher,
                          std::vector<TextSegment>& out) const {
  size_t claimed = 0;  // end of the last token's span
  Match match;
  for (size_t from = 0; from < sentence.size();) {
    int32_t index = matcher.find(sentence, from, &match);
    if (index < 0) break;
    from = match.end;
    const AddedToken& token = tokens_[index];
    if (token.single_word && !stands_alone(sentence, match.begin, match.end)) continue;
    size_t begin = match.begin, end = match.end;
    if (token.lstrip) begin = std::max(trailing_space_start(sentence.substr(0, begin)), claimed);
    if (token.rstrip) end += leading_space_length(sentence.substr(end));
    if (claimed < begin) out.push_back({sentence.substr(claimed, begin - claimed)});
    out.push_back({sentence.substr(begin, end - begin), token.id});
    claimed = end;
  }
  if (claimed < sentence.size()) out.push_back({sentence.substr(claimed)});
}

void AddedTokens::split(std::string_view text, std::vector<TextSegment>& out) const {
  out.clear();
  if (text.empty()) return;
  if (raw_matcher_.empty()) {
    out.push_back({text});
  } else {
    find_in(text, raw_matcher_, out);
  }
  if (normalized_matcher_.empty()) return;
  std::vector<TextSegment> first_pass;
  first_pass.swap(out);
  for (const TextSegment& segment : first_pass) {
    if (segment.added_id >= 0) {
      out.push_back(segment);
    } else {
      find_in(segment.text, normalized_matcher_, out);
    }
  }
}

}  // namespace dsinfer::tokenizer
