// Tokenizer: text to token ids and back, exactly as Hugging Face tokenizers does it with the
// model's tokenizer.json (byte-level BPE: DeepSeek V2/V3/R1 and the like).
//
// encode: added tokens are cut out first (added_tokens.h), the text between them is split into
// pieces (pre_tokenizer.h), and each piece is byte-pair encoded (bpe_model.h). decode: each id's
// bytes, joined and read as UTF-8 (decoder.h). tokenizer_config.json, when present, supplies the
// BOS/EOS tokens and whether encode(..., add_special_tokens=true) adds them, as transformers'
// LlamaTokenizerFast does (DeepSeek's post_processor is ByteLevel, which adds nothing).
//
// Loading is slow (a 7.5 MB JSON for DeepSeek-V3); a loaded Tokenizer is immutable apart from its
// internal word cache and may be shared by any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dsinfer::tokenizer {

class Decoder;

struct TokenizerOptions {
  // Words whose ids are remembered (0: no cache). Hugging Face's default, per thread, is 10000.
  size_t word_cache_capacity = 10000;
};

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json. Throws dsinfer::Error,
  // one line naming the file and what is wrong with it.
  static Tokenizer from_dir(const std::string& dir, const TokenizerOptions& options = {});
  // A tokenizer.json on its own: no BOS/EOS settings.
  static Tokenizer from_file(const std::string& tokenizer_json,
                             const TokenizerOptions& options = {});

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // text must be valid UTF-8 (dsinfer::Error otherwise). add_special_tokens: BOS first when
  // add_bos_token, EOS last when add_eos_token.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // Hugging Face's decode: ids no vocabulary has are skipped; invalid UTF-8 becomes U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int32_t vocab_size() const;  // one past the largest id, added tokens included
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;  // the vocabulary's spelling; empty if no such id
  bool is_special(int32_t id) const;

  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }
  const std::string& bos_token() const { return bos_token_; }  // empty if none
  const std::string& eos_token() const { return eos_token_; }
  bool add_bos_token() const { return add_bos_token_; }
  bool add_eos_token() const { return add_eos_token_; }

  // For IncrementalDetokenizer.
  const Decoder& decoder() const;

 private:
  struct Parts;
  explicit Tokenizer(std::unique_ptr<Parts> parts);
  void read_config(const std::string& path);

  std::unique_ptr<Parts> parts_;
  std::string bos_token_, eos_token_;
  std::optional<int32_t> bos_id_, eos_id_;
  bool add_bos_token_ = false;
  bool add_eos_token_ = false;
};

}  // namespace dsinfer::tokenizer
