// The speculative decoding flags of `serve`, `generate` and `eval` (runtime/speculative.h: drafts
// from the checkpoint's own MTP modules), in vLLM's, SGLang's and our spellings:
//
//   vLLM:   --speculative-config '{"method": "mtp", "num_speculative_tokens": N}'
//           method "mtp" or "deepseek_mtp"; N 1 to 3 (left out: the checkpoint's MTP module count,
//           as vLLM takes it). Our keys, named as TensorRT-LLM's MTPDecodingConfig names them:
//           "use_relaxed_acceptance_for_thinking" (bool), "relaxed_topk" (int), "relaxed_delta"
//           (number), and "mode": "eagle" (the default: module 0 drafts every position) or
//           "vanilla" (module k drafts position k + 1). Any other key or method is refused.
//   SGLang: --speculative-algorithm EAGLE|NEXTN|MTP --speculative-num-steps N
//           [--speculative-eagle-topk 1] [--speculative-num-draft-tokens N+1]; where no spelling
//           gives a count, SGLang's choice for DeepSeek-V3 (3 steps, top-k 1, 4 draft tokens). Tree
//           drafting (top-k > 1) is refused.
//   ours:   --speculative-relaxed-acceptance, --speculative-relaxed-topk K,
//           --speculative-relaxed-delta D (the JSON keys' alternatives).
//
// The same setting given in two spellings must agree (else the start is refused: a launch script
// that says two things is a mistake, never settled by picking one). Every refusal is a
// dsinfer::Error naming the flag, key or method.
#pragma once

#include <string>
#include <string_view>

#include "cli/flags.h"
#include "runtime/metrics.h"
#include "runtime/speculative.h"

namespace dsinfer::cli {

void add_speculative_flags(Flags& flags);

// What the flags ask for, read and checked before the model loads.
struct SpeculativeRequest {
  bool requested = false;
  // The settings; num_tokens is 0 while `tokens_from_checkpoint` (vLLM's JSON without
  // num_speculative_tokens: one draft per MTP module the checkpoint has, 3 at most).
  runtime::SpeculativeConfig config;
  bool tokens_from_checkpoint = false;
};
SpeculativeRequest speculative_request(const Flags& flags);

// The engine's setting for a model with `mtp_modules` MTP modules (config.num_tokens 0: off).
// Throws when speculative decoding is asked for and the model has no module (`model` says which
// model, and why it may have none), or, in vanilla mode, fewer modules than draft positions.
runtime::SpeculativeConfig speculative_config(const SpeculativeRequest& request, int mtp_modules,
                                              std::string_view model);

// One line of what the engine's spec_decode counters say (drafts, acceptance rate, mean acceptance
// length), for the verbs' logs; "" when no draft was made.
std::string acceptance_summary(const runtime::Metrics& metrics);
// 1 + accepted draft tokens / drafts (vLLM's mean acceptance length); 0 when no draft was made.
double mean_acceptance_length(const runtime::Metrics& metrics);

}  // namespace dsinfer::cli
