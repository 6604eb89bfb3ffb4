#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <bit>
#include <cstdio>

#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"

namespace dsinfer::tokenizer {
namespace {

// Ids index a vector, so an absurd id in a corrupt file must not become a huge allocation.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

std::string quoted(std::string_view text) {
  std::string out;
  json_escape(out, text);
  return out;
}

// One "merges" entry: "left right" (older files) or ["left", "right"].
std::pair<std::string, std::string> parse_merge(const Json& merge, size_t index) {
  if (merge.is_array()) {
    DSINFER_CHECK(merge.size() == 2 && merge.at(0).is_string() && merge.at(1).is_string(), "merge ",
                  index, " must be a pair of strings");
    return {merge.at(0).as_string(), merge.at(1).as_string()};
  }
  DSINFER_CHECK(merge.is_string(), "merge ", index, " must be a string or a pair of strings");
  const std::string& line = merge.as_string();
  size_t space = line.find(' ');
  DSINFER_CHECK(space != std::string::npos && line.find(' ', space + 1) == std::string::npos,
                "merge ", index, " ", quoted(line), " is not two tokens separated by one space");
  return {line.substr(0, space), line.substr(space + 1)};
}

}  // namespace

// Merge rules by the pair of ids they join: open addressing over a power-of-two table, because
// the lookup sits in the innermost loop of encoding.
class BpeModel::MergeTable {
 public:
  explicit MergeTable(size_t rules) {
    size_t capacity = std::bit_ceil(std::max<size_t>(16, rules * 2));
    shift_ = 64 - std::countr_zero(capacity);
    slots_.assign(capacity, Slot{kEmpty, {}});
  }

  // A later rule for the same pair replaces the earlier one, as in Hugging Face.
  void insert(int32_t left, int32_t right, MergeRule rule) {
    uint64_t key = pack(left, right);
    size_t slot = home(key);
    while (slots_[slot].key != kEmpty && slots_[slot].key != key) slot = next(slot);
    slots_[slot] = Slot{key, rule};
  }

  const MergeRule* find(int32_t left, int32_t right) const {
    uint64_t key = pack(left, right);
    for (size_t slot = home(key);; slot = next(slot)) {
      if (slots_[slot].key == key) return &slots_[slot].rule;
      if (slots_[slot].key == kEmpty) return nullptr;
    }
  }

 private:
  struct Slot {
    uint64_t key;
    MergeRule rule;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are non-negative: never a real key
  static uint64_t pack(int32_t left, int32_t right) {
    return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
  }
  size_t home(uint64_t key) const { return (key * 0x9e3779b97f4a7c15ull) >> shift_; }
  size_t next(size_t slot) const { return (slot + 1) & (slots_.size() - 1); }

  std::vector<Slot> slots_;
  int shift_ = 0;
};

BpeModel::BpeModel() = default;
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;
BpeModel::~BpeModel() = default;

BpeModel BpeModel::from_json(const Json& model, bool byte_level, size_t cache_capacity) {
  DSINFER_CHECK(model.is_object(), "\"model\" must be an object");
  if (const Json* type = model.find("type")) {
    DSINFER_CHECK(type->is_string() && type->as_string() == "BPE", "model type ",
                  type->is_string() ? quoted(type->as_string()) : std::string("(not a string)"),
                  " is not supported (only BPE)");
  }
  const Json* dropout = model.find("dropout");
  DSINFER_CHECK(!dropout || dropout->is_null() || dropout->as_double() == 0.0,
                "BPE dropout is not supported (it makes encoding random)");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const Json* value = model.find(affix);
    DSINFER_CHECK(!value || value->is_null() || (value->is_string() && value->as_string().empty()),
                  "BPE ", affix, " is not supported");
  }

  BpeModel bpe;
  bpe.byte_level_ = byte_level;
  bpe.fuse_unk_ = bool_field(model, "fuse_unk", false);
  bpe.byte_fallback_ = bool_field(model, "byte_fallback", false);
  bpe.ignore_merges_ = bool_field(model, "ignore_merges", false);
  bpe.cache_ = std::make_unique<WordCache>(cache_capacity);

  const Json& vocab = required_field(model, "vocab");
  DSINFER_CHECK(vocab.is_object(), "model \"vocab\" must be an object");
  bpe.vocab_.reserve(vocab.size());
  int64_t max_id = -1;
  for (const auto& [token, id] : vocab.as_object()) {
    DSINFER_CHECK(id.is_int() && id.as_int() >= 0 && id.as_int() <= kMaxTokenId, "vocab entry ",
                  quoted(token), " has id ", id.dump(), ", not an integer in [0, ", kMaxTokenId,
                  "]");
    bpe.vocab_.emplace(token, static_cast<int32_t>(id.as_int()));
    max_id = std::max(max_id, id.as_int());
  }
  bpe.tokens_.assign(static_cast<size_t>(max_id + 1), std::string_view());
  for (const auto& [token, id] : bpe.vocab_) {
    if (!bpe.tokens_[id].data()) bpe.tokens_[id] = token;
  }

  if (const Json* unk = model.find("unk_token"); unk && !unk->is_null()) {
    DSINFER_CHECK(unk->is_string(), "\"unk_token\" must be a string");
    bpe.unk_id_ = bpe.token_to_id(unk->as_string());
    DSINFER_CHECK(bpe.unk_id_, "unk_token ", quoted(unk->as_string()), " is not in the vocab");
  }
  for (int byte = 0; byte < 256; ++byte) {
    std::string spelling = to_byte_level(std::string(1, static_cast<char>(byte)));
    bpe.byte_ids_[byte] = bpe.token_to_id(spelling).value_or(-1);
  }

