#include "router/router.h"

#include "core/log.h"
#include "openai/openai_errors.h"
#include "router/pd_request.h"
#include "router/prefix_record.h"

namespace dsinfer::router {
namespace {

// How often the housekeeping thread starts due checks and expires queued requests.
constexpr auto kTick = std::chrono::milliseconds(20);
// A client refused for want of room may come back this soon (seconds).
constexpr const char* kRetryAfterSeconds = "1";
constexpr double kModelsTimeoutSeconds = 30;

std::string no_place_message(PlaceOutcome outcome) {
  switch (outcome) {
    case PlaceOutcome::kNoPrefill: return "no prefill instance is healthy; retry later";
    case PlaceOutcome::kNoDecode: return "no decode instance is healthy; retry later";
    default: return "";
  }
}

uint64_t seed_from_os() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

Router::Router(RouterOptions options)
    : options_(std::move(options)),
      workers_(options_.workers, options_.registry),
      queue_(options_.max_queued_requests),
      rooms_(options_.seed.value_or(seed_from_os())) {
  DSINFER_CHECK(options_.prefix_block_chars > 0, "the prefix block size must be at least one character");
  bool has_prefill = false, has_decode = false;
  for (const WorkerSpec& spec : options_.workers) (spec.role == WorkerRole::kPrefill ? has_prefill : has_decode) = true;
  DSINFER_CHECK(has_prefill && has_decode, "the router needs at least one prefill (--prefill URL [PORT]) and one "
                "decode instance (--decode URL)");
  client_ = std::make_unique<server::HttpClient>();
  health_ = std::make_unique<HealthChecker>(*client_, mutex_, workers_, options_.health, [this] { dispatch(); });
  server::HttpServerOptions http = options_.http;
  http.error_body = [](int status, const std::string& message) { return server::error_body(status, message); };
  server_ = std::make_unique<server::HttpServer>(
      http, [this](const server::HttpRequest& request, std::shared_ptr<server::HttpResponder> responder) {
        handle(request, std::move(responder));
      });
}

Router::~Router() { stop(); }

void Router::start() {
  server_->start();
  housekeeper_ = std::thread([this] { housekeeping(); });
}

void Router::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  health_->stop();
  {
    std::lock_guard lock(wake_mutex_);
    housekeeping_done_ = true;
  }
  wake_.notify_all();
  if (housekeeper_.joinable()) housekeeper_.join();
  server_->stop();
  {
    std::lock_guard lock(mutex_);
    queued_.clear();
  }
  client_.reset();  // cancels what is in flight; the exchanges' ends run now, and start nothing
}

uint16_t Router::port() const { return server_->port(); }

bool Router::ready() const {
  std::lock_guard lock(mutex_);
  return workers_.healthy_count(WorkerRole::kPrefill) > 0 && workers_.healthy_count(WorkerRole::kDecode) > 0;
}

void Router::housekeeping() {
  while (true) {
    {
      std::unique_lock lock(wake_mutex_);
      if (wake_.wait_for(lock, kTick, [this] { return housekeeping_done_; })) return;
    }
    const Clock::time_point now = Clock::now();
    health_->tick(now);
    std::vector<std::shared_ptr<Exchange>> expired;
    {
      std::lock_guard lock(mutex_);
      for (uint64_t id : queue_.expire(now, options_.queue_timeout)) {
        expired.push_back(std::move(queued_[id]));
        queued_.erase(id);
      }
      counters_.queue_timeouts += expired.size();
    }
    for (const auto& exchange : expired)
      exchange->fail(503, str_cat("no decode slot freed within ", options_.queue_timeout.count() / 1000.0,
                                  " s (--queue-timeout); retry later"),
                     {{"Retry-After", kRetryAfterSeconds}});
    dispatch();
  }
}

void Router::handle(const server::HttpRequest& request, std::shared_ptr<server::HttpResponder> responder) {
  const std::string_view path = request.path();
  try {
    if (path == "/health" || path == "/metrics") {
      if (request.method != "GET") throw server::method_not_allowed(request.method, path);
      if (path == "/metrics")
        return responder->respond(200, "text/plain; version=0.0.4; charset=utf-8", metrics_text());
      if (ready()) return responder->respond(200, "text/plain", "");
      throw server::ProtocolError(503, "the router needs a healthy prefill and a healthy decode instance; see "
                                       "GET /metrics for each worker's state");
    }
    if (path == "/v1/models" || path.starts_with("/v1/models/")) {
      if (request.method != "GET") throw server::method_not_allowed(request.method, path);
      return forward_models(request, responder);
    }
    if (is_generation_path(path)) {
      if (request.method != "POST") throw server::method_not_allowed(request.method, path);
      return handle_generation(request, responder);
    }
    throw server::route_not_found(request.method, path);
  } catch (const server::ProtocolError& error) {
    responder->respond(error.status(), "application/json", server::error_body(error));
  }
}

void Router::handle_generation(const server::HttpRequest& request,
                               const std::shared_ptr<server::HttpResponder>& responder) {
  ExchangeRequest exchange_request;
  exchange_request.path = std::string(request.path());
  try {
    exchange_request.body = Json::parse(request.body);
  } catch (const Error& error) {
    throw server::invalid_request(str_cat("the request body is not JSON: ", error.what()));
  }
  const std::string text = prompt_text(exchange_request.path, exchange_request.body);
  if (auto authorization = request.header("authorization"))
    exchange_request.authorization = std::string(*authorization);
  exchange_request.decode_alone = text.size() < options_.decode_absorbs_below;
  if (!exchange_request.decode_alone)
    exchange_request.prompt_blocks = prefix_block_hashes(text, options_.prefix_block_chars);
  auto exchange =
      std::make_shared<Exchange>(static_cast<ExchangeHost&>(*this), std::move(exchange_request), responder);
  const uint64_t id = next_request_id_++;
  // A client that leaves while its request waits gives up its place; one that leaves later ends
  // both calls. (The callback runs on the server's loop, which stops before the router goes.)
  responder->on_disconnect([this, id, weak = std::weak_ptr<Exchange>(exchange)] {
    {
      std::lock_guard lock(mutex_);
      if (queue_.remove(id)) queued_.erase(id);
    }
    if (auto gone = weak.lock()) gone->client_gone();
  });
  admit(exchange, id);
}

void Router::admit(const std::shared_ptr<Exchange>& exchange, uint64_t id) {
  std::optional<Route> route;
  std::string refusal;
  {
    std::lock_guard lock(mutex_);
    ++counters_.requests;
    PlaceOutcome outcome = PlaceOutcome::kNoSlot;  // behind requests that wait already
    Placement placement;
    if (stopping_) {
      refusal = "the router is shutting down";
    } else if (queue_.size() == 0) {
      const ExchangeRequest& request = exchange->request();
      outcome = place(workers_, request.prompt_blocks, request.decode_alone, options_.balance, {}, &placement);
      if (outcome == PlaceOutcome::kPlaced) route = reserve(placement, request);
      refusal = no_place_message(outcome);
    }
    if (outcome == PlaceOutcome::kNoSlot && refusal.empty()) {
      if (queue_.push(id, Clock::now())) {
        queued_[id] = exchange;
        log_debug("router: request queued (", queue_.size(), " waiting): every decode slot is taken");
      } else {
        refusal = str_cat("every decode slot is taken and ", queue_.size(),
                          " requests wait already (--max-queued-requests); retry later");
      }
    }
    if (!refusal.empty()) ++counters_.queue_full;
  }
  if (route) return exchange->start(*route);
  if (!refusal.empty()) return exchange->fail(503, refusal, {{"Retry-After", kRetryAfterSeconds}});
}

void Router::dispatch() {
  while (true) {
    std::shared_ptr<Exchange> exchange;
    std::optional<Route> route;
    std::string refusal;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      const std::optional<uint64_t> id = queue_.front();
      if (!id) return;
      exchange = queued_[*id];
      const ExchangeRequest& request = exchange->request();
      Placement placement;
      const PlaceOutcome outcome =
          place(workers_, request.prompt_blocks, request.decode_alone, options_.balance, {}, &placement);
      if (outcome == PlaceOutcome::kNoSlot) return;
      queue_.pop_front();
      queued_.erase(*id);
      if (outcome == PlaceOutcome::kPlaced) {
        route = reserve(placement, request);
      } else {
        refusal = no_place_message(outcome);
        ++counters_.queue_full;
      }
    }
    if (route) {
      exchange->start(*route);
    } else {
      exchange->fail(503, refusal, {{"Retry-After", kRetryAfterSeconds}});
    }
  }
}

