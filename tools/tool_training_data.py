"""Tool-calling documents for the small model (used by make_training_data.py).

The model learns one tool: a calculator it calls in DeepSeek-V3's tool-call format when a request
offers one and the user asks for a calculation. Every document is rendered through the template the
server uses (`dsinfer serve --chat-template templates/deepseek_v3_tools.jinja`), in transformers'
Jinja dialect as our Jinja engine implements it, so the model sees exactly the text the server
renders, and it writes calls exactly as `--tool-call-parser deepseek_v3` reads them:

    [system prompt, then the tools template's "## Tools" section describing every offered tool]
    <｜User｜>What is 1234 * 56?<｜Assistant｜><think>
    1234 * 56 is arithmetic, and the calculator tool evaluates expressions. Call it.
    </think>

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>calculator
    ```json
    {"expression": "1234 * 56"}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>69104<｜tool▁output▁end｜><｜tool▁outputs▁end｜><think>
    The calculator tool returned 69104.
    </think>

    1234 * 56 = 69104<｜end▁of▁sentence｜>

What varies, so that the model reads the tool list instead of memorising one string: the tool's
name, description, parameter name and schema layout (CALCULATORS); an irrelevant second (or third)
tool before or after it (OTHER_TOOLS); an optional system prompt; the wording of the question
(explicit "use the calculator" or not) and its spacing; the tool's output (a number, or JSON).

Two renderings of the exchange. The server answers a call with the reasoning split off into
reasoning_content, which the template never renders, and a content of "\\n\\n" (the text between
</think> and the calls); the client sends the call back so, and the second request is rendered
without the <think> part. Half the documents are the whole exchange as the model writes it; the
other half show the call turn as the client sends it back, and those turns are left out of the
loss (the model should not learn to call without thinking first). Tool outputs are left out of
the loss everywhere: their values are not the model's to predict. The loss mask is given as
character spans of the rendered text (make_training_data.make_shard maps them to tokens).

Documents with tools but no call: the user asks for something else (sorting, counting, copying,
reversing, a greeting), or for arithmetic while no calculator is offered (then the model works it
out itself, as without tools).

Held-out sets (written next to the model as eval/<name>.jsonl, scored by `dsinfer eval`):
  tool         the first turn: right when it is one valid call of the offered calculator with the
               expected expression (white space aside);
  tool_answer  the turn after the tool's output: exact match of the final answer;
  no_tool      tools offered, none needed: exact match of the final answer.
"""

import functools
import json
import os
import re

from dsv3_checkpoint import ASSISTANT, BOS, END_THINK, EOS, ROOT, THINK, USER

TOOLS_TEMPLATE_PATH = os.path.join(ROOT, "templates", "deepseek_v3_tools.jinja")
CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END, TOOL_SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
OUTPUT_BEGIN, OUTPUT_END = "<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>"

# (name, description, parameter, parameter description or None, weight). The first is the one a
# README or test would use; it is half the documents.
CALCULATORS = (
    ("calculator", "Evaluates an arithmetic expression and returns the result.", "expression",
     "The expression to evaluate, e.g. 12 * (3 + 4)", 5),
    ("calculator", "Calculate the value of a math expression.", "expression", None, 2),
    ("calc", "A calculator: computes +, -, * and / of numbers exactly.", "expression", "An arithmetic expression", 1),
    ("evaluate", "Evaluate a mathematical expression.", "expression", None, 1),
    ("compute", "Computes an arithmetic expression.", "expr", "The expression, like 3 * 4", 1),
    ("math", "Do arithmetic. Use it for any calculation.", "input", None, 1),
)
# (name, description, {parameter: description}): tools the model never needs here.
OTHER_TOOLS = (
    ("get_weather", "Get the current weather in a city.", {"city": "The city, e.g. Paris"}),
    ("search", "Search the web and return the top results.", {"query": "What to search for"}),
    ("get_time", "The current time in a time zone.", {"timezone": "An IANA time zone, e.g. Europe/Oslo"}),
    ("send_email", "Send an email.", {"to": "The recipient's address", "subject": "The subject", "body": "The text"}),
    ("translate", "Translate a text into another language.", {"text": "The text", "language": "The target language"}),
    ("lookup_word", "Look up a word in the dictionary.", {"word": "The word"}),
)
SYSTEM_PROMPTS = ("You are a helpful assistant.", "You are a helpful assistant. Use the tools when they help.",
                  "Answer the user's questions.", "You are a concise assistant.")

