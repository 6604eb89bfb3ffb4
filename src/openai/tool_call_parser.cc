#include "openai/tool_call_parser.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "core/json.h"
#include "core/strings.h"
#include "openai/openai_response.h"

namespace dsinfer::server {
namespace {

constexpr std::string_view kWhitespace = " \t\r\n";
constexpr size_t kNone = std::string_view::npos;

std::string_view skip_leading_space(std::string_view text) {
  size_t begin = text.find_first_not_of(kWhitespace);
  return begin == kNone ? std::string_view() : text.substr(begin);
}

std::string_view trim_trailing_space(std::string_view text) {
  size_t last = text.find_last_not_of(kWhitespace);
  return last == kNone ? std::string_view() : text.substr(0, last + 1);
}

// The arguments end with the closing of their call: whitespace, the fence where the format has
// one, whitespace, then CALL_END. This removes that closing from the end of the arguments.
std::string_view strip_closing(std::string_view arguments, std::string_view fence) {
  arguments = trim_trailing_space(arguments);
  if (!fence.empty() && arguments.ends_with(fence)) {
    arguments.remove_suffix(fence.size());
    arguments = trim_trailing_space(arguments);
  }
  return arguments;
}

// Whether text could be the start of an argument closing followed by CALL_END, so that none of it
// may be streamed as arguments yet.
bool may_be_closing(std::string_view text, const ToolCallFormat& format) {
  text = skip_leading_space(text);
  std::string_view fence = format.arguments_fence;
  if (!fence.empty()) {
    if (text.size() < fence.size() && fence.starts_with(text)) return true;
    if (text.starts_with(fence)) text = skip_leading_space(text.substr(fence.size()));
  }
  return text.size() < format.call_end.size() && format.call_end.starts_with(text);
}

// The length of the longest end of text that could be the start of marker (but is not all of it).
size_t partial_marker_at_end(std::string_view text, std::string_view marker) {
  for (size_t length = std::min(text.size(), marker.size() - 1); length > 0; --length)
    if (text.ends_with(marker.substr(0, length))) return length;
  return 0;
}

}  // namespace

// JSON strings may not hold raw control characters (RFC 8259), but a grammar may let one through
// (xgrammar 0.2.8's rule for a string with minLength/maxLength excludes only '"', '\\', CR and
// LF, so a forced call can carry a raw tab). Inside strings such characters are passed on escaped;
// outside them they are JSON whitespace and stay. The state carries across streamed pieces.
std::string ArgumentsEscaper::feed(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  for (char c : piece) {
    const auto byte = static_cast<unsigned char>(c);
    if (!in_string_) {
      in_string_ = c == '"';
      out += c;
    } else if (escaped_) {
      escaped_ = false;
      out += c;
    } else if (c == '\\') {
      escaped_ = true;
      out += c;
    } else if (c == '"') {
      in_string_ = false;
      out += c;
    } else if (byte < 0x20) {
      static constexpr char kHex[] = "0123456789abcdef";
      switch (c) {
        case '\t': out += "\\t"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        default: out += str_cat("\\u00", kHex[byte >> 4], kHex[byte & 15]);
      }
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

// Empty when arguments is a JSON object, else why not.
std::string check_arguments(std::string_view arguments) {
  try {
    Json value = Json::parse(arguments);
    if (value.is_object()) return {};
    return str_cat("the arguments are a JSON ", Json::type_name(value.type()), ", not an object");
  } catch (const Error& error) {
    return str_cat("the arguments are not valid JSON (", error.what(), ")");
  }
}

std::string call_error(const ToolCallFormat& format, size_t call, std::string_view what) {
  return str_cat(format.name, ": tool call ", call + 1, ": ", what);
}

std::string new_call_id() { return new_response_id("call_"); }

}  // namespace

ToolCallParser::ToolCallParser(std::string_view format_name, std::vector<std::string> offered)
    : format_(tool_call_format(format_name)), offered_(std::move(offered)) {}

bool ToolCallParser::offers(std::string_view name) const {
  return offered_.empty() || std::find(offered_.begin(), offered_.end(), name) != offered_.end();
}

ToolCallParse ToolCallParser::parse(std::string_view text) const {
  const ToolCallFormat& f = format_;
  ToolCallParse result;
  auto failed = [&](std::string_view what) {
    ToolCallParse raw;
    raw.content = text;
    raw.error = call_error(f, result.calls.size(), what);
    return raw;
  };
  size_t pos = 0;
  while (pos < text.size()) {
    size_t section = text.find(f.section_begin, pos);
    if (section == kNone) {
      result.content += text.substr(pos);
      break;
    }
    result.content += text.substr(pos, section - pos);
    pos = section + f.section_begin.size();
    size_t verbatim_from = section;  // where content resumes if the next call names an unknown function
    bool first_call = true;
    while (true) {  // inside the section: calls until SECTION_END; other text is dropped
      size_t call = text.find(f.call_begin, pos);
      size_t end = text.find(f.section_end, pos);
      if (call == kNone && end == kNone) {
        pos = text.size();
        break;
      }
      if (call == kNone || (end != kNone && end < call)) {
        pos = end + f.section_end.size();
        break;
      }
      if (!first_call) verbatim_from = call;
      first_call = false;
      pos = call + f.call_begin.size();
      size_t header_end = text.find(f.header_end, pos);
      size_t call_end = text.find(f.call_end, pos);
      if (header_end == kNone || (call_end != kNone && call_end < header_end))
        return failed(call_end == kNone ? "the output ends inside the call" : "the call has no arguments");
      ToolCall parsed;
      if (!f.read_header(trim(text.substr(pos, header_end - pos)), &parsed.name, &parsed.id))
        return failed("the call names no function");
      if (!offers(parsed.name)) {
        result.content += text.substr(verbatim_from);
        return result;
      }
      pos = header_end + f.header_end.size();
      call_end = text.find(f.call_end, pos);
      if (call_end == kNone) return failed("the output ends inside the call's arguments");
      std::string_view arguments = skip_leading_space(text.substr(pos, call_end - pos));
      parsed.arguments = ArgumentsEscaper().feed(strip_closing(arguments, f.arguments_fence));
      if (std::string why = check_arguments(parsed.arguments); !why.empty()) return failed(why);
      if (parsed.id.empty()) parsed.id = new_call_id();
      result.calls.push_back(std::move(parsed));
      pos = call_end + f.call_end.size();
    }
  }
  return result;
}

ToolStreamDelta ToolCallParser::push(std::string_view text) {
  ToolStreamDelta delta;
  held_ += text;
  while (step(delta)) {
  }
  return delta;
}

ToolStreamDelta ToolCallParser::finish() {
  ToolStreamDelta delta;
  switch (phase_) {
    case Phase::kContent:
    case Phase::kVerbatim:
      emit_content(delta, held_);  // a marker never completed is text
      break;
    case Phase::kSection:
    case Phase::kSkipCall:
      break;  // complete calls without SECTION_END are accepted
    case Phase::kHeader:
      fail(call_error(format_, streamed_.calls.size(), "the output ends inside the call"));
      break;
    case Phase::kArguments:
      fail(call_error(format_, streamed_.calls.size() - 1, "the output ends inside the call's arguments"));
      break;
  }
  held_.clear();
  unsent_.clear();
  phase_ = Phase::kContent;
  return delta;
}

bool ToolCallParser::step(ToolStreamDelta& delta) {
  const ToolCallFormat& f = format_;
  switch (phase_) {
    case Phase::kContent: {
      size_t section = held_.find(f.section_begin);
      if (section == kNone) {
        size_t settled = held_.size() - partial_marker_at_end(held_, f.section_begin);
        emit_content(delta, std::string_view(held_).substr(0, settled));
        held_.erase(0, settled);
        return false;
      }
      emit_content(delta, std::string_view(held_).substr(0, section));
      held_.erase(0, section);
      unsent_ = held_.substr(0, f.section_begin.size());
      held_.erase(0, f.section_begin.size());
      section_has_call_ = false;
      phase_ = Phase::kSection;
      return true;
    }
    case Phase::kSection: {
      size_t call = held_.find(f.call_begin);
      size_t end = held_.find(f.section_end);
      if (call == kNone && end == kNone) {
        size_t keep = std::max(partial_marker_at_end(held_, f.call_begin), partial_marker_at_end(held_, f.section_end));
        if (!section_has_call_) unsent_.append(held_, 0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);  // text between calls is dropped
        return false;
      }
      if (call == kNone || (end != kNone && end < call)) {
        held_.erase(0, end + f.section_end.size());
        unsent_.clear();
        phase_ = Phase::kContent;
      } else {
        // The section's first call keeps the text since SECTION_BEGIN; a later one starts at its CALL_BEGIN.
        size_t from = section_has_call_ ? call : 0;
        if (section_has_call_) unsent_.clear();
        unsent_.append(held_, from, call + f.call_begin.size() - from);
        section_has_call_ = true;
        held_.erase(0, call + f.call_begin.size());
        phase_ = Phase::kHeader;
      }
      return true;
    }
    case Phase::kHeader: {
      size_t header_end = held_.find(f.header_end);
      size_t call_end = held_.find(f.call_end);
      if (call_end != kNone && (header_end == kNone || call_end < header_end)) {
        fail(call_error(f, streamed_.calls.size(), "the call has no arguments"));
        held_.erase(0, call_end + f.call_end.size());
        phase_ = Phase::kSection;
        return true;
      }
      if (header_end == kNone) return false;  // the header is sent whole, once complete
      ToolCall call;
      if (!f.read_header(trim(std::string_view(held_).substr(0, header_end)), &call.name, &call.id)) {
        fail(call_error(f, streamed_.calls.size(), "the call names no function"));
        held_.erase(0, header_end + f.header_end.size());
        phase_ = Phase::kSkipCall;
        return true;
      }
      if (!offers(call.name)) {
        unsent_.append(held_, 0, header_end + f.header_end.size());
        emit_content(delta, unsent_);
        unsent_.clear();
        held_.erase(0, header_end + f.header_end.size());
        phase_ = Phase::kVerbatim;
        return true;
      }
      unsent_.clear();
      if (call.id.empty()) call.id = new_call_id();
      ToolCallDelta& announced = delta.tool_calls.emplace_back();
      announced.index = streamed_.calls.size();
      announced.id = call.id;
      announced.name = call.name;
      streamed_.calls.push_back(std::move(call));
      held_.erase(0, header_end + f.header_end.size());
      escaper_ = ArgumentsEscaper();
      phase_ = Phase::kArguments;
      return true;
    }
    case Phase::kArguments: {
      ToolCall& call = streamed_.calls.back();
      if (call.arguments.empty()) held_.erase(0, held_.size() - skip_leading_space(held_).size());
      size_t call_end = held_.find(f.call_end);
      if (call_end == kNone) {
        // Send all but the end that may yet turn out to be the call's closing.
        size_t settled = 0;
        while (settled < held_.size()) {
          std::string_view rest = std::string_view(held_).substr(settled);
          if (may_be_closing(rest, f)) break;
          // Every position inside a run of blanks gets the same answer: skip the run at once, so
          // that pretty-printed arguments cost linear time.
          settled += std::max<size_t>(rest.find_first_not_of(kWhitespace), 1);
        }
        emit_arguments(delta, std::string_view(held_).substr(0, settled));
        held_.erase(0, settled);
        return false;
      }
      emit_arguments(delta, strip_closing(std::string_view(held_).substr(0, call_end), f.arguments_fence));
      if (std::string why = check_arguments(call.arguments); !why.empty())
        fail(call_error(f, streamed_.calls.size() - 1, why));
      held_.erase(0, call_end + f.call_end.size());
      phase_ = Phase::kSection;
      return true;
    }
    case Phase::kVerbatim:
      emit_content(delta, held_);
      held_.clear();
      return false;
    case Phase::kSkipCall: {
      size_t call_end = held_.find(f.call_end);
      if (call_end == kNone) {
        held_.erase(0, held_.size() - partial_marker_at_end(held_, f.call_end));
        return false;
      }
      held_.erase(0, call_end + f.call_end.size());
      phase_ = Phase::kSection;
      return true;
    }
  }
  return false;
}

void ToolCallParser::emit_content(ToolStreamDelta& delta, std::string_view text) {
  delta.content += text;
  streamed_.content += text;
}

void ToolCallParser::emit_arguments(ToolStreamDelta& delta, std::string_view raw) {
  if (raw.empty()) return;
  const std::string piece = escaper_.feed(raw);
  size_t index = streamed_.calls.size() - 1;
  streamed_.calls.back().arguments += piece;
  if (delta.tool_calls.empty() || delta.tool_calls.back().index != index) delta.tool_calls.emplace_back().index = index;
  delta.tool_calls.back().arguments += piece;
}

void ToolCallParser::fail(std::string message) {
  if (streamed_.error.empty()) streamed_.error = std::move(message);
}

}  // namespace dsinfer::server
