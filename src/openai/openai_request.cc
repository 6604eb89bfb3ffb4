#include "openai/openai_request.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.h"
#include "openai/openai_errors.h"
#include "openai/openai_fields.h"
#include "openai/openai_messages.h"
#include "openai/openai_tools.h"

namespace dsinfer::server {
namespace {

constexpr int64_t kMaxLogprobs = 20;  // OpenAI's top_logprobs limit, and vLLM's default max_logprobs

bool is_int32_id(int64_t value) { return value >= 0 && value <= std::numeric_limits<int32_t>::max(); }

// A number that must lie in [low, high]; NaN and the infinities of overflowing literals fail too.
double number_between(const RequestFields& body, std::string_view key, double low, double high, double fallback) {
  std::optional<double> value = body.number(key);
  if (!value) return fallback;
  if (!(*value >= low && *value <= high))
    body.fail(key, str_cat("must be between ", low, " and ", high, ", got ", *value));
  return *value;
}

// A token budget: unset when absent or null, else at least 1.
std::optional<int64_t> token_count(const RequestFields& body, std::string_view key) {
  std::optional<int64_t> value = body.integer(key);
  if (value && *value < 1) body.fail(key, str_cat("must be at least 1, got ", *value));
  return value;
}

std::vector<std::string> parse_stop(const RequestFields& body) {
  const Json* stop = body.get("stop");
  if (stop == nullptr) return {};
  std::vector<std::string> strings;
  if (stop->is_string()) {
    strings.push_back(stop->as_string());
  } else if (stop->is_array()) {
    for (const Json& item : stop->as_array()) {
      if (!item.is_string())
        body.fail("stop", str_cat("must be a string or a list of strings, got a list holding ",
                                  Json::type_name(item.type())));
      strings.push_back(item.as_string());
    }
  } else {
    body.fail("stop", str_cat("must be a string or a list of strings, got ", Json::type_name(stop->type())));
  }
  for (const std::string& text : strings)
    if (text.empty()) body.fail("stop", "must not contain an empty string");
  return strings;
}

std::vector<int32_t> parse_stop_token_ids(const RequestFields& body) {
  std::vector<int32_t> ids;
  const Json::Array* list = body.array("stop_token_ids");
  if (list == nullptr) return ids;
  for (const Json& item : *list) {
    if (!item.is_int() || !is_int32_id(item.as_int()))
      body.fail("stop_token_ids", str_cat("must be a list of token ids (integers from 0), got ", item.dump()));
    ids.push_back(static_cast<int32_t>(item.as_int()));
  }
  return ids;
}

// n, and best_of, which is accepted only where it changes nothing (best_of == n): above n it would
// rank best_of samples by their cumulative logprob and return the best n, which the engine does not
// do (vLLM's V1 engine dropped it too).
int64_t parse_choice_count(const RequestFields& body) {
  int64_t n = body.integer("n").value_or(1);
  if (n < 1) body.fail("n", str_cat("must be at least 1, got ", n));
  if (n > kMaxChoicesPerPrompt) body.fail("n", str_cat("must be at most ", kMaxChoicesPerPrompt, ", got ", n));
  if (std::optional<int64_t> best_of = body.integer("best_of")) {
    if (*best_of < n) body.fail("best_of", str_cat("must be at least n (", n, "), got ", *best_of));
    if (*best_of > n)
      throw invalid_request(str_cat("best_of > n is not supported (best_of ", *best_of, ", n ", n,
                                    "): it needs the engine to rank samples by their cumulative logprob and "
                                    "return the best n, which it does not do; ask for n samples instead"),
                            "best_of");
  }
  return n;
}

// Fields that would change the answer if ignored, which this server cannot honour yet.
void refuse_unsupported(const RequestFields& body) {
  if (body.boolean("use_beam_search").value_or(false))
    throw invalid_request("use_beam_search is not supported", "use_beam_search");
}

// vLLM's prompt_logprobs, 0 included (the prompt tokens' own logprobs and ranks). Its -1 (the whole
// vocabulary at every prompt position) is past the limit that logprobs has. A stream is refused as
// vLLM refuses it: its chunks have no member for them.
int32_t parse_prompt_logprobs(const RequestFields& body, bool stream) {
  std::optional<int64_t> top = body.integer("prompt_logprobs");
  if (!top) return -1;
  if (*top < 0 || *top > kMaxLogprobs)
    body.fail("prompt_logprobs", str_cat("must be between 0 and ", kMaxLogprobs, ", got ", *top));
  if (stream)
    throw invalid_request("prompt_logprobs is not available with stream: true (nor in vLLM): ask for a whole "
                          "answer, or leave prompt_logprobs out",
                          "prompt_logprobs");
  return static_cast<int32_t>(*top);
}

// The fields both endpoints share. max_tokens and logprobs differ between them and are read by each.
GenerationParams parse_common(const RequestFields& body) {
  refuse_unsupported(body);
  GenerationParams params;
  params.structured_output = parse_structured_output(body);  // issue 12: openai_structured.h
  params.logit_bias = parse_logit_bias(body);
  params.n = parse_choice_count(body);
  params.temperature = number_between(body, "temperature", 0.0, 2.0, params.temperature);
  if (std::optional<double> top_p = body.number("top_p")) {
    if (!(*top_p > 0.0 && *top_p <= 1.0)) body.fail("top_p", str_cat("must be in (0, 1], got ", *top_p));
    params.top_p = *top_p;
  }
  if (std::optional<int64_t> top_k = body.integer("top_k")) {
    if (*top_k < -1) body.fail("top_k", str_cat("must be -1 or 0 (off) or at least 1, got ", *top_k));
    // Past the vocabulary, top-k keeps every token: clamping changes nothing.
    params.top_k = static_cast<int32_t>(std::min<int64_t>(std::max<int64_t>(*top_k, 0),
                                                          std::numeric_limits<int32_t>::max()));
  }
  params.min_p = number_between(body, "min_p", 0.0, 1.0, params.min_p);
  if (std::optional<int64_t> seed = body.integer("seed")) params.seed = static_cast<uint64_t>(*seed);
  params.presence_penalty = number_between(body, "presence_penalty", -2.0, 2.0, params.presence_penalty);
  params.frequency_penalty = number_between(body, "frequency_penalty", -2.0, 2.0, params.frequency_penalty);
  if (std::optional<double> penalty = body.number("repetition_penalty")) {
    if (!(*penalty > 0.0 && *penalty <= std::numeric_limits<float>::max()))
      body.fail("repetition_penalty", str_cat("must be greater than 0, got ", *penalty));
    params.repetition_penalty = *penalty;
  }
  params.stop = parse_stop(body);
  params.stop_token_ids = parse_stop_token_ids(body);
  params.ignore_eos = body.boolean("ignore_eos").value_or(false);
  params.include_stop_str_in_output = body.boolean("include_stop_str_in_output").value_or(false);
  params.skip_special_tokens = body.boolean("skip_special_tokens").value_or(true);
  if (std::optional<int64_t> min_tokens = body.integer("min_tokens")) {
    if (*min_tokens < 0) body.fail("min_tokens", str_cat("must be at least 0, got ", *min_tokens));
    params.min_tokens = *min_tokens;
  }
  params.stream = body.boolean("stream").value_or(false);
  if (const Json* options = body.object("stream_options")) {
    if (!params.stream) throw invalid_request("stream_options is only allowed when stream is true", "stream_options");
    RequestFields stream_options(*options, "stream_options");
    params.include_usage = stream_options.boolean("include_usage").value_or(false);
    params.continuous_usage =
        params.include_usage && stream_options.boolean("continuous_usage_stats").value_or(false);
  }
  params.prompt_logprobs = parse_prompt_logprobs(body, params.stream);
  return params;
}

void check_min_tokens(const RequestFields& body, const GenerationParams& params) {
  if (params.max_tokens && params.min_tokens > *params.max_tokens)
    body.fail("min_tokens", str_cat("must be at most max_tokens (", *params.max_tokens, "), got ",
                                    params.min_tokens));
}

runtime::RequestOptions to_request_options(const GenerationParams& params, int64_t prompt_tokens,
                                           int64_t max_model_len, std::string_view prompt_field) {
  if (prompt_tokens >= max_model_len)
    throw invalid_request(str_cat("This model's maximum context length is ", max_model_len,
                                  " tokens. However, your request has ", prompt_tokens,
                                  " input tokens. Please reduce the length of the input ", prompt_field, "."),
                          std::string(prompt_field));
  int64_t room = max_model_len - prompt_tokens;
  if (params.max_tokens && *params.max_tokens > room) {
    // Both terms are at most INT64_MAX, so their sum fits in uint64.
    uint64_t requested = static_cast<uint64_t>(prompt_tokens) + static_cast<uint64_t>(*params.max_tokens);
    throw invalid_request(str_cat("This model's maximum context length is ", max_model_len,
                                  " tokens. However, you requested ", requested, " tokens (", prompt_tokens,
                                  " in the ", prompt_field, ", ", *params.max_tokens,
                                  " in the completion). Please reduce the length of the ", prompt_field,
                                  " or completion."),
                          "max_tokens");
  }
  runtime::RequestOptions options;
  options.sampling.temperature = static_cast<float>(params.temperature);
  options.sampling.top_p = static_cast<float>(params.top_p);
  options.sampling.top_k = params.top_k;
  options.sampling.min_p = static_cast<float>(params.min_p);
  options.sampling.seed = params.seed;
  options.sampling.repetition_penalty = static_cast<float>(params.repetition_penalty);
  options.sampling.frequency_penalty = static_cast<float>(params.frequency_penalty);
  options.sampling.presence_penalty = static_cast<float>(params.presence_penalty);
  options.max_tokens = params.max_tokens.value_or(room);
  options.min_tokens = params.min_tokens;
  options.stop = params.stop;
  options.stop_token_ids = params.stop_token_ids;
  options.ignore_eos = params.ignore_eos;
  options.include_stop_str_in_output = params.include_stop_str_in_output;
  options.logprobs = params.logprobs;
  options.prompt_logprobs = params.prompt_logprobs;
  options.skip_special_tokens = params.skip_special_tokens;
  options.logit_bias = params.logit_bias;  // the constraint is compiled by the server (constraint_compiler.h)
  return options;
}

std::vector<int32_t> token_ids(const Json::Array& items, std::string_view path) {
  std::vector<int32_t> ids;
  ids.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_int() || !is_int32_id(items[i].as_int()))
      fail_field(str_cat(path, "[", i, "]"), str_cat("must be a token id (an integer from 0), got ", items[i].dump()));
    ids.push_back(static_cast<int32_t>(items[i].as_int()));
  }
  return ids;
}

