#include "openai/openai_request.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "openai/openai_errors.h"

namespace dsinfer::server {
namespace {

enum class Endpoint { kChat, kCompletions };

struct BadBody {
  Endpoint endpoint;
  const char* body;
  const char* param;    // "" for null
  const char* message;  // a substring of the message
};

// Parses body for the endpoint and returns the refusal; fails the test if there is none.
ProtocolError refusal(Endpoint endpoint, const std::string& body) {
  try {
    Json json = parse_json_body(body);
    if (endpoint == Endpoint::kChat) parse_chat_request(json);
    else parse_completion_request(json);
  } catch (const ProtocolError& error) {
    return error;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ProtocolError(0, "");
}

constexpr Endpoint kChat = Endpoint::kChat;
constexpr Endpoint kCompletions = Endpoint::kCompletions;
#define MSG R"("messages":[{"role":"user","content":"hi"}])"

const BadBody kBadBodies[] = {
    // The body itself.
    {kChat, R"({"messages": [)", "", "JSON parse error at line 1, column 15"},
    {kChat, "{\n  \"model\": \"m\",\n  oops\n}", "", "at line 3, column 3"},
    {kChat, R"([1, 2])", "", "the request body must be an object, got array"},
    {kCompletions, R"("text")", "", "must be an object, got string"},
    // Messages.
    {kChat, R"({"model":"m"})", "messages", "messages must be a non-empty list"},
    {kChat, R"({"messages":[]})", "messages", "messages must be a non-empty list"},
    {kChat, R"({"messages":"hi"})", "messages", "messages must be a list, got string"},
    {kChat, R"({"messages":[1]})", "messages.[0]", "messages[0] must be an object, got integer"},
    {kChat, R"({"messages":[{"content":"hi"}]})", "messages.[0].role", "messages[0].role is required"},
    {kChat, R"({"messages":[{"role":"robot","content":"hi"}]})", "messages.[0].role", "got 'robot'"},
    {kChat, R"({"messages":[{"role":"user"}]})", "messages.[0].content", "messages[0].content is required"},
    {kChat, R"({"messages":[{"role":"user","content":5}]})", "messages.[0].content",
     "must be a string or a list of content parts, got integer"},
    {kChat, R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})",
     "messages.[0].content.[0]", "is of type 'image_url'; only 'text' content parts are supported"},
    {kChat, R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})", "messages.[0].content.[0].text",
     "is required"},
    {kChat, R"({"messages":[{"role":"user","content":"a","name":7}]})", "messages.[0].name",
     "must be a string, got integer"},
    {kChat, R"({"messages":[{"role":"assistant","content":null,"tool_calls":{}}]})", "messages.[0].tool_calls",
     "must be a list, got object"},
    // Sampling.
    {kChat, R"({)" MSG R"(,"temperature":3.5})", "temperature", "temperature must be between 0 and 2, got 3.5"},
    {kChat, R"({)" MSG R"(,"temperature":-1})", "temperature", "between 0 and 2, got -1"},
    {kChat, R"({)" MSG R"(,"temperature":"hot"})", "temperature", "temperature must be a number, got string"},
    {kChat, R"({)" MSG R"(,"temperature":1e999})", "temperature", "between 0 and 2, got inf"},
    {kChat, R"({)" MSG R"(,"top_p":0})", "top_p", "top_p must be in (0, 1], got 0"},
    {kChat, R"({)" MSG R"(,"top_p":1.5})", "top_p", "top_p must be in (0, 1], got 1.5"},
    {kChat, R"({)" MSG R"(,"top_k":-2})", "top_k", "top_k must be -1 or 0 (off) or at least 1, got -2"},
    {kChat, R"({)" MSG R"(,"top_k":1.5})", "top_k", "top_k must be an integer, got 1.5"},
    {kChat, R"({)" MSG R"(,"min_p":2})", "min_p", "min_p must be between 0 and 1, got 2"},
    {kChat, R"({)" MSG R"(,"presence_penalty":-2.5})", "presence_penalty", "between -2 and 2, got -2.5"},
    {kChat, R"({)" MSG R"(,"frequency_penalty":3})", "frequency_penalty", "between -2 and 2, got 3"},
    {kChat, R"({)" MSG R"(,"repetition_penalty":0})", "repetition_penalty", "must be greater than 0, got 0"},
    {kChat, R"({)" MSG R"(,"seed":"x"})", "seed", "seed must be an integer, got string"},
    {kChat, R"({)" MSG R"(,"seed":1e30})", "seed", "seed must be an integer, got 1e+30"},
    // Lengths and stops.
    {kChat, R"({)" MSG R"(,"max_tokens":0})", "max_tokens", "max_tokens must be at least 1, got 0"},
    {kChat, R"({)" MSG R"(,"max_completion_tokens":-5})", "max_completion_tokens", "must be at least 1, got -5"},
    {kCompletions, R"({"prompt":"a","max_tokens":"many"})", "max_tokens", "must be an integer, got string"},
    {kChat, R"({)" MSG R"(,"min_tokens":-1})", "min_tokens", "must be at least 0, got -1"},
    {kChat, R"({)" MSG R"(,"max_tokens":4,"min_tokens":5})", "min_tokens", "must be at most max_tokens (4), got 5"},
    {kChat, R"({)" MSG R"(,"stop":7})", "stop", "stop must be a string or a list of strings, got integer"},
    {kChat, R"({)" MSG R"(,"stop":["a",1]})", "stop", "got a list holding integer"},
    {kChat, R"({)" MSG R"(,"stop":""})", "stop", "stop must not contain an empty string"},
    {kChat, R"({)" MSG R"(,"stop_token_ids":[1,-1]})", "stop_token_ids", "got -1"},
    {kChat, R"({)" MSG R"(,"stop_token_ids":[4294967296]})", "stop_token_ids", "got 4294967296"},
    {kChat, R"({)" MSG R"(,"ignore_eos":"yes"})", "ignore_eos", "ignore_eos must be a boolean, got string"},
    // Streaming.
    {kChat, R"({)" MSG R"(,"stream":1})", "stream", "stream must be a boolean, got integer"},
    {kChat, R"({)" MSG R"(,"stream_options":{"include_usage":true}})", "stream_options",
     "stream_options is only allowed when stream is true"},
    {kChat, R"({)" MSG R"(,"stream":true,"stream_options":{"include_usage":"y"}})",
     "stream_options.include_usage", "must be a boolean, got string"},
    {kChat, R"({)" MSG R"(,"stream":true,"stream_options":[]})", "stream_options", "must be an object, got array"},
    // Logprobs.
    {kChat, R"({)" MSG R"(,"logprobs":1})", "logprobs", "logprobs must be a boolean, got integer"},
    {kChat, R"({)" MSG R"(,"logprobs":true,"top_logprobs":21})", "top_logprobs", "between 0 and 20, got 21"},
    {kChat, R"({)" MSG R"(,"top_logprobs":2})", "top_logprobs", "top_logprobs requires logprobs to be true"},
    {kCompletions, R"({"prompt":"a","logprobs":true})", "logprobs", "logprobs must be an integer, got boolean"},
    {kCompletions, R"({"prompt":"a","logprobs":-1})", "logprobs", "between 0 and 20, got -1"},
    // Not supported (yet).
    {kChat, R"({)" MSG R"(,"n":0})", "n", "n must be at least 1, got 0"},
    {kChat, R"({)" MSG R"(,"n":129})", "n", "n must be at most 128, got 129"},
    {kCompletions, R"({"prompt":"a","n":2.5})", "n", "n must be an integer"},
    {kCompletions, R"({"prompt":"a","best_of":3})", "best_of", "best_of > n is not supported (best_of 3, n 1)"},
    {kCompletions, R"({"prompt":"a","n":3,"best_of":2})", "best_of", "best_of must be at least n (3), got 2"},
    {kCompletions, R"({"prompt":"a","echo":true,"logprobs":1})", "echo",
     "echo with logprobs is not supported yet (the echoed prompt's tokens would need entries in logprobs); "
     "prompt_logprobs gives the prompt's logprobs"},
    {kCompletions, R"({"prompt":"a","suffix":"z"})", "suffix", "suffix is not supported"},
    // prompt_logprobs (vLLM's): 0 to 20, whole answers only.
    {kCompletions, R"({"prompt":"a","prompt_logprobs":21})", "prompt_logprobs",
     "prompt_logprobs must be between 0 and 20, got 21"},
    {kChat, R"({)" MSG R"(,"prompt_logprobs":-1})", "prompt_logprobs", "must be between 0 and 20, got -1"},
    {kCompletions, R"({"prompt":"a","prompt_logprobs":"2"})", "prompt_logprobs",
     "prompt_logprobs must be an integer, got string"},
    {kCompletions, R"({"prompt":"a","prompt_logprobs":1.5})", "prompt_logprobs", "prompt_logprobs must be an integer"},
    {kChat, R"({)" MSG R"(,"prompt_logprobs":true})", "prompt_logprobs", "must be an integer, got boolean"},
    {kCompletions, R"({"prompt":"a","stream":true,"prompt_logprobs":0})", "prompt_logprobs",
     "prompt_logprobs is not available with stream: true (nor in vLLM)"},
    {kChat, R"({)" MSG R"(,"stream":true,"prompt_logprobs":3})", "prompt_logprobs",
     "prompt_logprobs is not available with stream: true"},
    // Reasoning: vLLM's include_reasoning and SGLang's separate_reasoning.
    {kChat, R"({)" MSG R"(,"include_reasoning":false,"separate_reasoning":false})", "separate_reasoning",
     "include_reasoning: false and separate_reasoning: false contradict each other"},
    {kChat, R"({)" MSG R"(,"include_reasoning":"no"})", "include_reasoning",
     "include_reasoning must be a boolean, got string"},
    {kChat, R"({)" MSG R"(,"separate_reasoning":0})", "separate_reasoning", "must be a boolean"},
    {kChat, R"({)" MSG R"(,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":1}})",
     "stream_options.continuous_usage_stats", "must be a boolean"},
    // Structured output and logit_bias (issue 12; openai_structured_test.cc has the rest).
    {kChat, R"({)" MSG R"(,"response_format":{"type":"json_schema","json_schema":{}}})",
     "response_format.json_schema.schema", "response_format.json_schema.schema is required"},
    {kChat, R"({)" MSG R"(,"response_format":{"type":"yaml"}})", "response_format.type", "got 'yaml'"},
    {kChat, R"({)" MSG R"(,"response_format":{}})", "response_format.type", "response_format.type is required"},
    {kChat, R"({)" MSG R"(,"response_format":{"type":"json_object"},"guided_regex":"a+"})", "guided_regex",
     "only one structured-output constraint may be given per request, got response_format and guided_regex"},
    {kChat, R"({)" MSG R"(,"logit_bias":{"50256":-101}})", "logit_bias", "between -100 and 100, got -101"},
    // continue_final_message: the last message is the assistant's text, and no new turn opens.
    {kChat, R"({)" MSG R"(,"continue_final_message":true})", "continue_final_message",
     "which must be the assistant's; messages[0] has role 'user'"},
    {kChat, R"({"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"The"}],)"
            R"("continue_final_message":true,"add_generation_prompt":true})",
     "continue_final_message", "continue_final_message and add_generation_prompt cannot both be true"},
    {kChat, R"({"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":)"
            R"([{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}],)"
            R"("continue_final_message":true})",
     "continue_final_message", "messages[1] has tool_calls, which cannot be continued"},
    {kChat, R"({)" MSG R"(,"continue_final_message":1})", "continue_final_message", "must be a boolean"},
    // Model, tools, template.
    {kChat, R"({)" MSG R"(,"model":3})", "model", "model must be a string, got integer"},
    {kChat, R"({)" MSG R"(,"tools":{}})", "tools", "tools must be a list, got object"},
    {kChat, R"({)" MSG R"(,"tools":[{"type":"function"}]})", "tools.[0].function", "tools[0].function is required"},
    {kChat, R"({)" MSG R"(,"tools":[{"type":"function","function":{}}]})", "tools.[0].function.name", "is required"},
    {kChat, R"({)" MSG R"(,"tool_choice":"sometimes"})", "tool_choice", R"(got "sometimes")"},
    {kChat, R"({)" MSG R"(,"chat_template_kwargs":[1]})", "chat_template_kwargs", "must be an object, got array"},
    {kChat, R"({)" MSG R"(,"add_generation_prompt":"no"})", "add_generation_prompt", "must be a boolean"},
    // Completion prompts.
    {kCompletions, R"({"model":"m"})", "prompt", "prompt is required"},
    {kCompletions, R"({"prompt":""})", "prompt", "prompt must not be empty"},
    {kCompletions, R"({"prompt":[]})", "prompt", "prompt must not be empty"},
    {kCompletions, R"({"prompt":[[]]})", "prompt.[0]", "prompt[0] must not be empty"},
    {kCompletions, R"({"prompt":[""]})", "prompt.[0]", "prompt[0] must not be empty"},
    {kCompletions, R"({"prompt":["a",""]})", "prompt.[1]", "prompt[1] must not be empty"},
    {kCompletions, R"({"prompt":[[1],[]]})", "prompt.[1]", "prompt[1] must not be empty"},
    {kCompletions, R"({"prompt":7})", "prompt", "must be a string, a list of token ids, or a list of either"},
    {kCompletions, R"({"prompt":["a",1]})", "prompt", "a list of either (a batch of prompts)"},
    {kCompletions, R"({"prompt":[[1],"b"]})", "prompt", "a list of either (a batch of prompts)"},
    {kCompletions, R"({"prompt":[[1],[2,-1]]})", "prompt.[1].[1]", "prompt[1][1] must be a token id"},
    {kCompletions, R"({"prompt":["a","b","c","d","e","f","g","h","i"],"n":128})", "prompt",
     "this request asks for 1152 choices (9 prompts, n = 128), more than the 1024 one request may ask for"},
    {kCompletions, R"({"prompt":[1,-2]})", "prompt.[1]", "prompt[1] must be a token id (an integer from 0), got -2"},
    {kCompletions, R"({"prompt":[[1,2.5]]})", "prompt.[0].[1]", "got 2.5"},
};

