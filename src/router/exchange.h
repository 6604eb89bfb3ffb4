// One client request through the router (the proxy): the same body, with the bootstrap fields
// (pd_request.h), goes to the prefill (P) and the decode (D) instance at once; D's answer goes
// back to the client as it arrives, and P's is read and dropped.
//
//   - D's head is held until D's first body byte: until then the client has received nothing, and
//     an error of P's can still be its answer. A streamed answer (no Content-Length) is then passed
//     through piece by piece; a whole one is sent whole.
//   - P answers an error (not 2xx) before the client got anything: the client gets P's status and
//     body, and the D call is cancelled (its connection closes, and the worker aborts the request).
//   - D answers an error: the client gets it, and the P call is cancelled.
//   - A call that cannot reach its worker (refused, reset, timed out) before the client got
//     anything: the worker is reported (it gets no traffic until its health check passes) and the
//     request is tried once more (--max-retries) on another pair, with a new room; else a 502.
//     When the stream had started, it ends with an OpenAI-style error event and [DONE].
//   - The client leaves: both calls are cancelled.
//
// Callbacks come from the router's HttpClient loop and the server's loop; the exchange's state is
// under its own mutex. Lock order: an exchange may call its host with its mutex held (the host then
// takes the router's); the router never calls an exchange with its own mutex held.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/json.h"
#include "http/http.h"
#include "router/output_length.h"
#include "router/placement.h"

namespace dsinfer::router {

struct ExchangeRequest {
  std::string path;           // /v1/chat/completions or /v1/completions
  Json body;                  // the client's, parsed
  std::string authorization;  // the client's Authorization header, passed on; empty: none
  std::vector<uint64_t> prompt_blocks;  // prefix_record.h
  bool decode_alone = false;  // a short prompt the D absorbs (--decode-absorbs-below)
};

// Where an attempt goes, with what its calls need.
struct Route {
  Placement placement;
  std::string prefill_host;
  uint16_t prefill_port = 0;
  uint16_t bootstrap_port = 0;
  std::string decode_host;
  uint16_t decode_port = 0;
  uint64_t room = 0;
};

// What an exchange needs from the router around it.
class ExchangeHost {
 public:
  virtual ~ExchangeHost() = default;
  virtual server::HttpClient& client() = 0;
  virtual double request_timeout_seconds() const = 0;
  virtual int max_retries() const = 0;
  // A new pair for a retry, not among `failed`, reserved; empty when there is none.
  virtual std::optional<Route> reroute(const ExchangeRequest& request, std::span<const size_t> failed) = 0;
  // A call ended (answered, failed or cancelled): its reservation is released. `output_tokens`:
  // a D's whole answer's length, when known.
  virtual void prefill_done(size_t worker) = 0;
  virtual void decode_done(size_t worker, std::optional<int64_t> output_tokens) = 0;
  virtual void connection_failed(size_t worker, const std::string& error) = 0;
};

class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(ExchangeHost& host, ExchangeRequest request, std::shared_ptr<server::HttpResponder> responder);

  const ExchangeRequest& request() const { return request_; }
  // Sends the first attempt's calls on `route` (reserved); releases it when the client has left.
  void start(const Route& route);
  // Answers the client an OpenAI-style error instead (no place for the request).
  void fail(int status, const std::string& message, server::Headers headers = {});
  void client_gone();

 private:
  struct Failure {
    size_t worker;
    std::string error;
  };
  void launch(const Route& route);  // lock held
  void on_prefill_done(int attempt, size_t worker, const server::HttpClientResponse& response);
  void on_decode_head(int attempt, const server::HttpClientResponse& head);
  void on_decode_data(int attempt, std::string_view piece);
  void on_decode_done(int attempt, size_t worker, const server::HttpClientResponse& response);
  // A call of the current attempt could not reach its worker: retry, or answer. Lock held.
  void retry_or_answer(const Failure& failure, std::string_view role);
  void cancel_calls();  // lock held
  void respond_error(int status, const std::string& message);  // lock held; the client's answer

  ExchangeHost& host_;
  const ExchangeRequest request_;
  const std::shared_ptr<server::HttpResponder> responder_;

  std::mutex mutex_;
  int attempt_ = 0;  // the current attempt; calls of earlier ones are ignored
  Route route_;
  std::shared_ptr<server::HttpCancel> prefill_cancel_;
  std::shared_ptr<server::HttpCancel> decode_cancel_;
  std::vector<size_t> failed_;  // workers that could not be reached for this request
  int retries_ = 0;
  // D's answer in the current attempt.
  int decode_status_ = 0;
  std::string decode_content_type_;
  bool decode_streamed_ = false;
  std::string decode_held_;  // body bytes not passed through (a whole answer, an error)
  OutputLengthCounter output_length_;
  bool client_started_ = false;  // the client has received the head of its answer
  bool over_ = false;            // the client has its whole answer, or has left
};

}  // namespace dsinfer::router
