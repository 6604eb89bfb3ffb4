// Token sampling on the GPU: the logits pipeline of Backend::sample_tokens (backend/cpu/sampling.cc
// is the definition) run where the logits are, so that tokens, not logits, come back.
//
// Per row b of logits [rows, vocab] f32, in the CPU's order:
//   1. logprobs (rows with top_logprobs >= 0): log_softmax of the raw row at the chosen token, and
//      the top n raw ids (logit descending, ties to the lower id) with their log_softmax values;
//   2. repetition penalty on the row's history tokens, then frequency and presence penalties on the
//      history tokens with output count > 0 (the same float operations as the CPU build, FMA included);
//   3. logit_bias: each of the row's (token, bias) pairs added to its logit;
//   4. banned tokens -> -inf, and for a row with an allowed-token bitmask every token outside it;
//   5. greedy (not temperature > 0, or top_k == 1): the first maximum, bit-exact with the CPU on the
//      same logits; otherwise temperature softmax, top_k, top_p (smallest prefix whose mass reaches
//      top_p, at least one), min_p (weight >= min_p * the largest), renormalised, and the row's
//      uniform u picks by inverse CDF.
// Every filter keeps a prefix of one total order, logit descending then id ascending (the CPU's), and
// the inverse-CDF walk runs in that same order: the sampled token is the first token t in it whose
// cumulative weight exceeds floor(u * total weight of the survivors). So the GPU walks exactly as
// the CPU does; what differs is rounding. Weights are exp((logit - max) / temperature) in float32
// (the CPU uses double), stored as integers in units of 2^-45 of the largest weight, so that every
// sum is exact and independent of the order threads add it in: the result is a deterministic
// function of (logits, params, u). A token whose weight is below 2^-45 of the largest gets
// probability 0 (the CPU gives it < 3e-14). A top_p or min_p cut that falls within rounding of the
// threshold can keep one token more or fewer than the CPU.
//
// Launch: one block of 1024 threads per row, 168,200 bytes of dynamic shared memory (one block per SM).
// Roofline: bytes read per row, 4 * vocab each pass over the row (517 KB for DeepSeek-V3's 129,280):
// greedy rows 1 pass (a masked row one more, and the mask's V / 8 bytes); sampled rows 3 (the max, a histogram of weight by distance from the max, and
// copying the few thousand tokens the filters and the draw can reach into shared memory, where the
// radix selections run); rows asking logprobs 3 more over the raw row. Rows whose reachable set
// exceeds 8,192 tokens (flat distributions, top_k > 8,192) run the selections over the row in global
// memory instead: about 4 passes per selection, up to ~20 in all. B = 512, V = 129,280 sampled rows
// read ~0.8 GB: ~0.25 ms at H100's 3.35 TB/s, ~0.17 ms on H200. Compute is a few float ops and one
// expf per element per pass: the kernel is memory-bound. Penalties and banned tokens are sparse.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backend/backend.h"

namespace dsinfer::backend::cuda {

// One row's parameters as the kernel reads them: SamplingRow flattened into 36 bytes.
struct SamplingRowParams {
  float temperature = 0.0f;  // not > 0: greedy
  int32_t top_k = 0;         // off unless 0 < top_k < vocab; 1: greedy
  float top_p = 1.0f;        // off unless < 1
  float min_p = 0.0f;        // off unless > 0
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  float uniform = 0.0f;      // the row's draw in [0, 1)
  int32_t top_logprobs = -1;  // -1: no logprobs; n >= 0: the chosen token's logprob and the top n
};
static_assert(std::is_trivially_copyable_v<SamplingRowParams> && sizeof(SamplingRowParams) == 36);

inline SamplingRowParams to_row_params(const SamplingRow& row) {
  return SamplingRowParams{row.params.temperature, row.params.top_k,       row.params.top_p,
                           row.params.min_p,       row.repetition_penalty, row.frequency_penalty,
                           row.presence_penalty,   row.uniform,            row.top_logprobs};
}

// Device pointers the caller fills (SamplingBatch uploaded as it is: the CSR arrays unchanged).
struct SamplingInputs {
  float* logits = nullptr;  // [rows, vocab] f32; overwritten: penalised, banned tokens -inf
  int32_t rows = 0;         // B (up to a few thousand; one block each)
  int32_t vocab = 0;        // V, 1 to 262,144
  const SamplingRowParams* params = nullptr;  // [rows]
  // History for the penalties, CSR; history_start null: no row has any. A row's tokens must be
  // distinct (SamplingBatch's contract): the GPU applies them in parallel, the CPU one after another.
  const int32_t* history_start = nullptr;          // [rows + 1]
  const int32_t* history_tokens = nullptr;         // [history_start[rows]]
  const int32_t* history_output_counts = nullptr;  // [history_start[rows]]
  // Banned tokens, CSR; banned_start null: none.
  const int32_t* banned_start = nullptr;   // [rows + 1]
  const int32_t* banned_tokens = nullptr;  // [banned_start[rows]]
  // logit_bias, CSR; bias_start null: none. A row's tokens must be distinct (added in parallel).
  const int32_t* bias_start = nullptr;     // [rows + 1]
  const int32_t* bias_tokens = nullptr;    // [bias_start[rows]]
  const float* bias_values = nullptr;      // [bias_start[rows]]
  // Allowed-token bitmasks, xgrammar's layout: [mask rows, (vocab + 31) / 32] int32, token t allowed
  // when bit t % 32 of word t / 32 is set; bitmask_row[b] is row b's mask or -1. bitmask_row null: none.
  const int32_t* bitmask = nullptr;
  const int32_t* bitmask_row = nullptr;    // [rows]
  // Tests only: false makes every row take the path flat rows take (selections over global memory).
  bool allow_shared_region = true;
};

struct SamplingOutputs {
  int32_t* tokens = nullptr;  // [rows]
  // [rows] log_softmax(raw)[token]; null when no row asks (then top_n must be 0). Rows that do not
  // ask get NaN.
  float* logprobs = nullptr;
  // [rows, top_n], most likely first; entries a row did not ask for (and beyond vocab) get id -1
  // and logprob -inf. Null when top_n == 0.
  int32_t* top_ids = nullptr;
  float* top_logprobs = nullptr;
  int32_t top_n = 0;  // SamplingBatch::max_top_logprobs(), 0 to 20
};

// Scratch sample_tokens needs: the raw values of the logits the penalties overwrite, kept at their
// [row, token] place for the chosen token's logprob (written sparsely: only touched tokens).
// Needed only when outputs.logprobs is set; otherwise scratch may be null.
size_t sampling_scratch_bytes(int64_t rows, int64_t vocab);

// Queues the whole pipeline on `stream`: no allocation, no synchronisation, no host copy (graph-
// capturable). Throws on sizes out of range or missing pointers; per-row parameters are read on
// the device and not checked (a row asking more than top_n logprobs gets top_n).
void sample_tokens(const SamplingInputs& inputs, const SamplingOutputs& outputs, void* scratch,
                   size_t scratch_bytes, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
