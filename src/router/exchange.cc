#include "router/exchange.h"

#include "core/log.h"
#include "openai/openai_errors.h"
#include "router/pd_request.h"

namespace dsinfer::router {
namespace {

bool is_success(int status) { return status >= 200 && status < 300; }

std::string header_value(const server::Headers& headers, std::string_view name) {
  server::HttpRequest lookup;  // its case-insensitive header lookup
  lookup.headers = headers;
  const auto value = lookup.header(name);
  return value ? std::string(*value) : std::string();
}

// The content type to answer with: the worker's, else JSON (every answer of these routes is).
std::string content_type_of(const server::Headers& headers) {
  std::string type = header_value(headers, "content-type");
  return type.empty() ? "application/json" : type;
}

}  // namespace

Exchange::Exchange(ExchangeHost& host, ExchangeRequest request, std::shared_ptr<server::HttpResponder> responder)
    : host_(host), request_(std::move(request)), responder_(std::move(responder)) {}

void Exchange::start(const Route& route) {
  {
    std::lock_guard lock(mutex_);
    if (!over_) return launch(route);
  }
  // The client left while the request waited: give its places back.
  if (route.placement.prefill) host_.prefill_done(*route.placement.prefill);
  host_.decode_done(route.placement.decode, std::nullopt);
}

void Exchange::launch(const Route& route) {
  const int attempt = ++attempt_;
  route_ = route;
  decode_status_ = 0;
  decode_content_type_.clear();
  decode_streamed_ = false;
  decode_held_.clear();
  output_length_ = OutputLengthCounter();
  const double timeout = host_.request_timeout_seconds();
  auto make_call = [&](const std::string& host, uint16_t port, std::string body) {
    server::HttpCall call;
    call.method = "POST";
    call.host = host;
    call.port = port;
    call.target = request_.path;
    call.body = std::move(body);
    call.timeout_seconds = timeout;
    call.headers.emplace_back("Content-Type", "application/json");
    if (!request_.authorization.empty()) call.headers.emplace_back("Authorization", request_.authorization);
    return call;
  };
  const std::string body = route.placement.prefill ? with_bootstrap_fields(request_.body, route.prefill_host,
                                                                           route.bootstrap_port, route.room)
                                                   : request_.body.dump();
  auto self = shared_from_this();
  decode_cancel_ = std::make_shared<server::HttpCancel>();
  server::HttpCall decode = make_call(route.decode_host, route.decode_port, body);
  decode.cancel = decode_cancel_;
  decode.on_head = [self, attempt](const server::HttpClientResponse& head) { self->on_decode_head(attempt, head); };
  decode.on_data = [self, attempt](std::string_view piece) { self->on_decode_data(attempt, piece); };
  decode.on_done = [self, attempt, worker = route.placement.decode](const server::HttpClientResponse& response) {
    self->on_decode_done(attempt, worker, response);
  };
  prefill_cancel_.reset();
  if (route.placement.prefill) {
    prefill_cancel_ = std::make_shared<server::HttpCancel>();
    server::HttpCall prefill = make_call(route.prefill_host, route.prefill_port, body);
    prefill.cancel = prefill_cancel_;
    prefill.on_done = [self, attempt, worker = *route.placement.prefill](const server::HttpClientResponse& response) {
      self->on_prefill_done(attempt, worker, response);
    };
    host_.client().start(std::move(prefill));
  }
  host_.client().start(std::move(decode));
}

void Exchange::fail(int status, const std::string& message, server::Headers headers) {
  std::lock_guard lock(mutex_);
  if (over_) return;
  over_ = true;
  responder_->respond(status, "application/json", server::error_body(status, message), std::move(headers));
}

void Exchange::client_gone() {
  std::lock_guard lock(mutex_);
  if (over_) return;
  over_ = true;
  cancel_calls();
}

void Exchange::cancel_calls() {
  if (prefill_cancel_) prefill_cancel_->cancel();
  if (decode_cancel_) decode_cancel_->cancel();
}

void Exchange::respond_error(int status, const std::string& message) {
  over_ = true;
  responder_->respond(status, "application/json", server::error_body(status, message));
}

void Exchange::on_prefill_done(int attempt, size_t worker, const server::HttpClientResponse& response) {
  host_.prefill_done(worker);
  const bool unreachable = !response.error.empty() && response.error != "cancelled";
  std::lock_guard lock(mutex_);
  if (attempt != attempt_ || over_) {
    if (unreachable) host_.connection_failed(worker, response.error);
    return;
  }
  if (unreachable) {
    if (!client_started_) return retry_or_answer({worker, response.error}, "prefill");
    host_.connection_failed(worker, response.error);  // the stream goes on: D has the KV cache already
    return;
  }
  if (response.error.empty() && !is_success(response.status) && !client_started_) {
    log_debug("router: the prefill instance answered ", response.status, "; that is the client's answer");
    over_ = true;
    if (decode_cancel_) decode_cancel_->cancel();
    responder_->respond(response.status, content_type_of(response.headers), response.body);
  }
}

void Exchange::on_decode_head(int attempt, const server::HttpClientResponse& head) {
  std::lock_guard lock(mutex_);
  if (attempt != attempt_ || over_) return;
  decode_status_ = head.status;
  decode_content_type_ = content_type_of(head.headers);
  decode_streamed_ = header_value(head.headers, "content-length").empty();
}

void Exchange::on_decode_data(int attempt, std::string_view piece) {
  std::lock_guard lock(mutex_);
  if (attempt != attempt_ || over_) return;
  if (!is_success(decode_status_) || !decode_streamed_) {
    decode_held_.append(piece);
    return;
  }
  output_length_.feed(piece);
  if (!client_started_) {
    client_started_ = true;
    responder_->start_stream(decode_status_, decode_content_type_, {{"Cache-Control", "no-cache"}});
  }
  responder_->send_chunk(std::string(piece));
}

void Exchange::on_decode_done(int attempt, size_t worker, const server::HttpClientResponse& response) {
  const bool unreachable = !response.error.empty() && response.error != "cancelled";
  std::optional<int64_t> output_tokens;
  {
    std::lock_guard lock(mutex_);
    const bool current = attempt == attempt_ && !over_;
    if (current && response.error.empty() && is_success(response.status)) {
      if (!decode_streamed_) output_length_.feed(decode_held_);
      output_tokens = output_length_.tokens();
    }
    if (!current) {
      if (unreachable) host_.connection_failed(worker, response.error);
    } else if (unreachable && !client_started_) {
      retry_or_answer({worker, response.error}, "decode");
    } else if (unreachable) {
      // Mid-stream: the status is sent already; end the stream as the server ends a failed one.
      host_.connection_failed(worker, response.error);
      over_ = true;
      if (decode_content_type_.starts_with("text/event-stream")) {
        responder_->send_chunk(str_cat("data: ", server::error_body(502, str_cat("the decode instance failed: ",
                                                                                   response.error)),
                                       "\n\ndata: [DONE]\n\n"));
      }
      responder_->finish_stream();
    } else if (response.error.empty()) {
      over_ = true;
      if (client_started_) {
        responder_->finish_stream();
      } else {
        // A whole answer, an empty stream, or D's error: as D sent it. On an error P has no one to
        // push its cache to.
        if (!is_success(response.status) && prefill_cancel_) prefill_cancel_->cancel();
        responder_->respond(response.status, content_type_of(response.headers), std::move(decode_held_));
      }
    }
  }
  host_.decode_done(worker, output_tokens);
}

void Exchange::retry_or_answer(const Failure& failure, std::string_view role) {
  host_.connection_failed(failure.worker, failure.error);
  failed_.push_back(failure.worker);
  cancel_calls();
  if (retries_ < host_.max_retries()) {
    ++retries_;
    if (std::optional<Route> route = host_.reroute(request_, failed_)) {
      log_info("router: the ", role, " instance could not be reached (", failure.error, "); retrying on another pair");
      return launch(*route);
    }
  }
  respond_error(502, str_cat("the ", role, " instance could not be reached (", failure.error, ")",
                             retries_ > 0 ? ", nor another pair" : ""));
}

}  // namespace dsinfer::router