// A string, a list of token ids, or a batch: a list of strings or a list of token-id lists.
std::vector<std::variant<std::string, std::vector<int32_t>>> parse_prompts(const RequestFields& body) {
  const Json* prompt = body.get("prompt");
  if (prompt == nullptr) body.fail("prompt", "is required");
  constexpr std::string_view kShapes =
      "must be a string, a list of token ids, or a list of either (a batch of prompts)";
  if (prompt->is_string()) {
    if (prompt->as_string().empty()) body.fail("prompt", "must not be empty");
    return {prompt->as_string()};
  }
  if (!prompt->is_array()) body.fail("prompt", str_cat(kShapes, ", got ", Json::type_name(prompt->type())));
  const Json::Array& items = prompt->as_array();
  if (items.empty()) body.fail("prompt", "must not be empty");
  auto all = [&](bool (Json::*is)() const) {
    for (const Json& item : items)
      if (!(item.*is)()) return false;
    return true;
  };
  if (all(&Json::is_int)) return {token_ids(items, "prompt")};
  if (!all(&Json::is_string) && !all(&Json::is_array)) body.fail("prompt", kShapes);
  std::vector<std::variant<std::string, std::vector<int32_t>>> prompts;
  prompts.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    std::string path = str_cat("prompt[", i, "]");
    if (items[i].is_string()) {
      if (items[i].as_string().empty()) fail_field(path, "must not be empty");
      prompts.emplace_back(items[i].as_string());
    } else {
      if (items[i].size() == 0) fail_field(path, "must not be empty");
      prompts.emplace_back(token_ids(items[i].as_array(), path));
    }
  }
  return prompts;
}

