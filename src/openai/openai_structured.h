// Structured output and logit_bias as the clients of OpenAI, vLLM and SGLang spell them (issue 12).
//
// Every spelling of a constraint becomes one structured::GrammarSpec:
//   OpenAI    response_format {"type": "json_object"}, {"type": "json_schema", "json_schema":
//             {"name", "schema", "strict"}}, {"type": "structural_tag", ...} ("text": none)
//   vLLM      structured_outputs {json | regex | choice | grammar | json_object | structural_tag},
//             and the older guided_json / guided_regex / guided_choice / guided_grammar with
//             guided_decoding_backend "xgrammar" or "auto" (xgrammar is the only backend here)
//   SGLang    regex, ebnf, json_schema
// A request may carry one constraint at most: two (in one spelling or across them) are a 400, as
// is a field we cannot honour (another decoding backend, a custom whitespace pattern). JSON schemas
// are strict (no member the schema does not name) unless response_format says "strict": false.
// The grammar is compiled later (structured_output.h), where a schema that does not compile
// becomes a 400 with xgrammar's message. Parsing only: this file needs no xgrammar.
//
// logit_bias: {"token id": bias}, ids as decimal strings, biases in [-100, 100]; the engine checks
// the ids against the vocabulary (a 400 naming logit_bias).
//
// A forced tool call (tool_choice "required" or a named function, openai_tools.h) is a constraint
// too: a structural tag that writes the --tool-call-parser's own call format, with each function's
// `parameters` as the JSON schema of its arguments, so that the parser reads back valid calls.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/request.h"
#include "openai/openai_fields.h"
#include "openai/openai_tools.h"
#include "structured/grammar_spec.h"

namespace dsinfer::server {

struct StructuredOutputRequest {
  structured::GrammarSpec spec;
  std::string field;  // where the request spelled it ("response_format", "guided_regex", ...): a 400's param
};

// The request's constraint, if any. Throws a 400 ProtocolError for malformed or unsupported
// spellings and for more than one constraint.
std::optional<StructuredOutputRequest> parse_structured_output(const RequestFields& body);

std::vector<runtime::LogitBias> parse_logit_bias(const RequestFields& body);

// The constraint of a chat request: `requested` (its structured-output fields), or for tool_choice
// "required" / a named function the forced call in `parser`'s format (`tools` as parse_tools
// returned them; `function` the named one, or empty for any; one call only unless `parallel`).
// Both at once is a 400.
std::optional<StructuredOutputRequest> chat_constraint(std::optional<StructuredOutputRequest> requested,
                                                       const Json& tools, ToolChoice choice,
                                                       const std::string& function, const std::string& parser,
                                                       bool parallel = true);

}  // namespace dsinfer::server