Route Router::reserve(const Placement& placement, const ExchangeRequest& request) {
  Route route;
  route.placement = placement;
  Worker& decode = workers_[placement.decode];
  ++decode.in_flight;
  route.decode_host = decode.host;
  route.decode_port = decode.port;
  if (!placement.prefill) {
    log_debug("router: decode ", decode.url, " alone (short prompt)");
    return route;
  }
  Worker& prefill = workers_[*placement.prefill];
  if (log_level() <= LogLevel::kDebug)
    log_debug("router: prefill ", prefill.url, " (", prefill.prefixes.match(request.prompt_blocks), " of ",
              request.prompt_blocks.size(), " blocks cached, ", prefill.in_flight, " in flight), decode ", decode.url,
              " (", decode.remaining_slots(), " slots left)");
  ++prefill.in_flight;
  prefill.prefixes.insert(request.prompt_blocks);
  route.prefill_host = prefill.host;
  route.prefill_port = prefill.port;
  route.bootstrap_port = *prefill.bootstrap_port;
  route.room = draw_bootstrap_room(rooms_);
  return route;
}

std::optional<Route> Router::reroute(const ExchangeRequest& request, std::span<const size_t> failed) {
  std::lock_guard lock(mutex_);
  if (stopping_) return std::nullopt;
  Placement placement;
  if (place(workers_, request.prompt_blocks, request.decode_alone, options_.balance, failed, &placement) !=
      PlaceOutcome::kPlaced)
    return std::nullopt;
  ++counters_.retries;
  return reserve(placement, request);
}

