#include "runtime/stop_checker.h"

#include <algorithm>

namespace dsinfer::runtime {

FinishReason token_finish(const std::vector<int32_t>& stop_ids, int64_t min_tokens, int32_t token,
                          int64_t output_length, bool at_limit) {
  bool stop_token = std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end();
  if (stop_token && output_length >= min_tokens) return FinishReason::kStop;
  return at_limit ? FinishReason::kLength : FinishReason::kNone;
}

StopChecker::StopChecker(const tokenizer::Tokenizer& tokenizer, const RequestOptions& options)
    : stop_(options.stop),
      min_tokens_(options.min_tokens),
      include_stop_str_in_output_(options.include_stop_str_in_output),
      detokenizer_(tokenizer, options.skip_special_tokens) {}

size_t StopChecker::held_back_length() const {
  size_t longest = 0;
  for (const std::string& stop : stop_) {
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

StopChecker::Step StopChecker::push(int32_t token, int64_t output_length, FinishReason engine_finish,
                                    std::string& text) {
  Step step;
  if (engine_finish == FinishReason::kStop) {  // a stop token: its own text is not part of the output
    flush(text);
    step.finish = FinishReason::kStop;
    return step;
  }
  bool at_limit = engine_finish == FinishReason::kLength;
  if (stop_.empty() && !at_limit) {  // nothing to hold back
    text += detokenizer_.push(token);
    return step;
  }
  pending_ += detokenizer_.push(token);
  if (output_length >= min_tokens_ && !stop_.empty()) {
    size_t first = std::string::npos;
    const std::string* matched = nullptr;
    for (const std::string& stop : stop_) {
      size_t at = stop.empty() ? std::string::npos : pending_.find(stop);
      if (at < first) {
        first = at;
        matched = &stop;
      }
    }
    if (matched) {
      text.append(pending_, 0, first + (include_stop_str_in_output_ ? matched->size() : 0));
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
