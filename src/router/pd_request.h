// What the router reads from a client's request and adds to it for the workers, in SGLang's
// prefill/decode protocol: the same body goes to the prefill (P) and the decode (D) instance with
// bootstrap_host and bootstrap_port (where D fetches the KV cache from: P's host and its bootstrap
// port) and bootstrap_room (the random number both sides name the transfer by).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>

#include "core/json.h"

namespace dsinfer::router {

// The paths a request is split into P and D for.
bool is_generation_path(std::string_view path);  // /v1/chat/completions, /v1/completions

// The text that identifies a request's prompt for prefix affinity (the router does not tokenize):
// for chat, each message's JSON one after the other (so a conversation's next turn extends the
// previous one's text); for completions, the prompt string, or the token ids' JSON. `body` is the
// parsed request. Throws ProtocolError (400) for a body that cannot be routed: not an object, no
// messages or prompt, several prompts at once (send them one a request), or bootstrap fields of
// the client's own.
std::string prompt_text(std::string_view path, const Json& body);

// A bootstrap_room: uniform in [0, 2^63), as SGLang draws it (a non-negative int64).
uint64_t draw_bootstrap_room(std::mt19937_64& random);

// The body P and D both get: the client's with the three bootstrap fields added.
std::string with_bootstrap_fields(Json body, const std::string& host, uint16_t port, uint64_t room);

}  // namespace dsinfer::router
