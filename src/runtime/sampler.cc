#include "runtime/sampler.h"


namespace dsinfer::runtime {

void init_sampler(SamplerState& state, const SamplingOptions& options, const std::vector<int32_t>& prompt) {
  if (options.repetition_penalty != 1.0f) state.seen.insert(prompt.begin(), prompt.end());
}

void record_token(SamplerState& state, const SamplingOptions& options, int32_t token) {
  if (options.frequency_penalty != 0.0f || options.presence_penalty != 0.0f) ++state.output_counts[token];
  if (options.repetition_penalty != 1.0f) state.seen.insert(token);
}

void append_sampling_row(backend::SamplingBatch& batch, const SamplingOptions& options, const SamplerState& state,
                         std::span<const LogitBias> logit_bias, std::span<const int32_t> banned, float uniform,
                         int top_logprobs) {
  backend::SamplingRow row;
  row.params = to_sampling_params(options);
  row.repetition_penalty = options.repetition_penalty;
  row.frequency_penalty = options.frequency_penalty;
  row.presence_penalty = options.presence_penalty;
  row.uniform = uniform;
  row.top_logprobs = top_logprobs;
  batch.rows.push_back(row);
  // Distinct tokens of prompt and output (repetition penalty) and their output counts (frequency and
  // presence penalties); a request without penalties keeps neither, so adds nothing here.
  for (const auto& [token, count] : state.output_counts) {
    batch.history_tokens.push_back(token);
    batch.history_output_counts.push_back(count);
  }
  for (int32_t token : state.seen) {
    if (state.output_counts.count(token)) continue;
    batch.history_tokens.push_back(token);
    batch.history_output_counts.push_back(0);
  }
  batch.history_start.push_back(static_cast<int32_t>(batch.history_tokens.size()));
  batch.banned_tokens.insert(batch.banned_tokens.end(), banned.begin(), banned.end());
  batch.banned_start.push_back(static_cast<int32_t>(batch.banned_tokens.size()));
  // The bias CSR exists once a row has a bias; the rows before it get empty ranges.
  if (!logit_bias.empty() && batch.bias_start.empty()) batch.bias_start.assign(batch.rows.size(), 0);
  for (const LogitBias& entry : logit_bias) {
    batch.bias_tokens.push_back(entry.token);
    batch.bias_values.push_back(entry.bias);
  }
  if (!batch.bias_start.empty()) batch.bias_start.push_back(static_cast<int32_t>(batch.bias_tokens.size()));
}

TokenLogprob row_logprobs(const backend::SampledTokens& sampled, int64_t row, int top_n) {
  TokenLogprob out;
  out.token_id = sampled.tokens.data<int32_t>()[row];
  out.logprob = sampled.logprobs.data<float>()[row];
  int64_t width = sampled.top_ids.dim(1);
  for (int i = 0; i < top_n && i < width; ++i) {
    int32_t id = sampled.top_ids.data<int32_t>()[row * width + i];
    if (id < 0) break;  // past the vocabulary
    out.top.emplace_back(id, sampled.top_logprobs.data<float>()[row * width + i]);
  }
  return out;
}

backend::SamplingParams to_sampling_params(const SamplingOptions& options) {
  backend::SamplingParams params;
  params.temperature = options.temperature;
  params.top_k = options.top_k;
  params.top_p = options.top_p;
  params.min_p = options.min_p;
  return params;
}

}  // namespace dsinfer::runtime