void Router::prefill_done(size_t worker) {
  std::lock_guard lock(mutex_);
  --workers_[worker].in_flight;
}

void Router::decode_done(size_t worker, std::optional<int64_t> output_tokens) {
  {
    std::lock_guard lock(mutex_);
    --workers_[worker].in_flight;
    if (output_tokens) workers_.record_output(worker, *output_tokens);
  }
  dispatch();  // a slot freed
}

void Router::connection_failed(size_t worker, const std::string& error) {
  {
    std::lock_guard lock(mutex_);
    ++counters_.connection_failures;
  }
  health_->report_failure(worker, error);
}

void Router::forward_models(const server::HttpRequest& request,
                            const std::shared_ptr<server::HttpResponder>& responder) {
  server::HttpCall call;
  {
    std::lock_guard lock(mutex_);
    std::optional<size_t> chosen;
    for (size_t id = 0; id < workers_.size(); ++id) {
      const Worker& worker = workers_[id];
      if (worker.role != WorkerRole::kDecode || !worker.healthy) continue;
      if (!chosen || worker.load() < workers_[*chosen].load()) chosen = id;
    }
    if (!chosen) throw server::ProtocolError(503, "no decode instance is healthy; retry later");
    call.host = workers_[*chosen].host;
    call.port = workers_[*chosen].port;
  }
  call.method = "GET";
  call.target = request.target;
  call.timeout_seconds = kModelsTimeoutSeconds;
  if (auto authorization = request.header("authorization"))
    call.headers.emplace_back("Authorization", std::string(*authorization));
  call.on_done = [responder](const server::HttpClientResponse& response) {
    if (!response.error.empty())
      return responder->respond(502, "application/json",
                                server::error_body(502, str_cat("the decode instance failed: ", response.error)));
    server::HttpRequest lookup;
    lookup.headers = response.headers;
    const auto type = lookup.header("content-type");
    responder->respond(response.status, type ? std::string(*type) : "application/json", response.body);
  };
  client_->start(std::move(call));
}

std::string Router::metrics_text() const {
  RouterSample sample;
  {
    std::lock_guard lock(mutex_);
    sample.workers = sample_workers(workers_);
    sample.queued = queue_.size();
    sample.queue_capacity = queue_.capacity();
    sample.counters = counters_;
    ScaleOutInputs inputs;
    inputs.queue_busy_for = queue_.busy_for(Clock::now());
    inputs.queued = queue_.size();
    int answered = 0;
    for (size_t id = 0; id < workers_.size(); ++id) {
      const Worker& worker = workers_[id];
      if (worker.role != WorkerRole::kDecode || !worker.healthy) continue;
      if (worker.answers > 0) {
        inputs.average_output_tokens += worker.average_output_tokens;
        ++answered;
      }
      if (worker.reported) inputs.output_tokens_per_second += worker.reported->generation_throughput;
    }
    if (answered > 0) inputs.average_output_tokens /= answered;
    sample.scale_out = scale_out_advice(inputs, options_.scale_out_window);
  }
  return format_router_metrics(sample);
}

}  // namespace dsinfer::router
