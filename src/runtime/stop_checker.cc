#include "runtime/stop_checker.h"

#include <algorithm>

namespace dsinfer::runtime {

StopChecker::StopChecker(const tokenizer::Tokenizer& tokenizer, const RequestOptions& options,
                         std::vector<int32_t> stop_ids)
    : options_(options), stop_ids_(std::move(stop_ids)), detokenizer_(tokenizer, options.skip_special_tokens) {}

size_t StopChecker::held_back_length() const {
  size_t longest = 0;
  for (const std::string& stop : options_.stop) {
    if (stop.empty()) continue;
    // Candidates start where the stop string's first byte appears in the tail of pending_.
    size_t from = pending_.size() > stop.size() - 1 ? pending_.size() - (stop.size() - 1) : 0;
    for (size_t at = pending_.find(stop[0], from); at != std::string::npos; at = pending_.find(stop[0], at + 1)) {
      size_t length = pending_.size() - at;
      if (length <= longest) break;
      if (pending_.compare(at, length, stop, 0, length) == 0) {
        longest = length;
        break;
      }
    }
  }
  return longest;
}

StopChecker::Step StopChecker::push(int32_t token, int64_t output_length, bool at_limit, std::string& text) {
  Step step;
  bool stop_token = std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end();
  if (stop_token && output_length > options_.min_tokens - 1) {
    flush(text);
    step.finish = FinishReason::kStop;
    return step;
  }
  if (options_.stop.empty() && !at_limit) {  // nothing to hold back
    text += detokenizer_.push(token);
    return step;
  }
  pending_ += detokenizer_.push(token);
  if (output_length >= options_.min_tokens && !options_.stop.empty()) {
    size_t first = std::string::npos;
    const std::string* matched = nullptr;
    for (const std::string& stop : options_.stop) {
      size_t at = stop.empty() ? std::string::npos : pending_.find(stop);
      if (at < first) {
        first = at;
        matched = &stop;
      }
    }
    if (matched) {
      text.append(pending_, 0, first + (options_.include_stop_str_in_output ? matched->size() : 0));
      step.finish = FinishReason::kStop;
      step.stop_reason = *matched;
      pending_.clear();
      return step;
    }
  }
  if (at_limit) {
    flush(text);
    step.finish = FinishReason::kLength;
    return step;
  }
  size_t hold = held_back_length();
  text.append(pending_, 0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return step;
}

void StopChecker::flush(std::string& text) {
  text += pending_;
  text += detokenizer_.finish();
  pending_.clear();
}

}  // namespace dsinfer::runtime
