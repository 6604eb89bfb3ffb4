// Token log-probabilities in the two shapes the OpenAI API uses.
//
// Chat:        {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}
//              top_logprobs holds the N most likely tokens (N = the request's top_logprobs).
// Completions: {"tokens": [...], "token_logprobs": [...], "top_logprobs": [{token: logprob}, ...],
//               "text_offset": [...]}, the legacy format; each top_logprobs dict holds the N most
//              likely tokens and the chosen one ("up to logprobs+1 elements", as OpenAI documents).
// Prompt:      vLLM's prompt_logprobs: [null, {"<token id>": {"logprob", "rank", "decoded_token"}, ...}, ...],
//              one entry per prompt token; the first has no context and is null. Each dict holds the
//              prompt token first (its rank over the vocabulary, or its place among the top N), then
//              the N most likely tokens (ranks 1..N) other than it.
//
// JSON has no -infinity: a token the sampler ruled out gets -9999.0, the value OpenAI and vLLM use.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "core/json.h"
#include "runtime/request.h"

namespace dsinfer::server {

// The text of one token id, as the tokenizer decodes it on its own. Raw bytes are best: they go to
// `bytes` as they are (a character split over several tokens is then rebuilt by the client), and
// invalid UTF-8 shows as U+FFFD in `token`.
using TokenText = std::function<std::string(int32_t)>;

// The `logprobs` object of a chat answer or chunk: {"content": [...]}, one entry per token.
Json chat_logprobs(std::span<const runtime::TokenLogprob> logprobs, const TokenText& token_text);

// The legacy object for a run of tokens. text_offset: in and out, the character offset of the
// first token in the completion's text (counted in code points, as Python counts), so that the
// chunks of a stream continue each other's offsets.
Json completion_logprobs(std::span<const runtime::TokenLogprob> logprobs, const TokenText& token_text,
                         int64_t& text_offset);

// vLLM's prompt_logprobs list for a prompt whose tokens after the first were scored as `scored`.
Json prompt_logprobs_json(std::span<const runtime::PromptLogprob> scored, const TokenText& token_text);

}  // namespace dsinfer::server