// continue_final_message's conditions: the answer continues the last message, so that message is
// the assistant's text, and no new assistant turn may open after it (vLLM refuses both flags too).
void check_final_message_continues(const std::vector<ChatMessage>& messages,
                                   std::optional<bool> add_generation_prompt) {
  if (add_generation_prompt.value_or(false))
    throw invalid_request("continue_final_message and add_generation_prompt cannot both be true: the first "
                          "continues the last message, the second opens a new assistant turn after it",
                          "continue_final_message");
  const ChatMessage& last = messages.back();
  const std::string where = str_cat("messages[", messages.size() - 1, "]");
  if (last.role != "assistant")
    throw invalid_request(str_cat("continue_final_message continues the last message, which must be the "
                                  "assistant's; ", where, " has role '", last.role, "'"),
                          "continue_final_message");
  if (!last.tool_calls.is_null())
    throw invalid_request(str_cat("continue_final_message continues the text of the last message; ", where,
                                  " has tool_calls, which cannot be continued"),
                          "continue_final_message");
}

// include_reasoning (vLLM) and separate_reasoning (SGLang), both true by default. They change the
// answer only when the server runs a reasoning parser.
ReasoningOutput parse_reasoning_output(const RequestFields& body) {
  const bool include = body.boolean("include_reasoning").value_or(true);
  const bool separate = body.boolean("separate_reasoning").value_or(true);
  if (!include && !separate)
    throw invalid_request("include_reasoning: false and separate_reasoning: false contradict each other: the first "
                          "drops the reasoning, the second keeps it in content; give one",
                          "separate_reasoning");
  if (!include) return ReasoningOutput::kOmit;
  if (!separate) return ReasoningOutput::kInline;
  return ReasoningOutput::kSeparate;
}

}  // namespace

