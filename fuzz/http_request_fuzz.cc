// libFuzzer target: the bytes a client sends the HTTP server, read the way a connection reads them
// (http/http_parse.h: Beast's parser with a body limit, then check_request_head before the body;
// after a whole request the bytes that follow start the next one, as on a keep-alive connection).
//
// Every input is read twice: all bytes at once, and in pieces of varying size as a socket might
// hand them over. A crash, a sanitizer report, an exception, two readings that accept different
// requests (see consistent()), or an accepted request that breaks the framing rules below
// (RFC 9112: Host on 1.1, no Transfer-Encoding with Content-Length or on 1.0, a body within the
// limit) is a bug.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/http.h"
#include "http/http_parse.h"

namespace {

using dsinfer::server::HttpRequest;
using dsinfer::server::RequestParser;

constexpr size_t kMaxBodyBytes = 1024;  // small, so that inputs reach the 413 path
constexpr int kMaxRequests = 16;        // pipelined requests read from one input

size_t count_headers(const HttpRequest& request, std::string_view name) {
  return static_cast<size_t>(std::count_if(request.headers.begin(), request.headers.end(), [&](const auto& field) {
    return std::equal(field.first.begin(), field.first.end(), name.begin(), name.end(),
                      [](char a, char b) { return (a | 0x20) == (b | 0x20); });
  }));
}

void check_head(const HttpRequest& head) {
  bool ok = (head.version == 10 || head.version == 11) && !head.method.empty() && !head.target.empty() &&
            count_headers(head, "host") <= 1 && (head.version == 10 || count_headers(head, "host") == 1);
  if (count_headers(head, "transfer-encoding") > 0) {
    ok = ok && head.version == 11 && count_headers(head, "content-length") == 0;
  }
  if (!ok) std::abort();
}

// What one reading of the input produced.
struct Outcome {
  enum class End { kRefused, kIncomplete, kEnough };
  std::vector<std::string> accepted;  // each head and each request, with what the server would see
  End end = End::kIncomplete;  // kIncomplete: the input ended before the request it began
  int refused_status = 0;      // with kRefused
};

// Two readings must accept the same requests with the same contents; otherwise where one request
// ends and the next begins would depend on how the bytes arrived (request smuggling). Their ends
// may differ in two ways, both from Beast (1.74) checking a head while it arrives only when it can:
// - bytes refused at once in one reading may, in another, leave a head waiting for its end (which
//   the server's header timeout closes), as Beast waits for a whole head once a read ended mid-line;
// - the header limit (8 KiB) applies to the whole head when it arrives in pieces, but separately
//   to the request line and to the fields when they arrive together, so a head of up to twice the
//   limit may be accepted in one reading and refused with 431 in another.
bool consistent(const Outcome& a, const Outcome& b) {
  using End = Outcome::End;
  if (a.accepted != b.accepted) {
    const Outcome& shorter = a.accepted.size() < b.accepted.size() ? a : b;
    const Outcome& longer = &shorter == &a ? b : a;
    return shorter.end == End::kRefused && shorter.refused_status == 431 &&
           std::equal(shorter.accepted.begin(), shorter.accepted.end(), longer.accepted.begin());
  }
  if (a.end == b.end) return true;
  return (a.end == End::kRefused && b.end == End::kIncomplete) ||
         (a.end == End::kIncomplete && b.end == End::kRefused);
}

// Reads requests from `input`, handing it to the parser in pieces no larger than the next entry
// of `pieces` (cycled; 0 means all that is left), the way a connection feeds what each read brings.
Outcome read_requests(std::string_view input, const std::vector<size_t>& pieces) {
  Outcome outcome;
  std::string buffered;  // arrived and not yet used, as a connection's buffer
  size_t arrived = 0, piece = 0;
  int requests = 0;
  auto parser = std::make_unique<RequestParser>(kMaxBodyBytes);
  for (;;) {
    const RequestParser::Step step = parser->parse(buffered);
    if (step.used > buffered.size()) std::abort();
    buffered.erase(0, step.used);
    switch (step.event) {
      case RequestParser::Event::kHead:
        check_head(parser->request());
        outcome.accepted.push_back("head " + parser->request().method + " " + parser->request().target +
                                   (parser->keep_alive() ? " keep-alive" : " close") +
                                   (parser->expects_continue() ? " continue" : ""));
        continue;
      case RequestParser::Event::kRequest:
        if (parser->request().body.size() > kMaxBodyBytes) std::abort();
        outcome.accepted.push_back("request " + parser->request().body);
        if (++requests == kMaxRequests) {
          outcome.end = Outcome::End::kEnough;
          return outcome;
        }
        parser = std::make_unique<RequestParser>(kMaxBodyBytes);
        continue;
      case RequestParser::Event::kRefused: {
        const int status = parser->problem().status;
        if ((status != 400 && status != 413 && status != 431 && status != 501) || parser->problem().message.empty()) {
          std::abort();
        }
        outcome.end = Outcome::End::kRefused;  // the connection closes: nothing after it is read
        outcome.refused_status = status;
        return outcome;
      }
      case RequestParser::Event::kNeedMore:
        if (arrived == input.size()) return outcome;
        size_t size = pieces[piece++ % pieces.size()];
        if (size == 0 || size > input.size() - arrived) size = input.size() - arrived;
        buffered.append(input.substr(arrived, size));
        arrived += size;
        continue;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const Outcome whole = read_requests(input, {0});
  // Piece sizes that vary with the input's length, so that splits fall everywhere over a run.
  const std::vector<size_t> pieces = {1, 1 + size % 7, 2, 1 + size % 61, 3, 1, 17};
  if (!consistent(whole, read_requests(input, pieces))) std::abort();
  return 0;
}
