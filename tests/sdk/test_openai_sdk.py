"""The official openai Python SDK (pinned in tools/requirements-sdk.txt) against `dsinfer serve`.

Run through run_sdk_tests.py (ctest -R sdk_test). What each test checks is what a user of the SDK
relies on: the SDK's own types parse our answers, its helpers (stream events, chat.completions.parse)
work, and our errors come back as the SDK's exception classes with OpenAI's body.
"""

import json
import unittest

import jsonschema
import openai
import pydantic

from sdk_server import (ARITHMETIC_SCHEMA, MODEL, TOOL_CALL_MAX_TOKENS, TOOLS, check_tool_arguments, client,
                        tokenize)

USER = [{"role": "user", "content": "What is 12*34? Use a tool."}]


class ChatTest(unittest.TestCase):
    def test_chat_answers_with_the_served_model_and_its_usage(self):
        response = client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "12+34"}],
                                                    max_tokens=12, seed=1)
        self.assertEqual(response.object, "chat.completion")
        self.assertEqual(response.model, MODEL)
        self.assertEqual(len(response.choices), 1)
        choice = response.choices[0]
        self.assertEqual(choice.message.role, "assistant")
        self.assertTrue(choice.message.content)
        self.assertIn(choice.finish_reason, ("stop", "length"))
        self.assertLessEqual(response.usage.completion_tokens, 12)
        self.assertEqual(response.usage.total_tokens, response.usage.prompt_tokens + response.usage.completion_tokens)

    def test_a_stream_gives_the_text_of_the_same_request_unstreamed(self):
        request = dict(model=MODEL, messages=[{"role": "user", "content": "Sort 3 1 2"}], max_tokens=16, seed=7,
                       temperature=1.0)
        whole = client().chat.completions.create(**request)
        text, finish, usage = "", None, None
        for chunk in client().chat.completions.create(**request, stream=True, stream_options={"include_usage": True}):
            self.assertEqual(chunk.object, "chat.completion.chunk")
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
        self.assertEqual(text, whole.choices[0].message.content)
        self.assertEqual(finish, whole.choices[0].finish_reason)
        self.assertIsNotNone(usage, "stream_options.include_usage gave no usage chunk")
        self.assertEqual(usage.completion_tokens, whole.usage.completion_tokens)

    def test_n_2_gives_two_choices_each_drawn_apart(self):
        # Prose, not a task the model was trained on: its samples spread, so two draws differ.
        request = dict(model=MODEL, messages=[{"role": "user", "content": "Tell me a story."}], max_tokens=12, n=2)
        greedy = client().chat.completions.create(**request, temperature=0)
        self.assertEqual([c.index for c in greedy.choices], [0, 1])
        self.assertEqual(greedy.choices[0].message.content, greedy.choices[1].message.content)
        sampled = client().chat.completions.create(**request, temperature=1.0, seed=11)
        self.assertEqual([c.index for c in sampled.choices], [0, 1])
        # With a seed, choice i draws from seed + i: two equal samples would mean one draw copied.
        self.assertNotEqual(sampled.choices[0].message.content, sampled.choices[1].message.content)
        if all(c.finish_reason == "length" for c in sampled.choices):
            self.assertEqual(sampled.usage.completion_tokens, 2 * 12)