Json parse_json_body(std::string_view body) {
  try {
    return Json::parse(body);
  } catch (const Error& error) {
    throw invalid_request(str_cat("The request body is not valid JSON: ", error.what()));
  }
}

ChatCompletionRequest parse_chat_request(const Json& json) {
  RequestFields body(json, "");
  ChatCompletionRequest request;
  request.model = body.string("model").value_or("");
  request.messages = parse_messages(body);
  request.params = parse_common(body);
  // max_completion_tokens replaced max_tokens in OpenAI's chat API; the newer name wins.
  std::optional<int64_t> max_tokens = token_count(body, "max_tokens");
  std::optional<int64_t> max_completion_tokens = token_count(body, "max_completion_tokens");
  request.params.max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
  check_min_tokens(body, request.params);
  bool logprobs = body.boolean("logprobs").value_or(false);
  std::optional<int64_t> top_logprobs = body.integer("top_logprobs");
  if (top_logprobs && (*top_logprobs < 0 || *top_logprobs > kMaxLogprobs))
    body.fail("top_logprobs", str_cat("must be between 0 and ", kMaxLogprobs, ", got ", *top_logprobs));
  if (top_logprobs.value_or(0) > 0 && !logprobs)
    throw invalid_request("top_logprobs requires logprobs to be true", "top_logprobs");
  if (logprobs) request.params.logprobs = static_cast<int32_t>(top_logprobs.value_or(0));
  request.tools = parse_tools(body);
  request.tool_choice = parse_tool_choice(body, request.tools);
  request.tool_choice_function = tool_choice_function(body);
  request.parallel_tool_calls = body.boolean("parallel_tool_calls").value_or(true);
  // The parser must see the call markers, which a tokenizer may count as special tokens (the
  // test fixtures' does): when calls are parsed they stay in the text unless the client says.
  if (request.tool_choice != ToolChoice::kNone && !request.tools.is_null() && !body.get("skip_special_tokens"))
    request.params.skip_special_tokens = false;
  if (const Json* kwargs = body.object("chat_template_kwargs")) request.chat_template_kwargs = *kwargs;
  request.continue_final_message = body.boolean("continue_final_message").value_or(false);
  std::optional<bool> add_generation_prompt = body.boolean("add_generation_prompt");
  if (request.continue_final_message) check_final_message_continues(request.messages, add_generation_prompt);
  request.add_generation_prompt = add_generation_prompt.value_or(!request.continue_final_message);
  request.reasoning_output = parse_reasoning_output(body);
  return request;
}

