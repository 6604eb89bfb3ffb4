// One answer made of several engine requests: the n choices of a prompt (n > 1), and the prompts
// of a batched /v1/completions request. Each choice is an engine request of its own; choice
// prompt_index * n + i of the answer is sample i of prompt prompt_index (OpenAI's numbering), and
// with a seed it draws from seed + i, so that the choices differ and each repeats. An answer of
// one choice takes the same path.
//
// Streamed, the choices' chunks go out as the engine delivers them, interleaved, each with its
// index; every choice ends with its own finish chunk, and the usage chunk (when asked for) and one
// [DONE] close the stream after the last. Whole, the answer goes out once every choice has ended,
// its choices in index order. Usage counts each prompt once (as OpenAI and vLLM do) and the
// completion tokens of every choice. A choice that fails fails the answer (500, or the error event
// and [DONE]) and the others are aborted; a client that disconnects aborts them all; a drain that
// cuts the request short ends it as InFlightRequests says.
//
// The prompt's pages are shared: with the prefix cache on, a prompt's first choice goes to the
// engine at once and the others follow when it delivers its first output, by when the prompt's full
// pages sit in the prefix cache. They then compute only the prompt's last, partial page, and the
// full pages are held once between them. (Submitted together, each would compute and hold the
// whole prompt: the cache takes a prompt's pages only once they have been computed.)
//
// vLLM's prompt_logprobs are computed once per prompt, by its first choice, which alone asks the
// engine for them (so the others may take its pages from the prefix cache): every choice of the
// prompt shows that choice's scores in a whole answer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "runtime/engine.h"
#include "runtime/request.h"
#include "http/http.h"
#include "server/in_flight_requests.h"
#include "openai/openai_response.h"

namespace dsinfer::server {

// How the outputs of one choice become JSON.
struct ChoiceFormat {
  std::function<std::string()> stream_head;                              // sent as the stream starts; may be null
  std::function<std::string(const runtime::StreamOutput&)> stream_next;  // the SSE text of one delivery
  std::function<Json(const Generation&)> answer_choice;                  // the choice in a whole answer
};

struct ChoicePrompt {
  std::vector<int32_t> tokens;
  runtime::RequestOptions options;  // of its choice 0 (see choice_options)
};

struct FanOutRequest {
  ResponseMeta meta;
  std::string object;        // of a whole answer: "chat.completion" or "text_completion"
  std::string chunk_object;  // of a stream's chunks: "chat.completion.chunk" or "text_completion"
  bool stream = false;
  bool include_usage = false;
  int64_t n = 1;             // choices per prompt
  std::vector<ChoicePrompt> prompts;
  // The format of choice `index` (= prompt_index * n + i); called once per choice, in index order.
  // A streamed choice must end only itself (StreamChoice::ends_stream false): the stream's end is
  // the fan-out's.
  std::function<ChoiceFormat(size_t prompt_index, int64_t index)> format;
  // What a whole answer carries besides its choices, from its first choice's generation (chat's
  // prompt_logprobs); may be null.
  std::function<void(Json& answer, const Generation& first)> finish_answer;
};

// The engine options of sample `i` of a prompt whose sample 0 has `options`: seed + i when seeded,
// and no prompt_logprobs past sample 0 (sample 0's serve them all).
runtime::RequestOptions choice_options(runtime::RequestOptions options, int64_t i);

// Submits the request's choices to `engine` and answers through `responder` as they end (on the
// engine's output thread). `admission` stays in the count until every choice has ended. The engine
// outlives the answer. Throws what Engine::submit throws for a prompt it refuses, before anything
// has been sent (the choices already submitted are aborted), and a 503 ProtocolError when the
// drain has cut the request short already. Each choice logs its line when `log_requests` (the
// response id, with "-<index>" when there are several).
void answer_choices(FanOutRequest request, runtime::Engine& engine, std::shared_ptr<HttpResponder> responder,
                    std::shared_ptr<InFlightRequests::Request> admission, bool log_requests);

}  // namespace dsinfer::server