class CompletionsTest(unittest.TestCase):
    def test_completion_and_its_stream(self):
        request = dict(model=MODEL, prompt="123+456", max_tokens=10, seed=3, temperature=1.0)
        whole = client().completions.create(**request)
        self.assertEqual(whole.object, "text_completion")
        self.assertEqual(len(whole.choices), 1)
        self.assertTrue(whole.choices[0].text)
        streamed = "".join(chunk.choices[0].text for chunk in client().completions.create(**request, stream=True)
                           if chunk.choices)
        self.assertEqual(streamed, whole.choices[0].text)

    def test_echo_puts_the_prompt_before_the_answer(self):
        request = dict(model=MODEL, prompt="12+34", max_tokens=6, temperature=0)
        plain = client().completions.create(**request).choices[0].text
        echoed = client().completions.create(**request, echo=True).choices[0].text
        self.assertEqual(echoed, "12+34" + plain)
        chunks = [chunk.choices[0].text for chunk in client().completions.create(**request, echo=True, stream=True)
                  if chunk.choices]
        self.assertTrue(chunks[0].startswith("12+34"), chunks[0])
        self.assertEqual("".join(chunks), echoed)

    def test_n_2_on_completions(self):
        response = client().completions.create(model=MODEL, prompt="7*8", max_tokens=6, n=2, temperature=0)
        self.assertEqual([c.index for c in response.choices], [0, 1])
        self.assertEqual(response.choices[0].text, response.choices[1].text)

    def test_prompt_logprobs_through_extra_body_score_every_prompt_token(self):
        # vLLM's spelling: the SDK passes it through extra_body and keeps the unknown field on the choice.
        prompt = "12+34"
        ids = tokenize(prompt)
        response = client().completions.create(model=MODEL, prompt=prompt, max_tokens=2, temperature=0,
                                               extra_body={"prompt_logprobs": 1})
        rows = response.choices[0].model_extra["prompt_logprobs"]
        self.assertGreaterEqual(len(rows), len(ids))
        self.assertIsNone(rows[0])  # the first token has no context
        for row in rows[1:]:
            self.assertTrue(1 <= len(row) <= 2, row)  # the prompt's token, and the top 1 when it differs
            for entry in row.values():
                self.assertLessEqual(entry["logprob"], 0.0)
                self.assertGreaterEqual(entry["rank"], 1)
        with self.assertRaises(openai.BadRequestError) as raised:
            client().completions.create(model=MODEL, prompt=prompt, max_tokens=2, stream=True,
                                        extra_body={"prompt_logprobs": 1}).close()
        self.assertEqual(raised.exception.body["param"], "prompt_logprobs")

    def test_logit_bias_of_100_forces_a_token(self):
        [token] = tokenize("R")
        response = client().completions.create(model=MODEL, prompt="12+34", max_tokens=4, seed=0, temperature=1.0,
                                               logit_bias={str(token): 100})
        self.assertEqual(response.choices[0].text, "RRRR")

    def test_logit_bias_of_minus_100_bans_the_greedy_token(self):
        request = dict(model=MODEL, prompt="The", max_tokens=1, temperature=0, logprobs=2)
        top = client().completions.create(**request).choices[0].logprobs.top_logprobs[0]
        first, second = sorted(top, key=top.get, reverse=True)[:2]
        ids = tokenize(first)
        self.assertEqual(len(ids), 1, f"the greedy token {first!r} does not tokenize back to one id: pick a prompt")
        banned = client().completions.create(**request, logit_bias={str(ids[0]): -100}).choices[0]
        self.assertEqual(banned.text, second, "with the greedy token banned, the runner-up must win")


