// GrammarSpec: the constraint one request asked for, in one plain form whatever API spelled it.
//
// The server maps each spelling onto one of these kinds (parsing the request is its job):
//   kJsonObject    OpenAI response_format {"type": "json_object"}, vLLM structured_outputs.json_object
//   kJsonSchema    response_format json_schema (+ strict), vLLM json / guided_json, SGLang json_schema
//   kRegex         vLLM regex / guided_regex, SGLang regex
//   kChoice        vLLM choice / guided_choice: exactly one of the strings
//   kEbnf          vLLM grammar / guided_grammar, SGLang ebnf: EBNF as xgrammar reads it (GBNF-like,
//                  the root rule is named "root")
//   kStructuralTag response_format {"type": "structural_tag", ...}: vLLM's form with "structures"
//                  and "triggers", or xgrammar's with "format"
// `text` holds the schema, regex, grammar or structural tag as the request wrote it (JSON text for
// the JSON forms); `choices` only for kChoice.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsinfer::structured {

enum class GrammarKind { kJsonObject, kJsonSchema, kRegex, kChoice, kEbnf, kStructuralTag };

std::string_view kind_name(GrammarKind kind);  // "json_object", "json_schema", ...

struct GrammarSpec {
  GrammarKind kind = GrammarKind::kJsonObject;
  std::string text;
  std::vector<std::string> choices;
  // json_schema only. true: no member the schema does not name, as OpenAI's strict mode (xgrammar's
  // strict_mode). false: JSON Schema's own defaults (additionalProperties allowed). The schema is
  // enforced either way: a field we accept is never a silent no-op.
  bool strict = true;

  static GrammarSpec json_object();
  static GrammarSpec json_schema(std::string schema, bool strict = true);
  static GrammarSpec regex(std::string pattern);
  static GrammarSpec choice(std::vector<std::string> choices);
  static GrammarSpec ebnf(std::string grammar);
  static GrammarSpec structural_tag(std::string json);

  // One line for error messages and logs, e.g. `regex "[a-z]+"`, `json_schema (strict)`; long
  // texts are cut with "...".
  std::string describe() const;
  // Equal for specs that compile to the same grammar, different otherwise (the cache's key).
  std::string cache_key() const;

  friend bool operator==(const GrammarSpec&, const GrammarSpec&) = default;
};

}  // namespace dsinfer::structured
