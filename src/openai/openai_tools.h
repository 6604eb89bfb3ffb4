// Tool calling in a chat request: `tools`, `tool_choice`, and the `tool_calls` of the answer.
//
// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}].
// They reach the chat template as sent (the template renders them into the prompt); only their
// outline is checked, so that a template never meets a tool without a name. `type` may be left
// out (vLLM's default, "function"). `strict: true` is refused: only constrained decoding can
// promise arguments that match the schema, and that arrives with structured output (issue 12,
// item 2).
//
// tool_choice, as vLLM reads it:
//   "none"  the tools are still rendered; the output is plain text, never parsed for calls.
//   "auto"  (the default when tools are given) the output goes through --tool-call-parser; a
//           server started without --enable-auto-tool-choice and --tool-call-parser answers 400.
//   "required", {"type": "function", "function": {"name"}}: the answer is tool calls (one or more
//           of the offered functions; exactly one call of the named one), forced by constrained
//           decoding in the --tool-call-parser's own format with each function's parameters as a
//           JSON schema (openai_structured.h, forced_tool_call), and read back by that parser. A
//           server without --tool-call-parser answers 400 (it knows no format to force);
//           --enable-auto-tool-choice is not needed, as in vLLM.
#pragma once

#include <string>
#include <vector>

#include "core/json.h"
#include "openai/openai_fields.h"
#include "openai/tool_call_parser.h"

namespace dsinfer::server {

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

// body["tools"]: null when absent or empty, else the list as sent, its outline checked.
Json parse_tools(const RequestFields& body);
// body["tool_choice"]; "auto" when absent and tools were given, else "none". "required" and a named
// function need tools, and the name must be one of them (400 otherwise).
ToolChoice parse_tool_choice(const RequestFields& body, const Json& tools);
// The function a named tool_choice names; empty for the other choices.
std::string tool_choice_function(const RequestFields& body);

// How one answer is searched for calls.
struct ToolParsing {
  std::string parser;                // a --tool-call-parser name; empty: the output is not parsed
  std::vector<std::string> offered;  // the request's function names: a call to any other is content
  size_t max_calls = 0;              // parallel_tool_calls false: 1 (calls after it are dropped); 0: any

  bool enabled() const { return !parser.empty(); }
};

// The parsing a request gets on this server (`parser` and `auto_enabled` are its flags). Throws
// the 400 when the request wants "auto" and the server was not started for it, or forces a call on
// a server without a parser.
ToolParsing tool_parsing(const Json& tools, ToolChoice choice, const std::string& parser, bool auto_enabled);

// Throws dsinfer::Error when the server's flags do not go together or name no known parser.
void check_tool_flags(const std::string& parser, bool auto_enabled);

// {"id", "type": "function", "function": {"name", "arguments"}}: a call of message.tool_calls.
Json tool_call_json(const ToolCall& call);

}  // namespace dsinfer::server
