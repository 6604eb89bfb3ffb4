// Speculative decoding with the model's own MTP modules (issue 10).
//
// A decoding sequence carries up to N draft tokens d_1..d_N, proposed by the MTP module from its
// previous step. A step runs its last token and the drafts through the model in one piece (1 + N
// rows, the absorbed form) and samples every row as if it were the row's only step, with the
// request's draw for that output position: t_0..t_N. The drafts are accepted while they equal the
// target's samples (d_{j+1} == t_j); at the first difference, t_j is the step's last token. The
// sequence gains t_0..t_k (k accepted drafts, one more token than drafts accepted) and the rows past
// k are rolled back.
//
// The drafts are the MTP head's top-1 (a one-hot proposal), for which this is exactly standard
// speculative (rejection) sampling: accepting d with probability p(d) and otherwise sampling from p
// with d removed gives a token distributed as p, and so does "sample t ~ p, accept d when t == d,
// else emit t". So every emitted token is distributed as the target's, greedy outputs equal the
// non-speculative ones, and a seeded request draws the same uniforms for the same output positions
// with or without drafts.
//
// Relaxed acceptance (seed 001, TensorRT-LLM's use_relaxed_acceptance_for_thinking): inside a
// reasoning section (after <think>, before </think>), a draft is also accepted when it is among the
// target's relaxed_topk most likely tokens and its probability is at least top-1's minus
// relaxed_delta; the draft itself is then the emitted token. This changes the output distribution
// on purpose, only while the model thinks.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dsinfer::runtime {

struct SpeculativeConfig {
  int num_tokens = 0;  // draft tokens a step, 1..3; 0: off
  // How drafts 2..N are made: kEagle reuses module 0 in sequence (what V3/R1, with one MTP module,
  // need for N > 1); kVanilla runs module k for draft k + 1 (needs N modules).
  enum class Mode : uint8_t { kEagle, kVanilla };
  Mode mode = Mode::kEagle;
  bool relaxed = false;        // relaxed acceptance inside reasoning sections
  int relaxed_topk = 10;       // a relaxed draft must be among the target's top relaxed_topk tokens,
  float relaxed_delta = 0.6f;  // and its probability at least top-1's minus this
  // Adaptive drafting (vLLM's disable_by_batch_size): while more requests than this are live, steps
  // run without drafts, as without speculative decoding (overlapped, decode graphs); 0: never.
  // Those steps run no MTP pass, so a sequence that took one drafts no more (its module cache has
  // gaps), and drafting resumes once no such sequence is left (engine_step.cc).
  int disable_by_batch_size = 64;

  bool enabled() const { return num_tokens > 0; }
  // Throws dsinfer::Error naming what is wrong (N outside 1..3, top-k < 1, delta outside [0, 1]).
  void validate() const;
  // For logs and /server_info: {"method": "mtp", "num_speculative_tokens": N, ...}.
  std::string describe() const;
};

// The target's view of one draft position, for relaxed acceptance: its most likely tokens with their
// probabilities (raw: before temperature and truncation), most likely first.
struct TargetTop {
  std::span<const int32_t> ids;
  std::span<const float> logprobs;
};

// How many of `drafts` a sequence keeps, and the tokens it gains (accepted + 1 of them).
// sampled: the target's sample at each of the 1 + drafts.size() rows. relaxed: per draft position,
// the target's top tokens when relaxed acceptance applies there (empty span list: strict only).
struct Acceptance {
  int accepted = 0;
  std::vector<int32_t> tokens;  // drafts[0 .. accepted) then the sample at row `accepted`
};
Acceptance accept_drafts(std::span<const int32_t> drafts, std::span<const int32_t> sampled,
                         const SpeculativeConfig& config, std::span<const TargetTop> relaxed = {});

}  // namespace dsinfer::runtime
