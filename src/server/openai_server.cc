#include "server/openai_server.h"

#include <algorithm>
#include <functional>
#include <variant>

#include "core/log.h"
#include "model/kv_cache.h"
#include "server/bootstrap_fields.h"
#include "server/chat_prompt.h"
#include "server/choice_fanout.h"
#include "server/constraint_compiler.h"
#include "server/cors.h"
#include "server/disconnect_relay.h"
#include "server/in_flight_requests.h"
#include "server/metrics_format.h"
#include "openai/openai_errors.h"
#include "openai/openai_request.h"
#include "openai/openai_response.h"
#include "openai/openai_stream.h"
#include "openai/openai_tools.h"
#include "server/process_metrics.h"
#include "server/request_log.h"

namespace dsinfer::server {
namespace {

constexpr std::string_view kJson = "application/json";

// How long requests cut short by a drain may take to deliver their ends: the engine aborts them at
// its next step, and one still being prepared finishes its tokenization first.
constexpr auto kCutShortGrace = std::chrono::seconds(5);

void respond_json(HttpResponder& responder, int status, const Json& body) {
  responder.respond(status, std::string(kJson), body.dump());
}

void respond_error(HttpResponder& responder, const ProtocolError& error) {
  responder.respond(error.status(), std::string(kJson), error_body(error));
}

// The engine failed for good (a lost device): the server cannot answer and is about to exit.
ProtocolError engine_unavailable(std::string_view why) {
  return ProtocolError(503, str_cat("The server can no longer run the model (", why,
                                    "); it is shutting down. Retry on another instance."));
}

// While draining: the server takes nothing new.
ProtocolError shutting_down() {
  return ProtocolError(503, "The server is shutting down and takes no new requests. Retry on another instance.");
}

// Every request thread busy and the queue behind them full.
ProtocolError server_busy(size_t waiting) {
  return ProtocolError(503, str_cat("The server is busy: ", waiting,
                                    " requests are waiting to be prepared. Retry after a short wait."));
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < a.size(); ++i) difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  return difference == 0;
}

// "%2F" and the like in a path segment; nullopt when an escape is malformed.
std::optional<std::string> percent_decoded(std::string_view text) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int high = hex(text[i + 1]), low = hex(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

using Admission = std::shared_ptr<InFlightRequests::Request>;

}  // namespace

struct OpenAIServer::Impl {
  explicit Impl(ServerOptions options_in)
      : options(std::move(options_in)),
        gateway(WorkerIdentity{options.served_model_name, options.version, options.commit,
                               options.reasoning ? "deepseek-r1" : "", options.tool_call_parser, options.gateway}) {
    check_tool_flags(options.tool_call_parser, options.enable_auto_tool_choice);
    options.http.error_body = [](int status, const std::string& message) { return error_body(status, message); };
    // The API key is checked from the head, before any body is read: an unauthenticated client
    // cannot make the server receive (and hold) a large body. Every /v1 path needs the key, known
    // or not, as vLLM answers (401 before 404).
    options.http.check_head = [this](const HttpRequest& head) -> std::optional<HttpAnswer> {
      const std::string_view path = head.path();
      // Draining: refused before any body is read (/health says why itself).
      if (requests.draining() && path != "/health" && path != "/metrics")
        return HttpAnswer{503, std::string(kJson), error_body(shutting_down()), cors_headers(head)};
      const bool needs_key = path.starts_with("/v1") || path == "/tokenize" || path == "/detokenize" ||
                             gateway_path_needs_api_key(path);
      if (!needs_key) return std::nullopt;
      if (head.method == "OPTIONS" && cors_enabled()) return std::nullopt;  // a preflight carries no key
      try {
        check_auth(head);
      } catch (const ProtocolError& error) {
        return HttpAnswer{error.status(), std::string(kJson), error_body(error), cors_headers(head)};
      }
      return std::nullopt;
    };
  }

  // The work of a request on a request thread: parse, render, tokenize, then answer or submit.
  using Preparation = void (Impl::*)(const HttpRequest&, const std::shared_ptr<HttpResponder>&, const Admission&);

  void handle(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder);
  void route(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder);
  void prepare(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder, Preparation preparation);
  void check_auth(const HttpRequest& request) const;
  bool cors_enabled() const { return !options.allowed_origins.empty(); }
  Headers cors_headers(const HttpRequest& request) const;
  void preflight(const HttpRequest& request, HttpResponder& responder);
  const ServedModel& model() const;
  void check_model_name(const std::string& requested) const;
  TokenText token_text() const;

