#include "structured/reasoning_gate.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::structured {

std::vector<int32_t> reasoning_end_tokens(const tokenizer::Tokenizer& tokenizer, std::string_view marker) {
  if (std::optional<int32_t> id = tokenizer.token_to_id(marker)) return {*id};
  std::vector<int32_t> ids = tokenizer.encode(marker);
  DSINFER_CHECK(!ids.empty(), "the reasoning end marker \"", marker, "\" encodes to no tokens");
  return ids;
}

ReasoningGate::ReasoningGate(std::vector<int32_t> end_marker) : end_marker_(std::move(end_marker)) {
  reset();
}

void ReasoningGate::accept(int32_t token) {
  DSINFER_CHECK(!open_, "reasoning gate: a token was given after the gate opened");
  history_.push_back(token);
  update();
}

void ReasoningGate::rollback(int n) {
  DSINFER_CHECK(n >= 0 && n <= tokens(), "reasoning gate: cannot roll back ", n, " of ", tokens(), " tokens");
  history_.resize(history_.size() - n);
  update();
}

void ReasoningGate::reset() {
  history_.clear();
  update();
}

void ReasoningGate::update() {
  open_ = end_marker_.empty() ||
          (history_.size() >= end_marker_.size() &&
           std::equal(end_marker_.begin(), end_marker_.end(), history_.end() - end_marker_.size()));
}

}  // namespace dsinfer::structured
