// How far apart two next-token distributions are, given as logit rows: the KL divergence of their
// softmaxes, for measuring what a lossy format (an FP8 KV cache, quantized weights) moves.
#pragma once

#include <cstdint>

namespace dsinfer::model {

// KL(softmax(p) || softmax(q)) of two rows of `vocab` logits, in nats, in double precision.
double kl_divergence(const float* p_logits, const float* q_logits, int64_t vocab);

}  // namespace dsinfer::model