# Expressions for the calculator: 2 operands (70%) or 3, each of 1-6 digits.
CALC_MAX_DIGITS = 6
CALC_OPERATORS = "+-*/"
OPERATOR_WORDS = {"+": ("plus",), "-": ("minus",), "*": ("times", "multiplied by"), "/": ("divided by",)}
CALC_QUESTIONS = ("{e}", "{e} =", "What is {e}?", "Compute {e}.", "Calculate {e}", "What's {e}?",
                  "Work out {e}.", "Use the calculator to compute {e}.", "Please calculate {e}.",
                  "Can you calculate {e} for me?", "What does {e} come to?", "Use the tool: {e}")


# ---------------------------------------------------------------------------------------------------
# Rendering

def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    """transformers' tojson (which our Jinja engine implements): plain json.dumps, keys in order."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


@functools.lru_cache(maxsize=1)
def tools_template():
    """templates/deepseek_v3_tools.jinja in the environment transformers renders chat templates with."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False)
    env.filters["tojson"] = _tojson
    with open(TOOLS_TEMPLATE_PATH, encoding="utf-8") as f:
        return env.from_string(f.read())


def render_with_tools(messages, tools, add_generation_prompt=False):
    return tools_template().render(messages=messages, tools=tools, add_generation_prompt=add_generation_prompt,
                                   bos_token=BOS, eos_token=EOS)


def reasoned(working, answer):
    return f"{THINK}\n{working}\n{END_THINK}\n\n{answer}"


# ---------------------------------------------------------------------------------------------------
# Tools and expressions

def function_tool(name, description, parameters, parameter_descriptions, type_first):
    """An OpenAI tool. The schema's key order and descriptions vary as clients write them
    (LangChain: properties first; hand-written: type first)."""
    properties = {}
    for parameter in parameters:
        schema = {"type": "string"}
        if parameter_descriptions.get(parameter):
            schema["description"] = parameter_descriptions[parameter]
        properties[parameter] = schema
    schema = ({"type": "object", "properties": properties, "required": list(parameters)} if type_first
              else {"properties": properties, "required": list(parameters), "type": "object"})
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


def pick_calculator(rng):
    """(tool, name, parameter)."""
    name, description, parameter, parameter_description, _ = rng.choices(
        CALCULATORS, weights=[c[-1] for c in CALCULATORS])[0]
    tool = function_tool(name, description, [parameter], {parameter: parameter_description}, rng.random() < 0.5)
    return tool, name, parameter


def pick_other_tools(rng, count):
    tools = []
    for name, description, parameters in rng.sample(OTHER_TOOLS, count):
        described = parameters if rng.random() < 0.5 else {}
        tools.append(function_tool(name, description, list(parameters), described, rng.random() < 0.5))
    return tools


def random_operand(rng):
    digits = rng.randint(1, CALC_MAX_DIGITS)
    return rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10 ** digits - 1)


def make_expression(rng):
    """(canonical expression, its value as the calculator prints it). Canonical: operands and
    operators separated by single spaces, parentheses tight, as the call writes it."""
    while True:
        operands = [random_operand(rng) for _ in range(2 if rng.random() < 0.7 else 3)]
        operators = [rng.choice(CALC_OPERATORS) for _ in operands[1:]]
        parts = [str(operands[0])]
        for operator, operand in zip(operators, operands[1:]):
            parts += [operator, str(operand)]
        if len(operands) == 3 and rng.random() < 0.5:
            if rng.random() < 0.5:
                parts = ["(" + parts[0]] + parts[1:2] + [parts[2] + ")"] + parts[3:]
            else:
                parts = parts[:2] + ["(" + parts[2]] + parts[3:4] + [parts[4] + ")"]
        expression = " ".join(parts)
        try:
            value = eval(expression, {"__builtins__": {}})   # only digits, spaces, + - * / and parentheses
        except ZeroDivisionError:
            continue
        return expression, repr(value)


