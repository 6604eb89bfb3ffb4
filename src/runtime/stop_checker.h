// Turns a request's new tokens into text and decides when it stops: stop tokens (EOS unless
// ignore_eos, stop_token_ids), stop strings, and the length limit.
//
// Text that might be the beginning of a stop string is held back until it is clear; when a stop
// string matches, the text ends right before it (or after it with include_stop_str_in_output).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/request.h"
#include "tokenizer/detokenizer.h"

namespace dsinfer::runtime {

class StopChecker {
 public:
  // stop_ids: EOS ids and the request's stop_token_ids (already merged by the engine).
  StopChecker(const tokenizer::Tokenizer& tokenizer, const RequestOptions& options, std::vector<int32_t> stop_ids);

  struct Step {
    FinishReason finish = FinishReason::kNone;
    std::string stop_reason;  // the matched stop string
  };
  // The token just sampled; output_length counts it; at_limit: no room for another token. The text
  // to deliver now is appended to `text`.
  Step push(int32_t token, int64_t output_length, bool at_limit, std::string& text);
  // Appends whatever is held back (for a request that ends for another reason, e.g. abort).
  void flush(std::string& text);
  // Tokens that must not be sampled yet (stop tokens while under min_tokens).
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }

 private:
  size_t held_back_length() const;  // longest suffix of pending_ that starts a stop string

  const RequestOptions& options_;
  std::vector<int32_t> stop_ids_;
  tokenizer::IncrementalDetokenizer detokenizer_;
  std::string pending_;  // decoded but not delivered
};

}  // namespace dsinfer::runtime