Json ChatCompletionRequest::template_messages() const { return messages_to_json(messages); }

Json ChatCompletionRequest::template_context() const {
  Json context = Json::object();
  if (!tools.is_null()) context["tools"] = tools;
  if (chat_template_kwargs.is_object())
    for (const auto& [name, value] : chat_template_kwargs.as_object()) context[name] = value;
  return context;
}

runtime::RequestOptions ChatCompletionRequest::request_options(int64_t prompt_tokens, int64_t max_model_len) const {
  return to_request_options(params, prompt_tokens, max_model_len, "messages");
}

CompletionRequest parse_completion_request(const Json& json) {
  RequestFields body(json, "");
  CompletionRequest request;
  request.model = body.string("model").value_or("");
  request.prompts = parse_prompts(body);
  request.params = parse_common(body);
  if (const auto choices = static_cast<int64_t>(request.prompts.size()) * request.params.n;
      choices > kMaxChoicesPerRequest)
    throw invalid_request(str_cat("this request asks for ", choices, " choices (", request.prompts.size(),
                                  " prompts, n = ", request.params.n, "), more than the ", kMaxChoicesPerRequest,
                                  " one request may ask for; split the batch"),
                          "prompt");
  // Absent means OpenAI's default of 16; an explicit null means "to the end of the context" (vLLM).
  request.params.max_tokens = json.contains("max_tokens") ? token_count(body, "max_tokens") : 16;
  check_min_tokens(body, request.params);
  if (std::optional<int64_t> logprobs = body.integer("logprobs")) {
    if (*logprobs < 0 || *logprobs > kMaxLogprobs)
      body.fail("logprobs", str_cat("must be between 0 and ", kMaxLogprobs, ", got ", *logprobs));
    request.params.logprobs = static_cast<int32_t>(*logprobs);
  }
  request.echo = body.boolean("echo").value_or(false);
  // Echoed text with logprobs would need entries for the prompt's tokens in `logprobs`, which the
  // answers do not make; prompt_logprobs gives those logprobs in vLLM's own member.
  if (request.echo && request.params.logprobs >= 0)
    throw invalid_request("echo with logprobs is not supported yet (the echoed prompt's tokens would need "
                          "entries in logprobs); prompt_logprobs gives the prompt's logprobs",
                          "echo");
  if (body.string("suffix").value_or("") != "") throw invalid_request("suffix is not supported", "suffix");
  request.add_special_tokens = body.boolean("add_special_tokens").value_or(true);
  return request;
}

runtime::RequestOptions CompletionRequest::request_options(int64_t prompt_tokens, int64_t max_model_len) const {
  return to_request_options(params, prompt_tokens, max_model_len, "prompt");
}

}  // namespace dsinfer::server
