// Structural tags: free text in which tagged regions must follow a schema (tool calls written
// between begin and end markers, for instance).
//
// Two spellings reach us. vLLM's (and SGLang's) response_format:
//   {"type": "structural_tag",
//    "structures": [{"begin": "<function=f>", "schema": {...}, "end": "</function>"}, ...],
//    "triggers": ["<function="]}
// and xgrammar's own: {"type": "structural_tag", "format": {...}}. The first is rewritten into the
// second (a "triggered_tags" format whose tags hold "json_schema" contents), which is what
// xgrammar's C++ core reads.
#pragma once

#include <string>
#include <string_view>

namespace dsinfer::structured {

// The structural tag as xgrammar's JSON. Throws dsinfer::Error, naming the field at fault, when
// `json` is neither form (the caller prefixes what the text was).
std::string structural_tag_for_xgrammar(std::string_view json);

// The same tag (xgrammar's form) with `max_whitespace` as the "max_whitespace_cnt" of each JSON
// schema content that does not set its own. xgrammar's tags always allow free whitespace inside
// JSON; unbounded, a weak model can spend every token on blanks (the bound GrammarCompilerOptions
// puts on the other JSON forms).
std::string bound_json_whitespace(std::string_view xgrammar_json, int max_whitespace);

}  // namespace dsinfer::structured
