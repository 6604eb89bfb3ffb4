#include "tokenizer/pre_tokenizer.h"

#include "core/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/unicode_sets.h"

namespace dsinfer::tokenizer {
namespace {

// GPT-2's word regex, as the ByteLevel pre-tokenizer applies it (Oniguruma syntax).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Hugging Face writes these with Rust's `regex` crate and char predicates. They are spelled here
// in syntax that Oniguruma and PCRE2 share, and compiled as Oniguruma patterns so that they learn
// the characters of Unicode 16 (oniguruma.h); \p{L} next to \p{Alphabetic} adds exactly those.
// Rust's \w is Alphabetic | Mark | Decimal_Number | Connector_Punctuation | Join_Control, and its
// \s and char::is_whitespace are White_Space.
constexpr std::string_view kWhitespaceWordPattern =
    R"([\p{Alphabetic}\p{L}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}]+)"
    R"(|[^\p{Alphabetic}\p{L}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\p{White_Space}]+)";
constexpr std::string_view kWhiteSpaceCharPattern = R"(\p{White_Space})";
constexpr std::string_view kNumericCharPattern = R"(\p{N})";  // char::is_numeric: Nd, Nl, No

// char::is_ascii_punctuation, or punctuation by the old Unicode table the Punctuation
// pre-tokenizer reads (unicode_sets.h). PCRE2 syntax.
std::string punctuation_char_pattern() {
  return str_cat("(?![", unicode_set("PunctuationMissing"),
                 R"(])[\p{P}\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e)", unicode_set("PunctuationExtra"),
                 "]");
}

SplitBehavior parse_behavior(const std::string& name) {
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  throw Error(str_cat("unknown split behavior \"", name, "\""));
}

// Split's "pattern": {"Regex": "..."} (Oniguruma syntax) or {"String": "..."} (literal text).
Regex parse_pattern(const Json& pattern) {
  DSINFER_CHECK(pattern.is_object() && pattern.size() == 1,
                "Split \"pattern\" must be {\"Regex\": ...} or {\"String\": ...}");
  if (const Json* regex = pattern.find("Regex")) {
    DSINFER_CHECK(regex->is_string(), "Split \"pattern\".Regex must be a string");
    return Regex::from_oniguruma(regex->as_string());
  }
  std::string escaped;
  for (char c : string_field(pattern, "String")) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) escaped += '\\';
    escaped += c;
  }
  return Regex(escaped);
}

}  // namespace

PreTokenizer PreTokenizer::from_json(const Json& config) {
  PreTokenizer pre_tokenizer;
  if (!config.is_null()) pre_tokenizer.add_steps(config);
  return pre_tokenizer;
}

void PreTokenizer::add_split(Regex regex, SplitBehavior behavior, bool invert) {
  steps_.push_back(Step{Step::Kind::kSplit, std::move(regex), behavior, invert});
}

void PreTokenizer::add_steps(const Json& config) {
  const std::string& type = type_field(config);
  DSINFER_CHECK(!byte_level_, "ByteLevel must be the last pre-tokenizer (", type,
                " after it is not supported)");
  if (type == "Sequence") {
    const Json& members = required_field(config, "pretokenizers");
    DSINFER_CHECK(members.is_array(), "Sequence \"pretokenizers\" must be an array");
    for (const Json& member : members.as_array()) add_steps(member);
  } else if (type == "Split") {
    add_split(parse_pattern(required_field(config, "pattern")),
              parse_behavior(string_field(config, "behavior")),
              bool_field(config, "invert", false));
  } else if (type == "ByteLevel") {
    if (bool_field(config, "add_prefix_space", true)) {
      steps_.push_back(Step{Step::Kind::kPrefixSpace, std::nullopt});
    }
    if (bool_field(config, "use_regex", true)) {
      add_split(Regex::from_oniguruma(kGpt2Pattern), SplitBehavior::kIsolated, false);
    }
    byte_level_ = true;
  } else if (type == "Whitespace") {
    add_split(Regex::from_oniguruma(kWhitespaceWordPattern), SplitBehavior::kRemoved,
              /*invert=*/true);
  } else if (type == "WhitespaceSplit") {
    add_split(Regex::from_oniguruma(kWhiteSpaceCharPattern), SplitBehavior::kRemoved, false);
  } else if (type == "Digits") {
    add_split(Regex::from_oniguruma(kNumericCharPattern),
              bool_field(config, "individual_digits", false) ? SplitBehavior::kIsolated
                                                             : SplitBehavior::kContiguous,
              false);
  } else if (type == "Punctuation") {
    const Json* behavior = config.find("behavior");
    add_split(Regex(punctuation_char_pattern()),
              behavior && !behavior->is_null() ? parse_behavior(string_field(config, "behavior"))
                                               : SplitBehavior::kIsolated,
              false);
  } else {
    throw Error(str_cat("pre-tokenizer type \"", type, "\" is not supported"));
  }
}

