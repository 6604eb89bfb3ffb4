#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "core/file.h"
#include "core/json.h"
#include "core/log.h"
#include "core/utf8.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/pre_tokenizer.h"

namespace dsinfer::tokenizer {
namespace {

// The member `key`, or a null value when absent (tokenizer.json writes both for "none").
const Json& field_or_null(const Json& object, std::string_view key) {
  static const Json null;
  const Json* value = object.find(key);
  return value ? *value : null;
}

// Runs build(), prefixing any error with the section of the file it was reading.
template <typename Build>
auto in_section(std::string_view section, Build build) {
  try {
    return build();
  } catch (const Error& error) {
    throw Error(str_cat(section, ": ", error.what()));
  }
}

// Normalizers change the text before pre-tokenization; DeepSeek's is an empty Sequence, and no
// other kind is implemented.
void check_normalizer(const Json& normalizer) {
  if (normalizer.is_null()) return;
  const std::string& type = type_field(normalizer);
  if (type == "Sequence") {
    const Json& members = required_field(normalizer, "normalizers");
    if (members.is_array() && members.size() == 0) return;
    DSINFER_CHECK(members.is_array(), "Sequence \"normalizers\" must be an array");
    check_normalizer(members.at(0));
    return;
  }
  throw Error(str_cat("normalizer type \"", type, "\" is not supported"));
}

// The post-processor only matters for encode(..., add_special_tokens=true), where we follow
// tokenizer_config.json as transformers' LlamaTokenizerFast does. ByteLevel's only effect is on
// offsets, which we do not report.
void check_post_processor(const Json& post_processor) {
  if (post_processor.is_null()) return;
  const std::string& type = type_field(post_processor);
  if (type != "ByteLevel") {
    log_warning("post_processor \"", type, "\" is ignored: add_special_tokens follows ",
                "tokenizer_config.json's add_bos_token/add_eos_token");
  }
}

// bos_token/eos_token in tokenizer_config.json: a string, an {"__type": "AddedToken",
// "content": ...} object, or null.
std::string special_token_content(const Json& config, std::string_view key) {
  const Json& value = field_or_null(config, key);
  if (value.is_null()) return "";
  if (value.is_string()) return value.as_string();
  DSINFER_CHECK(value.is_object(), "\"", key, "\" must be a string or an AddedToken object");
  return in_section(key, [&] { return string_field(value, "content"); });
}

}  // namespace

struct Tokenizer::Parts {
  PreTokenizer pre_tokenizer;
  BpeModel model;
  AddedTokens added;
  Decoder decoder;
};

Tokenizer::Tokenizer(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_file(const std::string& path, const TokenizerOptions& options) {
  std::string text = read_file(path);
  try {
    Json root = Json::parse(text);
    text = std::string();  // 7.5 MB for DeepSeek: no need to hold it while building
    DSINFER_CHECK(root.is_object(), "expected a JSON object, got ", Json::type_name(root.type()));
    in_section("normalizer", [&] { check_normalizer(field_or_null(root, "normalizer")); });
    in_section("post_processor",
               [&] { check_post_processor(field_or_null(root, "post_processor")); });
    for (const char* option : {"truncation", "padding"}) {
      if (!field_or_null(root, option).is_null()) {
        log_warning(path, ": \"", option, "\" is ignored");
      }
    }
    PreTokenizer pre_tokenizer = in_section("pre_tokenizer", [&] {
      return PreTokenizer::from_json(field_or_null(root, "pre_tokenizer"));
    });
    const Json& model_config = required_field(root, "model");
    BpeModel model = in_section("model", [&] {
      return BpeModel::from_json(model_config, pre_tokenizer.byte_level(),
                                 options.word_cache_capacity);
    });
    AddedTokens added = in_section("added_tokens", [&] {
      return AddedTokens::from_json(field_or_null(root, "added_tokens"), model);
    });
    Decoder decoder = in_section("decoder", [&] {
      return Decoder::from_json(field_or_null(root, "decoder"), model, added);
    });
    return Tokenizer(std::make_unique<Parts>(
        Parts{std::move(pre_tokenizer), std::move(model), std::move(added), std::move(decoder)}));
  } catch (const Error& error) {
    throw Error(str_cat(path, ": ", error.what()));
  }
}

Tokenizer Tokenizer::from_dir(const std::string& dir, const TokenizerOptions& options) {
  Tokenizer tokenizer = from_file(dir + "/tokenizer.json", options);
  std::string config_path = dir + "/tokenizer_config.json";
  if (file_exists(config_path)) tokenizer.read_config(config_path);
  return tokenizer;
}

void Tokenizer::read_config(const std::string& path) {
  try {
    Json config = Json::parse(read_file(path));
    DSINFER_CHECK(config.is_object(), "expected a JSON object, got ",
                  Json::type_name(config.type()));
    add_bos_token_ = bool_field(config, "add_bos_token", false);
    add_eos_token_ = bool_field(config, "add_eos_token", false);
    bos_token_ = special_token_content(config, "bos_token");
    eos_token_ = special_token_content(config, "eos_token");
    for (auto [token, id] : {std::pair{&bos_token_, &bos_id_}, std::pair{&eos_token_, &eos_id_}}) {
      if (token->empty()) continue;
      *id = token_to_id(*token);
      DSINFER_CHECK(*id, "special token \"", *token, "\" is not in the vocabulary");
    }
  } catch (const Error& error) {
    throw Error(str_cat(path, ": ", error.what()));
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  DSINFER_CHECK(utf8_valid(text), "encode: the text is not valid UTF-8");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_special_tokens && add_bos_token_ && bos_id_) ids.push_back(*bos_id_);
  std::vector<TextSegment> segments;
  Pieces pieces;
  parts_->added.split(text, segments);
  for (const TextSegment& segment : segments) {
    if (segment.added_id >= 0) {
      ids.push_back(segment.added_id);
      continue;
    }
    parts_->pre_tokenizer.split(segment.text, pieces);
    for (std::string_view piece : pieces.views()) parts_->model.encode(piece, ids);
  }
  if (add_special_tokens && add_eos_token_ && eos_id_) ids.push_back(*eos_id_);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Decoder& decoder = parts_->decoder;
  std::string bytes;
  bool first = true;
  for (int32_t id : ids) {
    std::optional<std::string_view> piece = decoder.piece(id, skip_special_tokens);
    if (!piece) continue;
    if (!first) bytes += decoder.separator();
    bytes += *piece;
    first = false;
  }
  if (utf8_valid(bytes)) return bytes;
  std::string text;
  append_utf8_lossy(text, bytes);
  return text;
}

int32_t Tokenizer::vocab_size() const {
  return std::max(parts_->model.id_limit(), parts_->added.id_limit());
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (std::optional<int32_t> id = parts_->added.token_to_id(token)) return id;
  return parts_->model.token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* added = parts_->added.find(id)) return added->content;
  return std::string(parts_->model.id_to_token(id).value_or(""));
}

bool Tokenizer::is_special(int32_t id) const { return parts_->added.is_special(id); }

const Decoder& Tokenizer::decoder() const { return parts_->decoder; }

}  // namespace dsinfer::tokenizer