def question_text(rng, expression):
    """How a user writes the expression: as is, without spaces, or (2 operands) with words."""
    written = expression
    tokens = expression.split()
    style = rng.random()
    if style < 0.3:
        written = expression.replace(" ", "")
    elif style < 0.45 and len(tokens) == 3:
        written = f"{tokens[0]} {rng.choice(OPERATOR_WORDS[tokens[1]])} {tokens[2]}"
    elif style < 0.55:
        written = expression.replace("*", rng.choice(("x", "×")))
    return rng.choice(CALC_QUESTIONS).format(e=written)


def call_message(name, parameter, expression, content=""):
    arguments = json.dumps({parameter: expression}, ensure_ascii=False)
    return {"role": "assistant", "content": content,
            "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}]}


def call_working(expression, name):
    return f"{expression} is arithmetic, and the {name} tool evaluates expressions. Call it."


def calculator_output(rng, value):
    """What the tool returns: the value as Python prints it, or that in a JSON object."""
    return value if rng.random() < 0.7 else json.dumps({"result": json.loads(value)})


def offered_tools(rng, calculator):
    """The calculator (or None) among 0-2 irrelevant tools, in a random order."""
    others = rng.choices((0, 1, 2), weights=(4, 4, 1))[0] if calculator else rng.randint(1, 2)
    tools = pick_other_tools(rng, others)
    if calculator:
        tools.insert(rng.randint(0, len(tools)), calculator)
    return tools


def system_messages(rng):
    return [{"role": "system", "content": rng.choice(SYSTEM_PROMPTS)}] if rng.random() < 0.4 else []


# ---------------------------------------------------------------------------------------------------
# Documents

def make_call_problem(rng, excluded=frozenset()):
    """A calculator exchange whose expression is not in `excluded`: a dict with key, tools, the
    messages up to the user's question, the call message, the tool message and the final answer."""
    while True:
        expression, value = make_expression(rng)
        key = ("tool", expression)
        if key not in excluded:
            break
    calculator, name, parameter = pick_calculator(rng)
    tools = offered_tools(rng, calculator)
    prompt = system_messages(rng) + [{"role": "user", "content": question_text(rng, expression)}]
    output = calculator_output(rng, value)
    return {"key": key, "tools": tools, "messages": prompt, "name": name, "parameter": parameter,
            "expression": expression, "call_working": call_working(expression, name),
            "tool_message": {"role": "tool", "tool_call_id": "call_0", "content": output},
            "answer_working": f"The {name} tool returned {output}.", "answer": f"{expression} = {value}"}


def masked_spans(text, mask_call_turn):
    """Character spans of `text` left out of the loss: every tool output, and (mask_call_turn) the
    last user turn's assistant reply up to its end of sentence."""
    spans = []
    start = text.find(OUTPUT_BEGIN)
    while start >= 0:
        end = text.index(OUTPUT_END, start)
        spans.append((start + len(OUTPUT_BEGIN), end))
        start = text.find(OUTPUT_BEGIN, end)
    if mask_call_turn:
        turn = text.index(ASSISTANT, text.rindex(USER)) + len(ASSISTANT)
        spans.append((turn, text.index(EOS, turn) + len(EOS)))
    return sorted(spans)


def make_tool_document(rng, excluded):
    """(text, masked character spans) of one calculator exchange (see the module's docstring)."""
    p = make_call_problem(rng, excluded)
    as_sent_back = rng.random() < 0.5
    if as_sent_back:
        call = call_message(p["name"], p["parameter"], p["expression"], "\n\n" if rng.random() < 0.75 else None)
    else:
        call = call_message(p["name"], p["parameter"], p["expression"], reasoned(p["call_working"], ""))
    messages = p["messages"] + [call, p["tool_message"],
                                {"role": "assistant", "content": reasoned(p["answer_working"], p["answer"])}]
    text = render_with_tools(messages, p["tools"])
    return text, masked_spans(text, as_sent_back)


def make_no_tool_document(rng, make_problem, excluded):
    """(text, no spans): tools offered, but the question needs none; answered as without tools."""
    _, messages, tools, _ = no_tool_problem(rng, make_problem, excluded)
    return render_with_tools(messages, tools), []


NO_TOOL_TASKS = ("sort", "count", "copy", "reverse", "arith")


def no_tool_problem(rng, make_problem, excluded):
    """(key, messages with the answer, tools, answer). Arithmetic only when no calculator is offered."""
    task = rng.choice(NO_TOOL_TASKS)
    calculator = None if task == "arith" or rng.random() < 0.5 else pick_calculator(rng)[0]
    tools = offered_tools(rng, calculator)
    key, question, working, answer = make_problem(rng, task, excluded)
    messages = system_messages(rng) + [{"role": "user", "content": question},
                                       {"role": "assistant", "content": reasoned(working, answer)}]
    return key, messages, tools, answer


# ---------------------------------------------------------------------------------------------------
# Held-out sets

def expected_call_text(name, parameter, expression):
    return f"{name}({json.dumps({parameter: expression})})"


def eval_sets(rng, count, make_problem, excluded_tasks):
    """{file name: rows} for tool.jsonl, tool_answer.jsonl and no_tool.jsonl (count rows each), and
    the keys of their problems (for excluding them from training). `excluded_tasks`: the keys of the
    other held-out sets, which no_tool's problems avoid (so that every set is scored on its own)."""
    calls, answers, keys, seen = [], [], set(), set()
    while len(calls) < count:
        p = make_call_problem(rng)
        if p["key"] in seen:
            continue
        seen.add(p["key"])
        keys.add(p["key"])
        prompt = render_with_tools(p["messages"], p["tools"], add_generation_prompt=True)
        calls.append({"messages": p["messages"], "tools": p["tools"], "prompt": prompt,
                      "answer": expected_call_text(p["name"], p["parameter"], p["expression"]),
                      "tool_call": {"name": p["name"], "arguments": {p["parameter"]: p["expression"]}}})
        # The second request as a client sends it back after running the tool.
        history = p["messages"] + [call_message(p["name"], p["parameter"], p["expression"], "\n\n"),
                                   p["tool_message"]]
        answers.append({"messages": history, "tools": p["tools"],
                        "prompt": render_with_tools(history, p["tools"], add_generation_prompt=True),
                        "answer": p["answer"]})
    no_tool = []
    while len(no_tool) < count:
        key, messages, tools, answer = no_tool_problem(rng, make_problem, excluded_tasks | keys)
        keys.add(key)
        question = messages[:-1]
        no_tool.append({"messages": question, "tools": tools,
                        "prompt": render_with_tools(question, tools, add_generation_prompt=True), "answer": answer})
    return {"tool.jsonl": calls, "tool_answer.jsonl": answers, "no_tool.jsonl": no_tool}, keys


# ---------------------------------------------------------------------------------------------------
# Scoring (the Python twin of `dsinfer eval --task tool`, for the training script's preview)

_CALL = re.compile(re.escape(CALL_BEGIN) + r"(.*?)" + re.escape(TOOL_SEP) + r"(.*?)```json(.*?)```\s*" +
                   re.escape(CALL_END), re.S)


def parse_calls(completion):
    """[(name, arguments dict)] of the calls in the first section, or None when there is no
    section or a call in it is malformed (arguments that are not a JSON object)."""
    begin = completion.find(CALLS_BEGIN)
    if begin < 0:
        return None
    section = completion[begin + len(CALLS_BEGIN):]
    end = section.find(CALLS_END)
    section = section if end < 0 else section[:end]
    calls = []
    for match in _CALL.finditer(section):
        try:
            arguments = json.loads(match.group(3).strip())
        except json.JSONDecodeError:
            return None
        if not isinstance(arguments, dict):
            return None
        calls.append((match.group(2).strip(), arguments))
    return calls or None


def call_is_right(completion, expected):
    """One call, of the expected function, with exactly the expected arguments (string values
    compared without white space)."""
    calls = parse_calls(completion)
    if not calls or len(calls) != 1:
        return False
    name, arguments = calls[0]
    want = expected["arguments"]

    def squeeze(value):
        return re.sub(r"\s+", "", value) if isinstance(value, str) else value

    return (name == expected["name"] and arguments.keys() == want.keys()
            and all(squeeze(arguments[k]) == squeeze(want[k]) for k in want))