class ToolsTest(unittest.TestCase):
    def request(self, tool_choice, **extra):
        # "required" lets the model write several calls: parallel_tool_calls false bounds it to one,
        # which then fits the same max_tokens as a named call.
        limit = {"max_tokens": TOOL_CALL_MAX_TOKENS}
        if tool_choice == "required":
            limit["parallel_tool_calls"] = False
        return dict(model=MODEL, messages=USER, tools=TOOLS, tool_choice=tool_choice, seed=0, temperature=1.0,
                    **limit, **extra)

    def test_auto_calls_the_calculator_the_model_was_trained_on(self):
        # The bundled model was taught one tool (tools/tool_training_data.py): asked for a calculation
        # with a calculator offered, it calls it by itself, greedy or not.
        response = client().chat.completions.create(**dict(self.request("auto"), temperature=0.0, max_tokens=200))
        choice = response.choices[0]
        self.assertEqual(choice.finish_reason, "tool_calls", choice.message.content)
        self.assertEqual([call.function.name for call in choice.message.tool_calls], ["calculator"])
        check_tool_arguments(self, "calculator", choice.message.tool_calls[0].function.arguments)
        self.assertIn("12*34", json.loads(choice.message.tool_calls[0].function.arguments)["expression"].replace(" ", ""))

    def test_required_returns_a_call_whose_arguments_fit_its_schema(self):
        choice = client().chat.completions.create(**self.request("required")).choices[0]
        self.assertEqual(choice.finish_reason, "tool_calls")
        self.assertEqual(len(choice.message.tool_calls), 1, "parallel_tool_calls false: one call")
        for call in choice.message.tool_calls:
            self.assertEqual(call.type, "function")
            self.assertTrue(call.id)
            check_tool_arguments(self, call.function.name, call.function.arguments)

    def test_a_named_function_is_the_one_called(self):
        named = {"type": "function", "function": {"name": "arithmetic"}}
        choice = client().chat.completions.create(**self.request(named)).choices[0]
        self.assertEqual(choice.finish_reason, "tool_calls")
        self.assertEqual([call.function.name for call in choice.message.tool_calls], ["arithmetic"])
        check_tool_arguments(self, "arithmetic", choice.message.tool_calls[0].function.arguments)

    def test_a_streamed_forced_call_assembles_into_valid_arguments(self):
        named = {"type": "function", "function": {"name": "calculator"}}
        calls, finish = {}, None
        for chunk in client().chat.completions.create(**self.request(named), stream=True):
            for choice in chunk.choices:
                finish = choice.finish_reason or finish
                for delta in choice.delta.tool_calls or []:
                    call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                    if delta.id:
                        self.assertIsNone(call["id"], "a call's id must come once, in its first delta")
                        call["id"] = delta.id
                    if delta.function and delta.function.name:
                        call["name"] += delta.function.name
                    if delta.function and delta.function.arguments:
                        call["arguments"] += delta.function.arguments
        self.assertEqual(finish, "tool_calls")
        self.assertEqual(list(calls), [0])
        self.assertTrue(calls[0]["id"])
        self.assertEqual(calls[0]["name"], "calculator")
        check_tool_arguments(self, "calculator", calls[0]["arguments"])

    def test_the_tool_result_goes_back_to_the_model(self):
        named = {"type": "function", "function": {"name": "calculator"}}
        message = client().chat.completions.create(**self.request(named)).choices[0].message
        call = message.tool_calls[0]
        history = USER + [
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": call.id, "type": "function",
                             "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
            {"role": "tool", "tool_call_id": call.id, "content": "408"},
        ]
        answer = client().chat.completions.create(model=MODEL, messages=history, tools=TOOLS, max_tokens=200,
                                                  temperature=0.0)
        # The model answers from the tool's output (the calculation after the reasoning).
        self.assertIn("408", answer.choices[0].message.content)
        # The rendered prompt holds the call and its result: it is longer than the question alone.
        question = client().chat.completions.create(model=MODEL, messages=USER, tools=TOOLS, max_tokens=1)
        self.assertGreater(answer.usage.prompt_tokens, question.usage.prompt_tokens)

    def test_naming_a_function_that_is_not_offered_is_a_400(self):
        named = {"type": "function", "function": {"name": "weather"}}
        with self.assertRaises(openai.BadRequestError) as raised:
            client().chat.completions.create(**self.request(named))
        self.assertEqual(raised.exception.status_code, 400)
        self.assertIn("weather", raised.exception.body["message"])


class Sum(pydantic.BaseModel):
    a: int = pydantic.Field(ge=0, le=999)
    b: int = pydantic.Field(ge=0, le=999)


