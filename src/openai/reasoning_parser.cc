#include "openai/reasoning_parser.h"

#include <algorithm>
#include <utility>

namespace dsinfer::server {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// The length of the longest end of text that could be the start of tag (but is not all of it).
size_t partial_tag_at_end(std::string_view text, std::string_view tag) {
  for (size_t length = std::min(text.size(), tag.size() - 1); length > 0; --length)
    if (text.ends_with(tag.substr(0, length))) return length;
  return 0;
}

}  // namespace

ReasoningDelta ReasoningParser::push(std::string_view text) {
  ReasoningDelta delta;
  if (phase_ == Phase::kContent) {
    delta.content = text;
    return delta;
  }
  held_ += text;
  if (phase_ == Phase::kStart) {
    if (held_.size() < kOpen.size() && kOpen.starts_with(held_)) return delta;  // may still become <think>
    if (held_.starts_with(kOpen)) held_.erase(0, kOpen.size());
    phase_ = Phase::kReasoning;
  }
  size_t close = held_.find(kClose);
  if (close != std::string::npos) {
    delta.reasoning = held_.substr(0, close);
    delta.content = held_.substr(close + kClose.size());
    held_.clear();
    phase_ = Phase::kContent;
    return delta;
  }
  size_t settled = held_.size() - partial_tag_at_end(held_, kClose);
  delta.reasoning = held_.substr(0, settled);
  held_.erase(0, settled);
  return delta;
}

ReasoningDelta ReasoningParser::finish() {
  ReasoningDelta delta;
  delta.reasoning = std::move(held_);  // a tag never completed is reasoning text
  held_.clear();
  return delta;
}

ReasoningSplit ReasoningParser::split(std::string_view text) {
  if (text.starts_with(kOpen)) text.remove_prefix(kOpen.size());
  ReasoningSplit result;
  size_t close = text.find(kClose);
  if (close == std::string_view::npos) {
    result.reasoning = text;
    return result;
  }
  result.reasoning = text.substr(0, close);
  std::string_view content = text.substr(close + kClose.size());
  if (!content.empty()) result.content = content;
  return result;
}

}  // namespace dsinfer::server
