#include "structured/grammar_spec.h"

#include <utility>

#include "core/error.h"

namespace dsinfer::structured {
namespace {

constexpr size_t kDescribeChars = 60;  // of a schema, regex or grammar in describe()

// text on one line, at most kDescribeChars bytes (never cutting a UTF-8 sequence), quoted.
std::string excerpt(std::string_view text) {
  std::string out = "\"";
  size_t end = text.size();
  if (end > kDescribeChars) {
    end = kDescribeChars;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  }
  for (char c : text.substr(0, end)) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else out += c;
  }
  out += "\"";
  if (end < text.size()) out += "...";
  return out;
}

// Appends a field whose length is part of the key, so that no two field lists give one key.
void append_field(std::string& key, std::string_view field) {
  key += std::to_string(field.size());
  key += ':';
  key += field;
}

}  // namespace

std::string_view kind_name(GrammarKind kind) {
  switch (kind) {
    case GrammarKind::kJsonObject: return "json_object";
    case GrammarKind::kJsonSchema: return "json_schema";
    case GrammarKind::kRegex: return "regex";
    case GrammarKind::kChoice: return "choice";
    case GrammarKind::kEbnf: return "grammar";
    case GrammarKind::kStructuralTag: return "structural_tag";
  }
  return "unknown";
}

GrammarSpec GrammarSpec::json_object() { return GrammarSpec{}; }

GrammarSpec GrammarSpec::json_schema(std::string schema, bool strict) {
  return GrammarSpec{GrammarKind::kJsonSchema, std::move(schema), {}, strict};
}

GrammarSpec GrammarSpec::regex(std::string pattern) {
  return GrammarSpec{GrammarKind::kRegex, std::move(pattern), {}, true};
}

GrammarSpec GrammarSpec::choice(std::vector<std::string> choices) {
  return GrammarSpec{GrammarKind::kChoice, "", std::move(choices), true};
}

GrammarSpec GrammarSpec::ebnf(std::string grammar) {
  return GrammarSpec{GrammarKind::kEbnf, std::move(grammar), {}, true};
}

GrammarSpec GrammarSpec::structural_tag(std::string json) {
  return GrammarSpec{GrammarKind::kStructuralTag, std::move(json), {}, true};
}

std::string GrammarSpec::describe() const {
  switch (kind) {
    case GrammarKind::kJsonObject:
      return "json_object";
    case GrammarKind::kJsonSchema:
      return str_cat("json_schema", strict ? " (strict) " : " ", excerpt(text));
    case GrammarKind::kChoice: {
      std::string out = str_cat("choice of ", choices.size(), " [");
      for (size_t i = 0; i < choices.size() && i < 3; ++i) out += (i ? ", " : "") + excerpt(choices[i]);
      return out + (choices.size() > 3 ? ", ...]" : "]");
    }
    case GrammarKind::kRegex:
    case GrammarKind::kEbnf:
    case GrammarKind::kStructuralTag:
      return str_cat(kind_name(kind), " ", excerpt(text));
  }
  return std::string(kind_name(kind));
}

std::string GrammarSpec::cache_key() const {
  std::string key(kind_name(kind));
  key += kind == GrammarKind::kJsonSchema && !strict ? "/loose|" : "|";
  append_field(key, text);
  for (const std::string& choice : choices) append_field(key, choice);
  return key;
}

}  // namespace dsinfer::structured