void PreTokenizer::split(std::string_view text, Pieces& pieces) const {
  pieces.current_.clear();
  pieces.prefixed_.clear();
  if (!text.empty()) pieces.current_.push_back(text);
  for (const Step& step : steps_) {
    pieces.next_.clear();
    for (std::string_view piece : pieces.current_) {
      if (step.kind == Step::Kind::kSplit) {
        apply_split(step, piece, pieces);
      } else if (piece.front() == ' ') {
        pieces.next_.push_back(piece);
      } else {
        pieces.next_.push_back(pieces.prefixed_.emplace_back(str_cat(" ", piece)));
      }
    }
    pieces.current_.swap(pieces.next_);
  }
}

// Follows Hugging Face's NormalizedString::split: the piece becomes alternating segments of text
// between matches and matches (empty matches included), the behavior decides which segments are
// kept, dropped or glued together, and empty results are dropped at the end.
void PreTokenizer::apply_split(const Step& step, std::string_view piece, Pieces& pieces) const {
  pieces.matches_.clear();
  step.regex->find_all_in_valid(piece, pieces.matches_);
  auto& segments = pieces.segments_;
  segments.clear();
  size_t previous_end = 0;
  for (const Match& match : pieces.matches_) {
    if (match.begin != previous_end) segments.push_back({previous_end, match.begin, step.invert});
    segments.push_back({match.begin, match.end, !step.invert});
    previous_end = match.end;
  }
  if (previous_end != piece.size()) segments.push_back({previous_end, piece.size(), step.invert});

  auto& kept = pieces.kept_;
  kept.clear();
  for (size_t i = 0; i < segments.size(); ++i) {
    const Pieces::Segment& segment = segments[i];
    bool after_match = i > 0 && segments[i - 1].is_match;
    switch (step.behavior) {
      case SplitBehavior::kIsolated: kept.push_back({segment.begin, segment.end}); break;
      case SplitBehavior::kRemoved:
        if (!segment.is_match) kept.push_back({segment.begin, segment.end});
        break;
      case SplitBehavior::kMergedWithPrevious:
        if (segment.is_match && i > 0 && !after_match) {
          kept.back().end = segment.end;
        } else {
          kept.push_back({segment.begin, segment.end});
        }
        break;
      case SplitBehavior::kMergedWithNext:
        if (segment.is_match && i + 1 < segments.size() && !segments[i + 1].is_match) {
          segments[i + 1].begin = segment.begin;
        } else {
          kept.push_back({segment.begin, segment.end});
        }
        break;
      case SplitBehavior::kContiguous:
        if (i > 0 && segment.is_match == after_match) {
          kept.back().end = segment.end;
        } else {
          kept.push_back({segment.begin, segment.end});
        }
        break;
    }
  }
  for (const Match& span : kept) {
    if (span.end > span.begin)
      pieces.next_.push_back(piece.substr(span.begin, span.end - span.begin));
  }
}

}  // namespace dsinfer::tokenizer
