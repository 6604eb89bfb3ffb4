// Structured output and logit_bias inside the engine (issue 12).
//
// A request with an OutputConstraint owns a GrammarMatcher (made in Engine::submit, on the caller's
// thread). Each step that samples the request fills its row of the step's bitmask from the matcher
// (engine_step.cc, prepare) and the matcher accepts the sampled token when the step is collected
// (complete); a token the matcher refuses can only come from a sampler that ignored the mask, and
// fails that request alone. The matcher must have seen every earlier token before it fills the
// next mask, so under the overlap scheduler a constrained row makes the next step wait for its
// tokens, as penalties do.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "runtime/request.h"
#include "structured/grammar_matcher.h"

namespace dsinfer::runtime {

// Checks a request's logit_bias against a vocabulary of `vocab` tokens (ids inside it, finite
// values, no token twice) and orders it by token. Throws InvalidRequest (RequestPart::kLogitBias).
void check_logit_bias(std::vector<LogitBias>& logit_bias, int64_t vocab);

// The matcher of a request's constraint. Throws InvalidRequest when the constraint has no grammar
// or its grammar was compiled for another vocabulary than the model's `vocab`.
std::unique_ptr<structured::GrammarMatcher> make_matcher(const OutputConstraint& constraint, int64_t vocab);

// Adds row `row`'s allowed tokens to batch.bitmask (bitmask_row must already hold the step's rows)
// from the matcher's state. Returns false, adding nothing, when the matcher allows every token
// (reasoning not yet over). `banned` (the stop tokens under min_tokens) is cleared when the mask
// allows nothing else: the grammar has ended, and min_tokens cannot make it go on. Allocates only
// when batch.bitmask lacks the capacity.
bool add_bitmask_row(structured::GrammarMatcher& matcher, backend::SamplingBatch& batch, int row,
                     std::span<const int32_t>& banned);

}  // namespace dsinfer::runtime
