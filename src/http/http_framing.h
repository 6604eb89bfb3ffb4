// The checks RFC 9112 asks of a request head before its body is read, beyond what Beast's parser
// already refuses (conflicting or malformed Content-Length, a chunked coding named twice on two lines).
//
// Transfer-Encoding other than one final "chunked" leaves the body's length unknown: a server that
// read it as no body would run the body as the next request (request smuggling; issue 13 saw a
// completion run that way). Every problem found here is answered and the connection closed, since
// the bytes that follow cannot be trusted to start a request.
#pragma once

#include <optional>
#include <string>

#include "http/http.h"

namespace dsinfer::server {

struct HeadProblem {
  int status;           // 400, or 501 for a transfer coding we do not decode
  std::string message;  // for the client
};

// Checks Transfer-Encoding (only a single, final "chunked"; never with Content-Length; never on
// HTTP/1.0) and Host (exactly one on HTTP/1.1, at most one on HTTP/1.0).
std::optional<HeadProblem> check_request_head(const HttpRequest& head);

}  // namespace dsinfer::server
