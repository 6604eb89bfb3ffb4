// When a request stops, split between the two threads that decide it.
//
// The engine thread decides what needs no text (token_finish): a stop token (EOS unless
// ignore_eos, stop_token_ids) once min_tokens are out, or the length limit. It frees the pages at
// once. The output thread (output_processor.h) turns tokens into text with StopChecker: the
// incremental detokenizer, and stop strings, which it finds after detokenizing and then asks the
// engine to end the request (as vLLM's frontend does).
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

// The engine's decision for the token just sampled. stop_ids: EOS ids and the request's
// stop_token_ids; output_length counts the token; at_limit: no room for another token.
// kStop (a stop token), kLength, or kNone.
FinishReason token_finish(const std::vector<int32_t>& stop_ids, int64_t min_tokens, int32_t token,
                          int64_t output_length, bool at_limit);

class StopChecker {
 public:
  // Keeps what it needs of options (stop strings, min_tokens, ...); tokenizer must outlive it.
  StopChecker(const tokenizer::Tokenizer& tokenizer, const RequestOptions& options);

  struct Step {
    FinishReason finish = FinishReason::kNone;
    std::string stop_reason;  // the matched stop string
  };
  // The token just sampled, with the engine's token_finish for it; output_length counts it. The
  // text to deliver now is appended to `text`. A stop string that matches wins over kLength.
  Step push(int32_t token, int64_t output_length, FinishReason engine_finish, std::string& text);
  // Appends whatever is held back (for a request that ends for another reason, e.g. abort).
  void flush(std::string& text);

 private:
  size_t held_back_length() const;  // longest suffix of pending_ that starts a stop string

  std::vector<std::string> stop_;
  int64_t min_tokens_;
  bool include_stop_str_in_output_;
  tokenizer::IncrementalDetokenizer detokenizer_;
  std::string pending_;  // decoded but not delivered
};

}  // namespace dsinfer::runtime
