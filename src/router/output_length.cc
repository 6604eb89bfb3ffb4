#include "router/output_length.h"

#include <algorithm>
#include <cctype>

namespace dsinfer::router {
namespace {

constexpr std::string_view kEvent = "data:";
constexpr std::string_view kDone = "data: [DONE]";
constexpr std::string_view kUsage = "\"completion_tokens\":";
// The usage object, with its details, is the last few hundred bytes of an answer.
constexpr size_t kTailBytes = 2048;

}  // namespace

void OutputLengthCounter::feed(std::string_view bytes) {
  // Markers wholly inside the carried bytes were counted with the piece before.
  const std::string window = carry_ + std::string(bytes);
  const size_t skip = carry_.size();
  for (size_t at = window.find(kEvent); at != std::string::npos; at = window.find(kEvent, at + 1))
    if (at + kEvent.size() > skip) ++events_;
  for (size_t at = window.find(kDone); at != std::string::npos; at = window.find(kDone, at + 1))
    if (at + kDone.size() > skip) ++done_events_;
  carry_ = window.substr(window.size() - std::min(window.size(), kDone.size() - 1));
  tail_ += bytes;
  if (tail_.size() > 2 * kTailBytes) tail_.erase(0, tail_.size() - kTailBytes);
}

std::optional<int64_t> OutputLengthCounter::tokens() const {
  if (const size_t at = tail_.rfind(kUsage); at != std::string::npos) {
    size_t digit = at + kUsage.size();
    while (digit < tail_.size() && tail_[digit] == ' ') ++digit;
    int64_t value = 0;
    bool any = false;
    for (; digit < tail_.size() && std::isdigit(static_cast<unsigned char>(tail_[digit])); ++digit) {
      value = value * 10 + (tail_[digit] - '0');
      any = true;
    }
    if (any) return value;
  }
  if (events_ > 0) return events_ - done_events_;
  return std::nullopt;
}

}  // namespace dsinfer::router
