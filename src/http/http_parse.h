// Reading one HTTP/1.x request out of bytes, as a server connection reads it: Beast's parser with
// the server's body limit, stopping after the head so that check_request_head (and the server's
// own head check) can refuse a request before a byte of its body is taken.
//
// No socket: the bytes can come in any pieces, which lets a fuzzer and tests drive the request
// framing, the part of the server that must withstand hostile input, without a network.
// (http_connection.cc runs the same steps on the bytes it reads.)
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "http/http.h"
#include "http/http_framing.h"

namespace dsinfer::server {

class RequestParser {
 public:
  enum class Event {
    kNeedMore,  // the bytes ran out: call again with the unused ones and whatever arrives next
    kHead,      // the head arrived and passed check_request_head; its body is still unread
    kRequest,   // the whole request arrived
    kRefused,   // malformed, too large or refused by check_request_head: answer problem(), then close
  };
  struct Step {
    Event event;
    size_t used;  // bytes taken from the front of the input; the rest belong to what comes next
  };

  explicit RequestParser(size_t max_body_bytes);  // a larger body is refused with 413
  ~RequestParser();
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  // Parses from the front of `bytes` up to the next event. After kRequest or kRefused this parser
  // is spent: a pipelined request that follows goes to a new one.
  Step parse(std::string_view bytes);

  // The head (method, target, version, headers) from kHead on; with its body after kRequest.
  const HttpRequest& request() const { return request_; }
  HttpRequest& request() { return request_; }
  bool keep_alive() const;        // from kHead on: whether the connection may carry another request
  bool expects_continue() const;  // from kHead on: "Expect: 100-continue" on HTTP/1.1, body unread
  const HeadProblem& problem() const { return problem_; }  // after kRefused: status (400, 413, 431,
                                                           // 501) and a message for the client

 private:
  struct Beast;  // Beast's parser, kept out of this header
  std::unique_ptr<Beast> beast_;
  HttpRequest request_;
  HeadProblem problem_{0, ""};
  bool head_done_ = false;
  bool spent_ = false;
};

}  // namespace dsinfer::server
