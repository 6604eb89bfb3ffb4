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
    for (size_t length = std::min(stop.size() - 1, pending_.size()); length > longest; --length) {
      if (pending_.compare(pending_.size() - length, length, stop, 0, length) == 0) {
        longest = length;
        break;
      }
    }
  }
  return longest;
}

StopChecker::Step StopChecker::push(int32_t token, int64_t output_length, bool at_limit) {
  Step step;
  bool stop_token = std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end();
  if (stop_token && output_length > options_.min_tokens - 1) {
    step.text = flush();
    step.finish = FinishReason::kStop;
    return step;
  }
  pending_ += detokenizer_.push(token);
  if (output_length >= options_.min_tokens) {
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
      step.text = pending_.substr(0, first + (options_.include_stop_str_in_output ? matched->size() : 0));
      step.finish = FinishReason::kStop;
      step.stop_reason = *matched;
      pending_.clear();
      return step;
    }
  }
  if (at_limit) {
    step.text = flush();
    step.finish = FinishReason::kLength;
    return step;
  }
  size_t hold = held_back_length();
  step.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return step;
}

std::string StopChecker::flush() {
  std::string out = std::move(pending_) + detokenizer_.finish();
  pending_.clear();
  return out;
}

}  // namespace dsinfer::runtime