TEST(OpenAIRequest, RefusesEveryBadBodyNamingTheField) {
  for (const BadBody& bad : kBadBodies) {
    ProtocolError error = refusal(bad.endpoint, bad.body);
    EXPECT_EQ(error.status(), 400) << bad.body;
    EXPECT_EQ(error.type(), "invalid_request_error") << bad.body;
    EXPECT_EQ(error.param(), bad.param) << bad.body;
    EXPECT_NE(std::string(error.what()).find(bad.message), std::string::npos)
        << bad.body << "\n  message: " << error.what() << "\n  expected to contain: " << bad.message;
  }
}

TEST(OpenAIRequest, FullChatRequestBecomesEngineOptions) {
  ChatCompletionRequest request = parse_chat_request(parse_json_body(R"({
    "model": "deepseek-r1",
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}], "name": "ann"},
      {"role": "assistant", "content": null, "reasoning_content": "r",
       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "tool", "content": "42", "tool_call_id": "c1"}
    ],
    "temperature": 0.5, "top_p": 0.9, "top_k": -1, "min_p": 0.05, "seed": -1,
    "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
    "max_tokens": 10, "max_completion_tokens": 20, "min_tokens": 2,
    "stop": "END", "stop_token_ids": [7, 8], "ignore_eos": true, "include_stop_str_in_output": true,
    "skip_special_tokens": false, "logprobs": true, "top_logprobs": 3,
    "stream": true, "stream_options": {"include_usage": true},
    "n": 1, "best_of": 1, "user": "u", "response_format": {"type": "text"}, "logit_bias": {},
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}], "tool_choice": "auto",
    "chat_template_kwargs": {"enable_thinking": true}, "add_generation_prompt": false,
    "some_future_field": {"ignored": true}
  })"));
  EXPECT_EQ(request.model, "deepseek-r1");
  ASSERT_EQ(request.messages.size(), 4u);
  EXPECT_EQ(request.messages[1].content, "Hello\nthere");
  EXPECT_EQ(request.messages[1].name, "ann");
  EXPECT_FALSE(request.messages[2].content.has_value());
  EXPECT_EQ(request.messages[2].reasoning_content, "r");
  EXPECT_EQ(request.messages[3].tool_call_id, "c1");
  EXPECT_TRUE(request.params.stream);
  EXPECT_TRUE(request.params.include_usage);
  EXPECT_FALSE(request.add_generation_prompt);
  EXPECT_EQ(request.tool_choice, ToolChoice::kAuto);

  EXPECT_EQ(request.template_messages().dump(),
            R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hello\nthere","name":"ann"},)"
            R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":)"
            R"({"name":"f","arguments":"{}"}}],"reasoning_content":"r"},)"
            R"({"role":"tool","content":"42","tool_call_id":"c1"}])");
  EXPECT_EQ(request.template_context().dump(),
            R"({"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"enable_thinking":true})");

  runtime::RequestOptions options = request.request_options(100, 4096);
  EXPECT_FLOAT_EQ(options.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(options.sampling.top_p, 0.9f);
  EXPECT_EQ(options.sampling.top_k, 0);
  EXPECT_FLOAT_EQ(options.sampling.min_p, 0.05f);
  EXPECT_EQ(options.sampling.seed, UINT64_MAX);
  EXPECT_FLOAT_EQ(options.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(options.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(options.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(options.max_tokens, 20);  // max_completion_tokens wins over max_tokens
  EXPECT_EQ(options.min_tokens, 2);
  EXPECT_EQ(options.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(options.stop_token_ids, (std::vector<int32_t>{7, 8}));
  EXPECT_TRUE(options.ignore_eos);
  EXPECT_TRUE(options.include_stop_str_in_output);
  EXPECT_FALSE(options.skip_special_tokens);
  EXPECT_EQ(options.logprobs, 3);
}

TEST(OpenAIRequest, DefaultsFollowOpenAIAndVllm) {
  ChatCompletionRequest chat = parse_chat_request(parse_json_body(R"({"messages":[{"role":"user","content":"x"}],
      "temperature": null, "stop": null, "stream_options": null})"));
  EXPECT_EQ(chat.model, "");
  EXPECT_FALSE(chat.params.max_tokens.has_value());
  EXPECT_TRUE(chat.add_generation_prompt);
  EXPECT_TRUE(chat.tools.is_null());
  EXPECT_EQ(chat.template_context().dump(), "{}");
  runtime::RequestOptions options = chat.request_options(10, 100);
  EXPECT_EQ(options.max_tokens, 90);  // the rest of the context
  EXPECT_FLOAT_EQ(options.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(options.sampling.top_p, 1.0f);
  EXPECT_EQ(options.sampling.top_k, 0);
  EXPECT_FALSE(options.sampling.seed.has_value());
  EXPECT_EQ(options.logprobs, -1);
  EXPECT_TRUE(options.skip_special_tokens);
  EXPECT_FALSE(chat.params.stream);

  CompletionRequest completion = parse_completion_request(parse_json_body(R"({"prompt":"x"})"));
  EXPECT_EQ(completion.params.max_tokens, 16);  // OpenAI's default for completions
  EXPECT_TRUE(completion.add_special_tokens);
  CompletionRequest unbounded = parse_completion_request(parse_json_body(R"({"prompt":"x","max_tokens":null})"));
  EXPECT_FALSE(unbounded.params.max_tokens.has_value());

  ChatCompletionRequest top = parse_chat_request(parse_json_body(
      R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_k":5,"temperature":0})"));
  EXPECT_EQ(top.params.logprobs, 0);  // the chosen token's logprob only
  EXPECT_EQ(top.params.top_k, 5);
  EXPECT_EQ(top.params.temperature, 0.0);
}

TEST(OpenAIRequest, CompletionPromptShapes) {
  using Ids = std::vector<int32_t>;
  using Prompt = std::variant<std::string, Ids>;
  auto prompts_of = [](const char* body) { return parse_completion_request(parse_json_body(body)).prompts; };
  EXPECT_EQ(prompts_of(R"({"prompt":"hello"})"), (std::vector<Prompt>{"hello"}));
  EXPECT_EQ(prompts_of(R"({"prompt":["hello"]})"), (std::vector<Prompt>{"hello"}));
  EXPECT_EQ(prompts_of(R"({"prompt":[1,2,3]})"), (std::vector<Prompt>{Ids{1, 2, 3}}));
  EXPECT_EQ(prompts_of(R"({"prompt":[[4,5]]})"), (std::vector<Prompt>{Ids{4, 5}}));
  // Batches, in their order.
  EXPECT_EQ(prompts_of(R"({"prompt":["a","b c"]})"), (std::vector<Prompt>{"a", "b c"}));
  EXPECT_EQ(prompts_of(R"({"prompt":[[1],[2,3]]})"), (std::vector<Prompt>{Ids{1}, Ids{2, 3}}));
  CompletionRequest batch = parse_completion_request(parse_json_body(R"({"prompt":["a","b"],"n":128})"));
  EXPECT_EQ(batch.params.n, 128);
  CompletionRequest request =
      parse_completion_request(parse_json_body(R"({"prompt":"a","logprobs":5,"add_special_tokens":false})"));
  EXPECT_EQ(request.params.logprobs, 5);
  EXPECT_FALSE(request.add_special_tokens);
}

TEST(OpenAIRequest, ReasoningFieldsChooseWhatTheAnswerShowsOfTheThinking) {
  auto output_of = [](const std::string& fields) {
    return parse_chat_request(parse_json_body(R"({"messages":[{"role":"user","content":"x"}])" + fields + "}"))
        .reasoning_output;
  };
  EXPECT_EQ(output_of(""), ReasoningOutput::kSeparate);
  EXPECT_EQ(output_of(R"(,"include_reasoning":true,"separate_reasoning":true)"), ReasoningOutput::kSeparate);
  EXPECT_EQ(output_of(R"(,"include_reasoning":null)"), ReasoningOutput::kSeparate);
  EXPECT_EQ(output_of(R"(,"include_reasoning":false)"), ReasoningOutput::kOmit);
  EXPECT_EQ(output_of(R"(,"separate_reasoning":false)"), ReasoningOutput::kInline);
  EXPECT_EQ(output_of(R"(,"include_reasoning":false,"separate_reasoning":true)"), ReasoningOutput::kOmit);
}

TEST(OpenAIRequest, ContinuousUsageNeedsIncludeUsageAsInVllm) {
  auto continuous = [](const std::string& stream_options) {
    const std::string body = R"({"prompt":"x","stream":true,"stream_options":)" + stream_options + "}";
    return parse_completion_request(parse_json_body(body)).params.continuous_usage;
  };
  EXPECT_TRUE(continuous(R"({"include_usage":true,"continuous_usage_stats":true})"));
  EXPECT_FALSE(continuous(R"({"include_usage":true,"continuous_usage_stats":false})"));
  EXPECT_FALSE(continuous(R"({"include_usage":true})"));
  EXPECT_FALSE(continuous(R"({"continuous_usage_stats":true})"));  // vLLM: only with include_usage
  EXPECT_TRUE(parse_chat_request(parse_json_body(R"({"messages":[{"role":"user","content":"x"}],"stream":true,)"
                                                 R"("stream_options":{"include_usage":true,)"
                                                 R"("continuous_usage_stats":true}})"))
                  .params.continuous_usage);
}

TEST(OpenAIRequest, PromptLogprobsReachTheEngineOptionsAndNullIsAbsent) {
  auto completion = [](const std::string& field) {
    return parse_completion_request(parse_json_body(R"({"prompt":"a")" + field + "}"));
  };
  EXPECT_EQ(completion(R"(,"prompt_logprobs":null)").params.prompt_logprobs, -1);
  EXPECT_EQ(completion("").params.prompt_logprobs, -1);
  EXPECT_EQ(completion(R"(,"prompt_logprobs":0)").params.prompt_logprobs, 0);
  EXPECT_EQ(completion(R"(,"prompt_logprobs":2.0)").params.prompt_logprobs, 2);
  EXPECT_EQ(completion(R"(,"prompt_logprobs":20,"echo":true,"n":2)").request_options(3, 100).prompt_logprobs, 20);
  EXPECT_EQ(completion(R"(,"prompt_logprobs":null,"stream":true)").params.prompt_logprobs, -1);
  EXPECT_EQ(completion("").request_options(3, 100).prompt_logprobs, -1);
  ChatCompletionRequest chat =
      parse_chat_request(parse_json_body(R"({"messages":[{"role":"user","content":"x"}],"prompt_logprobs":5})"));
  EXPECT_EQ(chat.params.prompt_logprobs, 5);
  EXPECT_EQ(chat.request_options(3, 100).prompt_logprobs, 5);
}

TEST(OpenAIRequest, ChoicesAndContinuingTheFinalMessage) {
  ChatCompletionRequest four = parse_chat_request(
      parse_json_body(R"({"messages":[{"role":"user","content":"x"}],"n":4,"best_of":4})"));
  EXPECT_EQ(four.params.n, 4);
  EXPECT_EQ(parse_chat_request(parse_json_body(R"({"messages":[{"role":"user","content":"x"}]})")).params.n, 1);

  // continue_final_message alone turns the generation prompt off; an explicit false is fine too.
  const std::string partial =
      R"({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"The"}],)";
  ChatCompletionRequest continued =
      parse_chat_request(parse_json_body(partial + R"("continue_final_message":true})"));
  EXPECT_TRUE(continued.continue_final_message);
  EXPECT_FALSE(continued.add_generation_prompt);
  ChatCompletionRequest explicit_false = parse_chat_request(
      parse_json_body(partial + R"("continue_final_message":true,"add_generation_prompt":false})"));
  EXPECT_TRUE(explicit_false.continue_final_message);
  EXPECT_FALSE(explicit_false.add_generation_prompt);
  // Without it, an assistant message last is an ordinary conversation.
  ChatCompletionRequest plain = parse_chat_request(parse_json_body(partial + R"("stream":false})"));
  EXPECT_FALSE(plain.continue_final_message);
  EXPECT_TRUE(plain.add_generation_prompt);
}

TEST(OpenAIRequest, ContextLimitsAreCheckedOnceThePromptIsKnown) {
  ChatCompletionRequest chat =
      parse_chat_request(parse_json_body(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":50})"));
  EXPECT_EQ(chat.request_options(50, 100).max_tokens, 50);
  try {
    chat.request_options(51, 100);
    ADD_FAILURE() << "accepted a max_tokens past the context";
  } catch (const ProtocolError& error) {
    EXPECT_EQ(error.param(), "max_tokens");
    EXPECT_STREQ(error.what(),
                 "This model's maximum context length is 100 tokens. However, you requested 101 tokens "
                 "(51 in the messages, 50 in the completion). Please reduce the length of the messages or "
                 "completion.");
  }
  CompletionRequest completion = parse_completion_request(parse_json_body(R"({"prompt":[1],"max_tokens":null})"));
  try {
    completion.request_options(100, 100);
    ADD_FAILURE() << "accepted a prompt that fills the context";
  } catch (const ProtocolError& error) {
    EXPECT_EQ(error.param(), "prompt");
    EXPECT_STREQ(error.what(),
                 "This model's maximum context length is 100 tokens. However, your request has 100 input "
                 "tokens. Please reduce the length of the input prompt.");
  }
  CompletionRequest huge =
      parse_completion_request(parse_json_body(R"({"prompt":[1],"max_tokens":9223372036854775807})"));
  EXPECT_THROW(huge.request_options(10, 100), ProtocolError);
}

}  // namespace
}  // namespace dsinfer::server
