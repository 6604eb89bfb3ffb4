"""What the SDK tests share: the server run_sdk_tests.py started, clients for it, and checks.

The tests run against the bundled model (models/dsv3-tiny), which was never trained on tools or
JSON: they check what the server guarantees whatever the model writes (forced tool calls and
json_schema output are valid because the grammar allows nothing else), never what a good model
would answer. Every sampled request takes a seed, so a run is repeatable.
"""

import json
import os
import urllib.request

import jsonschema
import openai


def _setting(name):
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run these tests through tests/sdk/run_sdk_tests.py "
                           "(ctest -R sdk_test), which starts the server")
    return value


BASE_URL = _setting("DSINFER_SDK_BASE_URL")
API_KEY = _setting("DSINFER_SDK_API_KEY")
MODEL = _setting("DSINFER_SDK_MODEL")

# Enough for a forced call of the tools below whatever the model writes: every schema bounds its
# values (strings by pattern, numbers by range), and the server's JSON grammars allow at most 16
# blanks in a row, which the untrained model fills: one call takes 60-180 tokens, at most ~300.
TOOL_CALL_MAX_TOKENS = 400


def client(api_key=API_KEY):
    # No retries: a failure must show at once, with the server's own answer.
    return openai.OpenAI(base_url=BASE_URL + "/v1", api_key=api_key, max_retries=0, timeout=60)


def tokenize(text):
    """Token ids of `text` without the BOS token, from the server's /tokenize (not part of the SDK)."""
    body = json.dumps({"model": MODEL, "prompt": text, "add_special_tokens": False}).encode()
    request = urllib.request.Request(BASE_URL + "/tokenize", data=body, method="POST",
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)["tokens"]


# Two tools whose schemas bound every value, so that validation checks that the grammar kept to the
# schema, not only to JSON, and so that a forced call has a bounded length. The calculator's string
# is bounded by a pattern, not by maxLength: xgrammar 0.2.8 compiles a maxLength string to a rule
# that lets raw control characters (a tab) in, which is not JSON.
EXPRESSION_PATTERN = r"^[0-9+*/() -]{1,24}$"
CALCULATOR_SCHEMA = {
    "type": "object",
    "properties": {"expression": {"type": "string", "pattern": EXPRESSION_PATTERN,
                                  "description": "an arithmetic expression such as 12 * 34"}},
    "required": ["expression"],
    "additionalProperties": False,
}
ARITHMETIC_SCHEMA = {
    "type": "object",
    "properties": {
        "op": {"type": "string", "enum": ["add", "sub", "mul"]},
        "a": {"type": "integer", "minimum": 0, "maximum": 999},
        "b": {"type": "integer", "minimum": 0, "maximum": 999},
    },
    "required": ["op", "a", "b"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "calculator", "description": "Evaluates an arithmetic expression.",
                                      "parameters": CALCULATOR_SCHEMA}},
    {"type": "function", "function": {"name": "arithmetic", "description": "Applies op to two whole numbers.",
                                      "parameters": ARITHMETIC_SCHEMA}},
]
SCHEMAS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}


def check_tool_arguments(test, name, arguments):
    """The call names one of TOOLS and its arguments are a JSON object valid for that tool's schema."""
    test.assertIn(name, SCHEMAS)
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as error:
        test.fail(f"the arguments of {name} are not JSON ({error}): {arguments!r}")
    try:
        jsonschema.validate(parsed, SCHEMAS[name])
    except jsonschema.ValidationError as error:
        test.fail(f"the arguments of {name} break its schema ({error.message}): {arguments!r}")
    return parsed
