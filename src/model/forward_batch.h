// What one forward step computes: the tokens, where they sit, and which rows need logits.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace dsinfer::model {

// Which MLA form computes attention. kAuto: absorbed when every sequence adds one token (decode),
// expanded otherwise (prefill, chunked prefill, verification of several draft tokens).
enum class AttentionMode : uint8_t { kAuto, kExpanded, kAbsorbed };

struct ForwardBatch {
  std::vector<int32_t> token_ids;      // [T]
  backend::AttentionBatch attention;   // positions, context lengths, pages, slots of the T tokens
  std::vector<int32_t> logit_rows;     // rows of [0, T) whose logits are wanted
  AttentionMode mode = AttentionMode::kAuto;

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
};

struct ForwardResult {
  Tensor hidden;  // [T, hidden] after the final norm: what the MTP modules take
  Tensor logits;  // [logit_rows, vocab] float32 on the host
};

}  // namespace dsinfer::model
