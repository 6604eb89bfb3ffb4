// Tool calls in the model's own text (`--tool-call-parser deepseek_v3|deepseek_v31|kimi_k2`, vLLM's
// names): the calls become `tool_calls` of the answer, the text around them its `content`.
//
// Every published layout is a section of calls between special tokens (the exact strings and where
// they come from: tool_call_parser_formats.cc):
//   SECTION_BEGIN  (CALL_BEGIN header HEADER_END arguments CALL_END)*  SECTION_END
// Text outside sections is content, kept verbatim. Inside a section, text between calls is dropped
// (whitespace in practice). A missing SECTION_END after complete calls is accepted, since a model
// may stop on EOS right after its last call. The arguments are returned as the model wrote them,
// whitespace trimmed (and DeepSeek-V3's ```json fence removed), never re-serialized, so that the
// streamed pieces add up to exactly the same string.
//
// A call naming a function the request did not offer is not a call: from that call on (from its
// section's start when it is the section's first call) the text is content, verbatim, in parse()
// and in the stream alike (the name is known before any of the call has been sent), so a client
// never gets a call it cannot run. Calls before it stay calls.
//
// Malformed output (arguments that are not a JSON object, a header without a name, a call cut
// off before CALL_END): parse() reports the error and returns no calls and the whole text as
// content, as vLLM's parsers do when extraction fails; the client sees what the model wrote
// instead of a call it cannot run. A stream cannot take back what it has sent: streamed() tells
// the caller afterwards (the error, and every call with its whole arguments).
//
// Streaming: push() takes the text pieces in order, split anywhere (inside a special token or a
// UTF-8 character too), and returns what is settled: content, and per call first {index, id, name}
// then pieces of `arguments`. Text that may still become a marker ("...<｜tool▁ca") is held until
// the next piece settles it; finish() releases what is left. For well-formed output the deltas
// always add up to parse() of the whole text (the tests check every split).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsinfer::server {

// One published layout: its special tokens, and how to read a call's header.
struct ToolCallFormat {
  std::string_view name;  // the --tool-call-parser name
  std::string_view section_begin;
  std::string_view section_end;
  std::string_view call_begin;
  std::string_view header_end;  // between the header (the function's name) and the arguments
  std::string_view call_end;
  std::string_view arguments_fence;  // closes the arguments before CALL_END ("```"), or empty
  // header (whitespace trimmed) -> the function's name, and the model's own call id where its
  // format has one (else id is left empty). False when the header names no function.
  bool (*read_header)(std::string_view header, std::string* name, std::string* id);
};

// Throws dsinfer::Error naming the known parsers when name is none of them.
const ToolCallFormat& tool_call_format(std::string_view name);
std::vector<std::string_view> tool_call_parser_names();

struct ToolCall {
  std::string id;         // "call_" + 32 hex digits, or the model's own id (Kimi: "functions.NAME:0")
  std::string name;
  std::string arguments;  // a JSON object, as text
};

struct ToolCallParse {
  std::string content;  // text outside the calls; the whole text when error is set
  std::vector<ToolCall> calls;
  std::string error;    // empty, or why the calls could not be read (then calls is empty)
};

// One call's part of a streamed delta.
struct ToolCallDelta {
  size_t index = 0;       // the call's position among the calls, from 0
  std::string id;         // set only in the call's first delta
  std::string name;       // set only in the call's first delta
  std::string arguments;  // the next piece
};

struct ToolStreamDelta {
  std::string content;
  std::vector<ToolCallDelta> tool_calls;  // in index order, at most one per call
};

// Raw control characters inside the arguments' JSON strings, escaped (a grammar may let a tab
// through; tool_call_parser.cc says when). Fed the arguments in order, in any pieces.
class ArgumentsEscaper {
 public:
  std::string feed(std::string_view piece);

 private:
  bool in_string_ = false;
  bool escaped_ = false;  // the previous character inside a string was a backslash
};

class ToolCallParser {
 public:
  // Throws dsinfer::Error naming the known parsers when format_name is none of them.
  // offered: the names of the request's functions; empty: every name is taken as a call.
  explicit ToolCallParser(std::string_view format_name, std::vector<std::string> offered = {});

  // The whole text at once (non-streamed answers).
  ToolCallParse parse(std::string_view text) const;

  ToolStreamDelta push(std::string_view text);
  ToolStreamDelta finish();
  // What the stream has sent so far: content, the calls with their whole arguments, and the first
  // error met (a call already announced stays in calls even when its arguments turned out bad).
  const ToolCallParse& streamed() const { return streamed_; }

 private:
  // kVerbatim: after a call naming an unknown function, everything is content.
  enum class Phase { kContent, kSection, kHeader, kArguments, kSkipCall, kVerbatim };
  bool step(ToolStreamDelta& delta);  // one move through held_; false when it must wait for more text
  bool offers(std::string_view name) const;
  void emit_content(ToolStreamDelta& delta, std::string_view text);
  void emit_arguments(ToolStreamDelta& delta, std::string_view piece);
  void fail(std::string message);

  const ToolCallFormat& format_;
  ArgumentsEscaper escaper_;  // of the call being streamed
  std::vector<std::string> offered_;
  Phase phase_ = Phase::kContent;
  std::string held_;  // text not yet settled
  // The text since the current section's start (until its first call begins) or since the current
  // call's start: what becomes content if this call names an unknown function.
  std::string unsent_;
  bool section_has_call_ = false;  // a CALL_BEGIN was met in the current section
  ToolCallParse streamed_;
};

}  // namespace dsinfer::server