  const Json& merges = required_field(model, "merges");
  DSINFER_CHECK(merges.is_array(), "model \"merges\" must be an array");
  bpe.merges_ = std::make_unique<MergeTable>(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    // A pair, not structured bindings: clang 14 cannot capture those in the lambda below.
    std::pair<std::string, std::string> merge = parse_merge(merges.at(rank), rank);
    const std::string& left = merge.first;
    const std::string& right = merge.second;
    auto id_of = [&](const std::string& token) {
      std::optional<int32_t> id = bpe.token_to_id(token);
      DSINFER_CHECK(id, "merge ", rank, " (", quoted(left), ", ", quoted(right), ") names ",
                    quoted(token), ", which is not in the vocab");
      return *id;
    };
    int32_t left_id = id_of(left), right_id = id_of(right);
    bpe.merges_->insert(left_id, right_id,
                        MergeRule{static_cast<int32_t>(rank), id_of(left + right)});
  }
  return bpe;
}

void BpeModel::push_symbol(std::vector<Symbol>& symbols, int32_t id) {
  auto index = static_cast<int32_t>(symbols.size());
  symbols.push_back(Symbol{id, index - 1, -1});
  if (index > 0) symbols[index - 1].next = index;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto found = vocab_.find(token);
  if (found == vocab_.end()) return std::nullopt;
  return found->second;
}

std::optional<std::string_view> BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_limit() || !tokens_[id].data()) return std::nullopt;
  return tokens_[id];
}

// One character (its vocabulary spelling) that starts a symbol, or the fallbacks when the
// vocabulary lacks it. pending_unk holds an unknown token not yet added, so runs can be fused.
void BpeModel::add_symbol(std::string_view text, std::vector<Symbol>& symbols,
                          int32_t& pending_unk) const {
  if (std::optional<int32_t> id = token_to_id(text)) {
    if (pending_unk >= 0) push_symbol(symbols, std::exchange(pending_unk, -1));
    push_symbol(symbols, *id);
    return;
  }
  if (byte_fallback_) {
    std::vector<int32_t> byte_ids;
    for (char byte : text) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", static_cast<unsigned char>(byte));
      std::optional<int32_t> id = token_to_id(name);
      if (!id) break;
      byte_ids.push_back(*id);
    }
    // Like Hugging Face, byte tokens go in before an unknown token still pending.
    if (byte_ids.size() == text.size()) {
      for (int32_t id : byte_ids) push_symbol(symbols, id);
      return;
    }
  }
  if (!unk_id_) return;  // no unknown token: the character is dropped
  if (pending_unk >= 0 && !fuse_unk_) push_symbol(symbols, pending_unk);
  pending_unk = *unk_id_;
}

void BpeModel::split_into_symbols(std::string_view piece, std::vector<Symbol>& symbols) const {
  symbols.clear();
  int32_t pending_unk = -1;
  if (byte_level_) {
    for (size_t i = 0; i < piece.size(); ++i) {
      int32_t id = byte_ids_[static_cast<uint8_t>(piece[i])];
      if (id >= 0 && pending_unk < 0) {
        push_symbol(symbols, id);
      } else {
        add_symbol(to_byte_level(piece.substr(i, 1)), symbols, pending_unk);
      }
    }
  } else {
    for (size_t i = 0; i < piece.size();) {
      uint32_t code_point;
      size_t length = std::max<size_t>(1, utf8_decode(piece.substr(i), &code_point));
      add_symbol(piece.substr(i, length), symbols, pending_unk);
      i += length;
    }
  }
  if (pending_unk >= 0) push_symbol(symbols, pending_unk);
}

void BpeModel::merge(std::vector<Symbol>& symbols) const {
  // A pair that a rule merges, as it was when found. Token ids only grow as symbols merge, so
  // the pair is still there exactly when both symbols still have these ids.
  struct Candidate {
    int32_t rank;
    int32_t left;  // index of the pair's left symbol
    int32_t left_id;
    int32_t right_id;
    int32_t result;
  };
  // A min-heap on (rank, position): the earliest rule first, the leftmost pair on ties.
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  thread_local std::vector<Candidate> heap;
  heap.clear();
  auto consider = [&](int32_t left) {
    int32_t right = symbols[left].next;
    if (right < 0) return;
    int32_t left_id = symbols[left].id, right_id = symbols[right].id;
    if (const MergeRule* rule = merges_->find(left_id, right_id)) {
      heap.push_back(Candidate{rule->rank, left, left_id, right_id, rule->result});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.left];
    if (left.id != top.left_id || left.next < 0 || symbols[left.next].id != top.right_id) continue;

    Symbol& right = symbols[left.next];
    left.id = top.result;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    right.id = -1;
    if (left.prev >= 0) consider(left.prev);
    consider(top.left);
  }
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& ids) const {
  if (ignore_merges_) {
    std::optional<int32_t> whole =
        token_to_id(byte_level_ ? to_byte_level(piece) : std::string(piece));
    if (whole) {
      ids.push_back(*whole);
      return;
    }
  }
  if (byte_level_ && piece.size() == 1 && byte_ids_[static_cast<uint8_t>(piece[0])] >= 0) {
    ids.push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (cache_->lookup(piece, ids)) return;

  thread_local std::vector<Symbol> symbols;
  split_into_symbols(piece, symbols);
  merge(symbols);
  size_t first = ids.size();
  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next)
    ids.push_back(symbols[i].id);
  cache_->insert(piece, std::span<const int32_t>(ids).subspan(first));
}

}  // namespace dsinfer::tokenizer