class StructuredOutputTest(unittest.TestCase):
    def test_json_schema_output_parses_and_validates(self):
        response_format = {"type": "json_schema",
                           "json_schema": {"name": "arithmetic", "schema": ARITHMETIC_SCHEMA, "strict": True}}
        response = client().chat.completions.create(model=MODEL, messages=USER, response_format=response_format,
                                                    max_tokens=TOOL_CALL_MAX_TOKENS, seed=0, temperature=1.0)
        self.assertEqual(response.choices[0].finish_reason, "stop")
        jsonschema.validate(json.loads(response.choices[0].message.content), ARITHMETIC_SCHEMA)

    def test_the_sdks_parse_helper_gets_its_pydantic_object(self):
        completion = client().chat.completions.parse(model=MODEL, messages=[{"role": "user", "content": "Add 12, 34"}],
                                                     response_format=Sum, max_tokens=TOOL_CALL_MAX_TOKENS, seed=1,
                                                     temperature=1.0)
        parsed = completion.choices[0].message.parsed
        self.assertIsInstance(parsed, Sum)
        self.assertTrue(0 <= parsed.a <= 999 and 0 <= parsed.b <= 999)

    def test_json_object_output_is_an_object(self):
        response = client().chat.completions.create(model=MODEL, messages=USER, response_format={"type": "json_object"},
                                                    max_tokens=TOOL_CALL_MAX_TOKENS, seed=2, temperature=1.0)
        choice = response.choices[0]
        if choice.finish_reason == "stop":  # json_object bounds nothing: the object may run past max_tokens
            self.assertIsInstance(json.loads(choice.message.content), dict)
        else:
            self.assertTrue(choice.message.content.lstrip().startswith("{"), choice.message.content)

    def test_a_schema_that_does_not_compile_is_a_400(self):
        bad = {"type": "json_schema", "json_schema": {"name": "bad", "schema": {"type": "object", "required": 5}}}
        with self.assertRaises(openai.BadRequestError) as raised:
            client().chat.completions.create(model=MODEL, messages=USER, response_format=bad, max_tokens=4)
        self.assertEqual(raised.exception.body["type"], "invalid_request_error")


class ErrorsTest(unittest.TestCase):
    def test_a_wrong_key_raises_authentication_error(self):
        with self.assertRaises(openai.AuthenticationError) as raised:
            client(api_key="sk-wrong").models.list()
        self.assertEqual(raised.exception.status_code, 401)
        self.assertEqual(raised.exception.code, "invalid_api_key")
        self.assertTrue(raised.exception.body["message"])

    def test_a_bad_field_raises_bad_request_error_naming_it(self):
        with self.assertRaises(openai.BadRequestError) as raised:
            client().chat.completions.create(model=MODEL, messages=USER, temperature=3.5, max_tokens=4)
        body = raised.exception.body
        self.assertEqual(body["type"], "invalid_request_error")
        self.assertEqual(body["param"], "temperature")
        self.assertIn("temperature", body["message"])

    def test_refusals_are_400s_with_the_field(self):
        cases = [
            (dict(echo=True, logprobs=1), "echo"),                 # needs the prompt's logprobs
            (dict(logit_bias={"99999999": 5}), "logit_bias"),      # outside the vocabulary
            (dict(logit_bias={"65": 250}), "logit_bias"),          # outside [-100, 100]
            (dict(n=0), "n"),
        ]
        for fields, param in cases:
            with self.subTest(param=param, fields=fields):
                with self.assertRaises(openai.BadRequestError) as raised:
                    client().completions.create(model=MODEL, prompt="12+34", max_tokens=4, **fields)
                self.assertEqual(raised.exception.body["param"], param)

    def test_an_unknown_model_raises_not_found_error(self):
        with self.assertRaises(openai.NotFoundError) as raised:
            client().chat.completions.create(model="no-such-model", messages=USER, max_tokens=4)
        self.assertEqual(raised.exception.code, "model_not_found")

    def test_models_list_and_retrieve(self):
        self.assertEqual([model.id for model in client().models.list()], [MODEL])
        self.assertEqual(client().models.retrieve(MODEL).id, MODEL)


if __name__ == "__main__":
    unittest.main()