  void chat_completions(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder,
                        const Admission& admission);
  void completions(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder,
                   const Admission& admission);
  void tokenize(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder, const Admission&);
  void detokenize(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder, const Admission&);
  void models(HttpResponder& responder);
  void model_by_id(std::string_view escaped_id, HttpResponder& responder);
  Json model_card() const;
  void version(HttpResponder& responder);
  void metrics(HttpResponder& responder);
  void flush_cache(const HttpRequest&, const std::shared_ptr<HttpResponder>& responder, const Admission&) {
    gateway.flush_cache(*model().engine, *responder);
  }

  ServerOptions options;
  GatewayRoutes gateway;
  std::unique_ptr<HttpServer> http;
  std::atomic<bool> ready{false};
  ServedModel served;
  InFlightRequests requests;
  RequestWorkers workers{options.request_workers};
  ConstraintCompiler constraints;  // issue 12: structured output, compiled on the request threads
};

const ServedModel& OpenAIServer::Impl::model() const {
  if (!ready.load()) throw server_not_ready();
  return served;
}

void OpenAIServer::Impl::check_auth(const HttpRequest& request) const {
  if (options.api_key.empty()) return;
  std::optional<std::string_view> header = request.header("authorization");
  if (!header) throw missing_api_key();
  constexpr std::string_view kBearer = "Bearer ";
  if (header->substr(0, kBearer.size()) != kBearer ||
      !constant_time_equal(header->substr(std::min(header->size(), kBearer.size())), options.api_key))
    throw invalid_api_key();
}

void OpenAIServer::Impl::check_model_name(const std::string& requested) const {
  if (!requested.empty() && requested != options.served_model_name) throw model_not_found(requested);
}

TokenText OpenAIServer::Impl::token_text() const {
  const tokenizer::Tokenizer* tokenizer = served.tokenizer;
  return [tokenizer](int32_t id) { return tokenizer->decode(std::vector<int32_t>{id}); };
}

namespace {

// The field of the OpenAI API that carried the part of a request the engine refused.
std::string api_field(runtime::RequestPart part, std::string_view target) {
  const bool chat = target.find("/chat/") != std::string_view::npos;
  switch (part) {
    case runtime::RequestPart::kPrompt:
      return chat ? "messages" : "prompt";
    case runtime::RequestPart::kTokenBudget:
      return "max_tokens";
    case runtime::RequestPart::kLogprobs:
      return chat ? "top_logprobs" : "logprobs";
    case runtime::RequestPart::kPromptLogprobs:
      return "prompt_logprobs";
    case runtime::RequestPart::kLogitBias:
      return "logit_bias";
    case runtime::RequestPart::kConstraint:
      return "response_format";
    case runtime::RequestPart::kKvHandoff:
      return "bootstrap_room";
  }
  return "";
}

// Runs `work` and answers whatever it throws with an OpenAI-style error. On the event loop (routing)
// and on the request threads (preparing) alike.
template <typename Work>
void answer_errors(const HttpRequest& request, HttpResponder& responder, Work&& work) {
  try {
    work();
  } catch (const ProtocolError& error) {
    respond_error(responder, error);
  } catch (const runtime::InvalidRequest& error) {
    respond_error(responder, invalid_request(error.what(), api_field(error.part(), request.target)));
  } catch (const runtime::EngineUnavailable& error) {
    respond_error(responder, engine_unavailable(error.what()));
  } catch (const Error& error) {
    // Template and tokenizer errors come from what the client sent (a raise_exception in the
    // template, text that is not UTF-8): the client's to fix.
    respond_error(responder, invalid_request(error.what()));
  } catch (const std::exception& error) {
    log_warning("internal error on ", request.method, " ", request.target, ": ", error.what());
    respond_error(responder, internal_error(error.what()));
  }
}

}  // namespace

void OpenAIServer::Impl::handle(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder) {
  Headers cors = cors_headers(request);
  std::shared_ptr<HttpResponder> answering =
      cors.empty() ? responder : std::make_shared<CorsResponder>(responder, std::move(cors));
  answer_errors(request, *answering, [&] { route(request, answering); });
}

Headers OpenAIServer::Impl::cors_headers(const HttpRequest& request) const {
  return server::cors_headers(options.allowed_origins, request);
}

void OpenAIServer::Impl::preflight(const HttpRequest& request, HttpResponder& responder) {
  answer_preflight(options.allowed_origins, request, responder);
}

// Hands the request to a request thread. The request is copied (the transport's ends with the
// handler call): one memcpy of the body on the loop, against the parse and tokenization it spares.
void OpenAIServer::Impl::prepare(const HttpRequest& request, const std::shared_ptr<HttpResponder>& answering,
                                 Preparation preparation) {
  model();  // 503 before a model is attached, without queuing
  Admission admission = requests.admit();
  // The request thread replaces the callback below once the request is in the engine; the relay
  // keeps the two in that order (disconnect_relay.h).
  std::shared_ptr<HttpResponder> responder = std::make_shared<DisconnectRelay>(answering);
  // Until the request reaches the engine, a client that leaves only spares the work.
  auto gone = std::make_shared<std::atomic<bool>>(false);
  responder->on_disconnect([gone] { gone->store(true); });
  auto copy = std::make_shared<const HttpRequest>(request);
  const bool queued = workers.try_post(request.body.size(), [this, copy, responder, admission, gone, preparation] {
    if (gone->load()) return;
    if (admission->cut_short()) return respond_error(*responder, cut_short_by_shutdown());
    answer_errors(*copy, *responder, [&] { (this->*preparation)(*copy, responder, admission); });
  });
  if (!queued) throw server_busy(workers.waiting());
}

void OpenAIServer::Impl::route(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder) {
  std::string_view path = request.path();
  const std::string& method = request.method;
  auto expect = [&](std::string_view wanted) {
    if (method != wanted) throw method_not_allowed(method, path);
  };
  if (method == "OPTIONS" && cors_enabled()) return preflight(request, *responder);
  if (path == "/health") {
    expect("GET");
    if (requests.draining()) throw shutting_down();
    if (!ready.load()) throw server_not_ready();
    if (!served.engine->healthy()) throw engine_unavailable(served.engine->fatal_error());
    return responder->respond(200, "text/plain", "");
  }
  if (path == "/metrics") {
    expect("GET");
    return metrics(*responder);
  }
  if (requests.draining()) throw shutting_down();  // a request whose head came before the drain began
  if (path == "/v1/chat/completions") {
    expect("POST");
    check_auth(request);
    return prepare(request, responder, &Impl::chat_completions);
  }
  if (path == "/v1/completions") {
    expect("POST");
    check_auth(request);
    return prepare(request, responder, &Impl::completions);
  }
  if (path == "/v1/models") {
    expect("GET");
    check_auth(request);
    return models(*responder);
  }
  if (constexpr std::string_view kModelPrefix = "/v1/models/"; path.starts_with(kModelPrefix)) {
    expect("GET");
    check_auth(request);
    return model_by_id(path.substr(kModelPrefix.size()), *responder);
  }
  if (path == "/version") {
    expect("GET");
    return version(*responder);
  }
  if (path == "/tokenize") {
    expect("POST");
    check_auth(request);
    return prepare(request, responder, &Impl::tokenize);
  }
  if (path == "/detokenize") {
    expect("POST");
    check_auth(request);
    return prepare(request, responder, &Impl::detokenize);
  }
  if (is_gateway_path(path)) {
    if (gateway_path_needs_api_key(path)) check_auth(request);
    if (path != "/flush_cache") return gateway.answer(request, responder, *model().engine);
    expect("POST");
    return prepare(request, responder, &Impl::flush_cache);  // waits for the engine thread
  }
  throw route_not_found(method, path);
}

void OpenAIServer::Impl::chat_completions(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder,
                                          const Admission& admission) {
  const ServedModel& served_model = model();
  Json body = parse_json_body(request.body);
  const std::optional<BootstrapFields> bootstrap = bootstrap_fields(body, options.gateway.role);
  ChatCompletionRequest chat = parse_chat_request(body);
  if (bootstrap) refuse_bootstrap_fanout(chat.params.n);
  check_model_name(chat.model);
  ToolParsing tools =
      tool_parsing(chat.tools, chat.tool_choice, options.tool_call_parser, options.enable_auto_tool_choice);
  if (!chat.parallel_tool_calls) tools.max_calls = 1;
  if (served_model.chat_template == nullptr)
    throw invalid_request("this model has no chat template; use /v1/completions", "messages");
  std::string text = render_chat_prompt(*served_model.chat_template, chat);
  std::vector<int32_t> prompt = served_model.tokenizer->encode(text, /*add_special_tokens=*/false);
  runtime::RequestOptions request_options =
      chat.request_options(static_cast<int64_t>(prompt.size()), served_model.engine->max_model_len());
  if (bootstrap) request_options.kv_handoff = kv_handoff(*bootstrap, options.gateway.role);
  // Structured output, or a forced tool call; the grammar applies to the answer, after the reasoning.
  if (std::optional<StructuredOutputRequest> constraint =
          chat_constraint(chat.params.structured_output, chat.tools, chat.tool_choice, chat.tool_choice_function,
                          options.tool_call_parser, chat.parallel_tool_calls))
    request_options.constraint =
        constraints.compile(*constraint, *served_model.tokenizer, *served_model.engine, options.reasoning);

  ResponseMeta meta{new_response_id("chatcmpl-"), unix_time_now(), options.served_model_name};
  OutputFormat format{chat.params.logprobs >= 0, token_text(), options.reasoning, std::move(tools),
                      chat.reasoning_output, chat.params.prompt_logprobs >= 0};
  FanOutRequest answer{meta, "chat.completion", "chat.completion.chunk", chat.params.stream,
                       chat.params.include_usage, chat.params.n, {}, nullptr, nullptr};
  answer.finish_answer = [format](Json& whole, const Generation& first) {
    add_chat_prompt_logprobs(whole, first, format);
  };
  const ContinuousUsage continuous_usage{chat.params.continuous_usage, static_cast<int64_t>(prompt.size())};
  answer.prompts.push_back({std::move(prompt), std::move(request_options)});
  answer.format = [meta, format, include_usage = chat.params.include_usage, continuous_usage](size_t, int64_t index) {
    auto stream = std::make_shared<ChatCompletionStream>(meta, format, include_usage, StreamChoice{index, false},
                                                         continuous_usage);
    return ChoiceFormat{[stream] { return stream->begin(); },
                        [stream](const runtime::StreamOutput& output) { return stream->next(output); },
                        [format, index](const Generation& generation) {
                          return chat_answer_choice(index, generation, format);
                        }};
  };
  answer_choices(std::move(answer), *served_model.engine, responder, admission, options.log_requests);
}

void OpenAIServer::Impl::completions(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder,
                                     const Admission& admission) {
  const ServedModel& served_model = model();
  Json body = parse_json_body(request.body);
  const std::optional<BootstrapFields> bootstrap = bootstrap_fields(body, options.gateway.role);
  CompletionRequest completion = parse_completion_request(body);
  if (bootstrap) refuse_bootstrap_fanout(completion.params.n * static_cast<int64_t>(completion.prompts.size()));
  check_model_name(completion.model);
  ResponseMeta meta{new_response_id("cmpl-"), unix_time_now(), options.served_model_name};
  FanOutRequest answer{meta, "text_completion", "text_completion", completion.params.stream,
                       completion.params.include_usage, completion.params.n, {}, nullptr, nullptr};
  std::optional<runtime::OutputConstraint> constraint;  // compiled once for every prompt of a batch
  if (completion.params.structured_output)
    constraint = constraints.compile(*completion.params.structured_output, *served_model.tokenizer,
                                     *served_model.engine, /*reasoning=*/false);
  // echo: each prompt's text (as given, or its ids decoded) leads the text of its choices, in the
  // first chunk of each streamed choice (as vLLM sends it).
  std::vector<std::string> echoed;
  for (const auto& given : completion.prompts) {
    const auto* text = std::get_if<std::string>(&given);
    std::vector<int32_t> prompt = text ? served_model.tokenizer->encode(*text, completion.add_special_tokens)
                                       : std::get<std::vector<int32_t>>(given);
    runtime::RequestOptions request_options =
        completion.request_options(static_cast<int64_t>(prompt.size()), served_model.engine->max_model_len());
    request_options.constraint = constraint;
    if (bootstrap) request_options.kv_handoff = kv_handoff(*bootstrap, options.gateway.role);
    if (completion.echo) echoed.push_back(text ? *text : served_model.tokenizer->decode(prompt));
    answer.prompts.push_back({std::move(prompt), std::move(request_options)});
  }
  OutputFormat format{completion.params.logprobs >= 0, token_text(), false, {}};
  format.prompt_logprobs = completion.params.prompt_logprobs >= 0;  // in each choice, echoed or not
  std::vector<int64_t> prompt_tokens;  // of each prompt, for continuous usage
  for (const ChoicePrompt& prompt : answer.prompts) prompt_tokens.push_back(static_cast<int64_t>(prompt.tokens.size()));
  answer.format = [meta, format, include_usage = completion.params.include_usage,
                   continuous = completion.params.continuous_usage, prompt_tokens = std::move(prompt_tokens),
                   echoed = std::move(echoed)](size_t prompt_index, int64_t index) {
    auto stream = std::make_shared<CompletionStream>(meta, format, include_usage, StreamChoice{index, false},
                                                     ContinuousUsage{continuous, prompt_tokens[prompt_index]});
    std::string echo = echoed.empty() ? std::string() : echoed[prompt_index];
    auto pending_echo = std::make_shared<std::string>(echo);
    return ChoiceFormat{nullptr,
                        [stream, pending_echo](const runtime::StreamOutput& output) {
                          if (pending_echo->empty()) return stream->next(output);
                          runtime::StreamOutput first = output;
                          first.text = std::exchange(*pending_echo, std::string()) + first.text;
                          return stream->next(first);
                        },
                        [format, index, echo](const Generation& generation) {
                          if (echo.empty()) return completion_answer_choice(index, generation, format);
                          Generation with_prompt = generation;
                          with_prompt.text = echo + with_prompt.text;
                          return completion_answer_choice(index, with_prompt, format);
                        }};
  };
  answer_choices(std::move(answer), *served_model.engine, responder, admission, options.log_requests);
}

void OpenAIServer::Impl::tokenize(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder,
                                  const Admission&) {
  // vLLM's /tokenize: {"prompt": text, "add_special_tokens": true} or {"messages": [...],
  // "add_generation_prompt": true} -> {"count", "max_model_len", "tokens"}.
  const ServedModel& served_model = model();
  Json body = parse_json_body(request.body);
  if (!body.is_object()) throw invalid_request("the body must be a JSON object");
  if (const Json* name = body.find("model"); name && name->is_string()) check_model_name(name->as_string());
  std::vector<int32_t> tokens;
  if (body.contains("messages")) {
    ChatCompletionRequest chat = parse_chat_request(body);
    if (served_model.chat_template == nullptr) throw invalid_request("this model has no chat template", "messages");
    tokens = served_model.tokenizer->encode(render_chat_prompt(*served_model.chat_template, chat), false);
  } else {
    const Json* prompt = body.find("prompt");
    if (prompt == nullptr || !prompt->is_string()) throw invalid_request("'prompt' must be a string", "prompt");
    bool add_special = true;
    if (const Json* flag = body.find("add_special_tokens")) {
      if (!flag->is_bool()) throw invalid_request("'add_special_tokens' must be a boolean", "add_special_tokens");
      add_special = flag->as_bool();
    }
    tokens = served_model.tokenizer->encode(prompt->as_string(), add_special);
  }
  Json out;
  out["count"] = static_cast<int64_t>(tokens.size());
  out["max_model_len"] = served_model.engine->max_model_len();
  out["tokens"] = Json::array();
  for (int32_t id : tokens) out["tokens"].push_back(id);
  respond_json(*responder, 200, out);
}

void OpenAIServer::Impl::detokenize(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder,
                                    const Admission&) {
  const ServedModel& served_model = model();
  Json body = parse_json_body(request.body);
  const Json* tokens = body.is_object() ? body.find("tokens") : nullptr;
  if (tokens == nullptr || !tokens->is_array()) throw invalid_request("'tokens' must be a list of token ids", "tokens");
  std::vector<int32_t> ids;
  int32_t vocab = served_model.tokenizer->vocab_size();
  for (const Json& id : tokens->as_array()) {
    if (!id.is_int() || id.as_int() < 0 || id.as_int() >= vocab)
      throw invalid_request(str_cat("'tokens' must hold ids in [0, ", vocab, ")"), "tokens");
    ids.push_back(static_cast<int32_t>(id.as_int()));
  }
  Json out;
  out["prompt"] = served_model.tokenizer->decode(ids);
  respond_json(*responder, 200, out);
}

// The served model as /v1/models lists it and /v1/models/{id} answers it.
Json OpenAIServer::Impl::model_card() const {
  const ServedModel& served_model = model();
  Json entry;
  entry["id"] = options.served_model_name;
  entry["object"] = "model";
  entry["created"] = unix_time_now();
  entry["owned_by"] = "dsinfer";
  entry["root"] = options.served_model_name;
  entry["parent"] = nullptr;
  entry["max_model_len"] = served_model.engine->max_model_len();
  return entry;
}

void OpenAIServer::Impl::models(HttpResponder& responder) {
  Json out;
  out["object"] = "list";
  out["data"] = Json::array();
  out["data"].push_back(model_card());
  respond_json(responder, 200, out);
}

// The id is the rest of the path, so a served name with slashes (the default: the --model path)
// is found whether the client escapes them or not.
void OpenAIServer::Impl::model_by_id(std::string_view escaped_id, HttpResponder& responder) {
  Json card = model_card();  // 503 while loading, as /v1/models
  std::optional<std::string> id = percent_decoded(escaped_id);
  if (!id || *id != options.served_model_name) throw model_not_found(id ? *id : escaped_id);
  respond_json(responder, 200, card);
}

void OpenAIServer::Impl::version(HttpResponder& responder) {
  Json out;
  out["version"] = options.version;
  out["commit"] = options.commit;
  respond_json(responder, 200, out);
}

void OpenAIServer::Impl::metrics(HttpResponder& responder) {
  const ServedModel& served_model = model();
  std::vector<ExtraGauge> extra = {
      {"dsinfer:open_connections", "HTTP connections open now.", static_cast<double>(http->open_connections())}};
  runtime::Engine& engine = *served_model.engine;
  const runtime::EngineStats stats = engine.stats();
  std::string text =
      format_prometheus(engine.metrics(), stats, options.served_model_name, extra, engine.config().speculative,
                        engine.config().disaggregation.mode);
  text += format_cache_config_info(
      {model::kPageSize, stats.total_pages, engine.config().enable_prefix_caching, options.kv_cache_dtype},
      options.served_model_name);
  if (std::optional<ProcessStats> process = read_process_stats()) text += format_process_metrics(*process);
  responder.respond(200, "text/plain; version=0.0.4; charset=utf-8", std::move(text));
}

OpenAIServer::OpenAIServer(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl* impl = impl_.get();
  impl_->http = std::make_unique<HttpServer>(
      impl_->options.http,
      [impl](const HttpRequest& request, std::shared_ptr<HttpResponder> responder) { impl->handle(request, responder); });
}

OpenAIServer::~OpenAIServer() { stop(); }

void OpenAIServer::start() { impl_->http->start(); }

void OpenAIServer::attach(ServedModel model) {
  DSINFER_CHECK(model.engine && model.tokenizer, "a served model needs an engine and a tokenizer");
  impl_->served = model;
  impl_->ready.store(true);
}

bool OpenAIServer::drain(std::chrono::milliseconds timeout) {
  using Clock = InFlightRequests::Clock;
  InFlightRequests& requests = impl_->requests;
  requests.begin_draining();
  if (const size_t running = requests.count(); running > 0)
    log_info("draining: waiting up to ", timeout.count(), " ms for ", running, " requests to finish");
  if (requests.wait_until_idle(Clock::now() + timeout)) return true;
  log_warning("draining: ", requests.count(), " requests still running after ", timeout.count(),
              " ms; ending them with an error");
  requests.cut_short_all();
  if (!requests.wait_until_idle(Clock::now() + kCutShortGrace))
    log_warning("draining: ", requests.count(), " requests did not end within ",
                std::chrono::duration_cast<std::chrono::seconds>(kCutShortGrace).count(), " s of being cut short");
  return false;
}

void OpenAIServer::stop() {
  if (!impl_) return;
  if (impl_->http) impl_->http->stop();
  // The request threads use the engine, which the caller destroys after this.
  impl_->workers.stop();
}

uint16_t OpenAIServer::port() const { return impl_->http->port(); }
size_t OpenAIServer::open_connections() const { return impl_->http->open_connections(); }

}  // namespace dsinfer::server
