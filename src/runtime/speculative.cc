#include "runtime/speculative.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace dsinfer::runtime {

void SpeculativeConfig::validate() const {
  DSINFER_CHECK(num_tokens >= 0 && num_tokens <= 3, "speculative decoding: num_speculative_tokens must be 1 to 3, not ",
                num_tokens);
  DSINFER_CHECK(relaxed_topk >= 1, "speculative decoding: relaxed_topk must be at least 1, not ", relaxed_topk);
  DSINFER_CHECK(relaxed_delta >= 0.0f && relaxed_delta <= 1.0f,
                "speculative decoding: relaxed_delta must be within [0, 1], not ", relaxed_delta);
  DSINFER_CHECK(disable_by_batch_size >= 0, "speculative decoding: disable_by_batch_size must be at least 0 (0: "
                "never), not ", disable_by_batch_size);
}

std::string SpeculativeConfig::describe() const {
  std::string out = str_cat(R"({"method": "mtp", "num_speculative_tokens": )", num_tokens, R"(, "mode": ")",
                            mode == Mode::kEagle ? "eagle" : "vanilla", "\"");
  if (relaxed)
    out += str_cat(R"(, "use_relaxed_acceptance_for_thinking": true, "relaxed_topk": )", relaxed_topk,
                   R"(, "relaxed_delta": )", relaxed_delta);
  return out + str_cat(R"(, "disable_by_batch_size": )", disable_by_batch_size, "}");
}

namespace {

// Whether the target's top tokens take `draft` under relaxed acceptance.
bool relaxed_accepts(int32_t draft, const TargetTop& top, const SpeculativeConfig& config) {
  if (top.ids.empty()) return false;
  const float best = std::exp(top.logprobs[0]);
  const size_t n = std::min(top.ids.size(), static_cast<size_t>(config.relaxed_topk));
  for (size_t i = 0; i < n; ++i)
    if (top.ids[i] == draft) return std::exp(top.logprobs[i]) >= best - config.relaxed_delta;
  return false;
}

}  // namespace

Acceptance accept_drafts(std::span<const int32_t> drafts, std::span<const int32_t> sampled,
                         const SpeculativeConfig& config, std::span<const TargetTop> relaxed) {
  DSINFER_CHECK(sampled.size() == drafts.size() + 1, "speculative decoding: ", sampled.size(),
                " sampled rows for ", drafts.size(), " drafts");
  DSINFER_CHECK(relaxed.empty() || relaxed.size() == drafts.size(), "speculative decoding: ", relaxed.size(),
                " relaxed positions for ", drafts.size(), " drafts");
  Acceptance out;
  while (out.accepted < static_cast<int>(drafts.size())) {
    const int32_t draft = drafts[out.accepted];
    const bool taken = draft == sampled[out.accepted] ||
                       (!relaxed.empty() && relaxed_accepts(draft, relaxed[out.accepted], config));
    if (!taken) break;
    out.tokens.push_back(draft);
    ++out.accepted;
  }
  out.tokens.push_back(sampled[out.accepted]);
  return out;
}

}  // namespace dsinfer::runtime
