#!/usr/bin/env python3
"""Renders the chat-template fixtures with jinja2, exactly as transformers' apply_chat_template does.

Writes two files that src/jinja/*_test.cc and src/tokenizer/chat/*_test.cc compare the C++ engine against:
  tests/fixtures/chat/renderings.json   whole conversations through real and hand-written templates
  tests/fixtures/chat/expressions.json  template snippets (expressions, filters, tests, statements,
                                        whitespace control) with their outputs

Rendering goes through transformers' own functions (render_jinja_template for conversations, the
compiled template of _compile_jinja_template for snippets), so the environment is HF's: sandboxed,
trim_blocks and lstrip_blocks, loop controls, {% generation %}, raise_exception, strftime_now and
its tojson. A case that raises in HF is recorded as {"error": true}.

Run from the repository root with the reference environment:
  /work/refenv/bin/python tools/make_chat_fixtures.py
"""

import json
import pathlib

from transformers.utils.chat_template_utils import _compile_jinja_template, render_jinja_template

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "chat"
DEEPSEEK_CONFIG = ROOT / "tests" / "fixtures" / "tokenizers" / "deepseek-v3" / "tokenizer_config.json"

# ---------------------------------------------------------------------------------------------
# Templates. deepseek_v3 is the published one; the others are written here, each in a different
# style, to exercise what real chat templates use.

# DeepSeek-R1 style: like V3, but the reasoning before </think> is dropped from earlier assistant
# turns, tool calls may follow content, and the generation prompt opens a <think> block.
DEEPSEEK_R1_STYLE = """\
{%- if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}
{%- set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='', is_first_sp=true) %}
{%- for message in messages %}
    {%- if message['role'] == 'system' %}
        {%- if ns.is_first_sp %}
            {%- set ns.system_prompt = ns.system_prompt + message['content'] %}
            {%- set ns.is_first_sp = false %}
        {%- else %}
            {%- set ns.system_prompt = ns.system_prompt + '\\n\\n' + message['content'] %}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{{- bos_token }}{{ ns.system_prompt }}
{%- for message in messages %}
    {%- if message['role'] == 'user' %}
        {%- set ns.is_tool = false -%}
        {{- '<｜User｜>' + message['content'] }}
    {%- endif %}
    {%- if message['role'] == 'assistant' and 'tool_calls' in message %}
        {%- set ns.is_tool = false -%}
        {%- for tool in message['tool_calls'] %}
            {%- if not ns.is_first %}
                {%- if message['content'] is none %}
                    {{- '<｜Assistant｜><｜tool▁calls▁begin｜>' }}
                {%- else %}
                    {{- '<｜Assistant｜>' + message['content'] + '<｜tool▁calls▁begin｜>' }}
                {%- endif %}
                {%- set ns.is_first = true -%}
            {%- else %}
                {{- '\\n' }}
            {%- endif %}
            {{- '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\\n```json\\n' + tool['function']['arguments'] + '\\n```<｜tool▁call▁end｜>' }}
        {%- endfor %}
        {{- '<｜tool▁calls▁end｜><｜end▁of▁sentence｜>' }}
    {%- endif %}
    {%- if message['role'] == 'assistant' and 'tool_calls' not in message %}
        {%- if ns.is_tool %}
            {{- '<｜tool▁outputs▁end｜>' + message['content'] + '<｜end▁of▁sentence｜>' }}
            {%- set ns.is_tool = false -%}
        {%- else %}
            {%- set content = message['content'] %}
            {%- if '</think>' in content %}
                {%- set content = content.split('</think>')[-1] %}
            {%- endif %}
            {{- '<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>' }}
        {%- endif %}
    {%- endif %}
    {%- if message['role'] == 'tool' %}
        {%- set ns.is_tool = true -%}
        {%- if ns.is_output_first %}
            {{- '<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>' }}
            {%- set ns.is_output_first = false %}
        {%- else %}
            {{- '<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>' }}
        {%- endif %}
    {%- endif %}
{%- endfor -%}
{% if ns.is_tool %}{{ '<｜tool▁outputs▁end｜>' }}{% endif %}
{% if add_generation_prompt and not ns.is_tool %}{{ '<｜Assistant｜><think>\\n' }}{% endif %}
"""

# ChatML style with tools: a system block listing tool schemas with tojson, tool calls as JSON,
# consecutive tool results grouped into one user turn (loop.previtem / loop.nextitem), loop.last.
CHATML_TOOLS = """\
{%- set ns = namespace(system='You are a helpful assistant.', start=0) %}
{%- if messages and messages[0].role == 'system' %}
    {%- set ns.system = messages[0].content %}
    {%- set ns.start = 1 %}
{%- endif %}
{{- '<|im_start|>system\\n' + ns.system }}
{%- if tools %}
    {{- '\\n\\n# Tools\\n\\nCall a function by answering with a JSON object inside <tool_call></tool_call> tags.' }}
    {{- '\\nAvailable functions:\\n<tools>' }}
    {%- for tool in tools %}
        {{- '\\n' + tool | tojson }}
    {%- endfor %}
    {{- '\\n</tools>' }}
{%- endif %}
{{- '<|im_end|>\\n' }}
{%- for message in messages[ns.start:] %}
    {%- if message.role == 'user' or (message.role == 'assistant' and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
    {%- elif message.role == 'assistant' %}
        {{- '<|im_start|>assistant' }}
        {%- if message.content %}
            {{- '\\n' + message.content | trim }}
        {%- endif %}
        {%- for call in message.tool_calls %}
            {%- set function = call.function if call.function is defined else call %}
            {{- '\\n<tool_call>\\n{"name": ' ~ function.name | tojson ~ ', "arguments": ' }}
            {{- function.arguments if function.arguments is string else function.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or loop.previtem.role != 'tool' %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}
        {%- if loop.last or loop.nextitem.role != 'tool' %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and not enable_thinking %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}
"""

# Macros, filters and tests: a macro renders tool schemas (dict iteration with items(), sorting,
# join, map, slicing), content may be a string or a list of parts (selectattr/map/join), roles are
# checked with raise_exception, loop.index0 numbers the turns, {% generation %} wraps replies.
MACROS_AND_FILTERS = """\
{#- Written with plain tags: trim_blocks and lstrip_blocks keep the layout. -#}
{% macro render_parameters(parameters, required=[]) %}
  {% for name, spec in parameters.items() | sort(attribute='0') %}
  - {{ name }}{{ ' (required)' if name in required }}: {{ spec.type | default('any') }}
    {%- if spec.description is defined %} -- {{ spec.description | trim | capitalize }}{% endif %}
    {%- if spec.enum is defined %} (one of {{ spec.enum | map('string') | join('|') }}){% endif %}

  {% endfor %}
{% endmacro %}
{% macro text_of(content) %}
{% if content is string %}{{ content }}{% else %}{{ content | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('\\n') }}{% endif %}
{% endmacro %}
{{ bos_token }}
{% if tools is not none and tools | length > 0 %}
[AVAILABLE TOOLS]
{% for tool in tools %}
{% set f = tool.function %}
{{ loop.index }}. {{ f.name | upper }}{{ ': ' ~ f.description[:40] if f.description }}
{% if f.parameters is mapping and f.parameters.properties %}
{{ render_parameters(f.parameters.properties, f.parameters.required | default([])) }}
{%- endif %}
{% endfor %}
[/AVAILABLE TOOLS]
{% endif %}
{% for message in messages %}
  {% if message.role not in ['system', 'user', 'assistant', 'tool'] %}
    {{ raise_exception('Unknown role: ' ~ message.role) }}
  {% endif %}
  {% set text = text_of(message.content) | trim %}
  {% if message.role == 'system' %}
[SYSTEM #{{ loop.index0 }}] {{ text }}
  {% elif message.role == 'user' %}
[USER #{{ loop.index0 }}] {{ text }}
  {% elif message.role == 'assistant' %}
[ASSISTANT #{{ loop.index0 }}] {% generation %}{{ text.split('</think>')[-1] | trim if '</think>' in text else text }}
    {% for call in message.tool_calls | default([]) %}
<call {{ call.function.name }} {{ call.function.arguments | replace('\\n', ' ') }}>
    {% endfor %}
{{ eos_token }}{% endgeneration %}

  {% else %}
[RESULT #{{ loop.index0 }}{{ ' of ' ~ message.name if message.name is defined }}] {{ text[:60] }}{{ '...' if text | length > 60 }}
  {% endif %}
{% endfor %}
{% if add_generation_prompt %}
[ASSISTANT #{{ messages | length }}] {% endif %}
"""

# Llama 3.1 style: a dated system header, tool schemas with tojson(indent=4), trimmed contents,
# one tool call per message enforced with raise_exception.
LLAMA_STYLE = """\
{{- bos_token }}
{%- if not date_string is defined %}{% set date_string = "26 Jul 2024" %}{% endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] | trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{%- if tools is not none %}
    {{- "You have access to the following functions:\\n\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {%- if message.role in ['user', 'system'] or (message.role == 'assistant' and message.tool_calls is not defined) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}
    {%- elif message.tool_calls is defined %}
        {%- if message.tool_calls | length != 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable and message.content is not string %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

# Mistral style: strict user/assistant alternation checked with raise_exception, the system
# prompt folded into the last user turn, [INST] markers, whitespace-sensitive joins.
MISTRAL_STYLE = """\
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.last and system_message is defined %}
            {{- '[INST] ' + system_message + '\\n\\n' + message['content'] + '[/INST]' }}
        {%- else %}
            {{- '[INST] ' + message['content'] + '[/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] | trim + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
"""

# ---------------------------------------------------------------------------------------------
# Conversations.

GET_WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city, in the unit asked for.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "  the city name, e.g. Paris  "},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"},
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "what to look up"}}},
    },
}


def call(name, arguments):
    return {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}


SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
CONVERSATIONS = {
    "user_only": [{"role": "user", "content": "Hello!"}],
    "system_user": [SYSTEM, {"role": "user", "content": "What is 2 + 2?"}],
    "two_systems": [
        SYSTEM,
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Name a prime."},
    ],
    "multi_turn": [
        SYSTEM,
        {"role": "user", "content": "Hi."},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
    ],
    "reasoning": [
        {"role": "user", "content": "What is 3 * 7?"},
        {"role": "assistant", "content": "<think>\n3 times 7 is 21.\n</think>\n\nIt is 21."},
        {"role": "user", "content": "And 3 * 8?"},
    ],
    "tool_single": [
        SYSTEM,
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call("get_weather", {"city": "Paris", "unit": "celsius"})]},
        {"role": "tool", "content": '{"temperature": 18, "sky": "cloudy"}'},
        {"role": "assistant", "content": "It is 18 °C and cloudy in Paris."},
    ],
    "tool_multi": [
        {"role": "user", "content": "Weather in Paris and in Tokyo, and news about both?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                call("get_weather", {"city": "Paris"}),
                call("get_weather", {"city": "東京"}),
                call("search", {"query": "Paris Tokyo news"}),
            ],
        },
        {"role": "tool", "content": "18"},
        {"role": "tool", "content": "24"},
        {"role": "tool", "content": "Nothing new."},
        {"role": "assistant", "content": "Paris: 18. Tokyo: 24. No news."},
        {"role": "user", "content": "Thanks!"},
    ],
    "ends_with_tool": [
        {"role": "user", "content": "Search for cats."},
        {"role": "assistant", "content": None, "tool_calls": [call("search", {"query": "cats"})]},
        {"role": "tool", "content": "Cats are small carnivorous mammals."},
    ],
    "content_and_tool_call": [
        {"role": "user", "content": "Find dogs."},
        {"role": "assistant", "content": "Let me search.", "tool_calls": [call("search", {"query": "dogs"})]},
        {"role": "tool", "content": "Dogs are domesticated."},
        {"role": "assistant", "content": "Dogs are domesticated."},
    ],
    "unicode": [
        {"role": "system", "content": "Réponds en français. 答えは日本語で。"},
        {"role": "user", "content": "Emoji 😀👍🏽 and RTL שלום, combining é, zero-width \u200b joiner 👩‍💻"},
        {"role": "assistant", "content": "D'accord ✅ — « très bien » ¿sí? 你好！"},
        {"role": "user", "content": "Ünïcödé tab\tand CRLF\r\nline"},
    ],
    "empty_content": [
        {"role": "system", "content": ""},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "Still there?"},
    ],
    "whitespace": [
        {"role": "system", "content": "\n  Be nice.  \n"},
        {"role": "user", "content": "  padded question?\n\n"},
        {"role": "assistant", "content": "\n\n  padded answer  \n"},
        {"role": "user", "content": "{{ not a template }} {% raw %} #}"},
    ],
    "content_parts": [
        {"role": "user", "content": [{"type": "text", "text": "Describe this."}, {"type": "image"}, {"type": "text", "text": "Briefly."}]},
    ],
    "bad_role": [{"role": "user", "content": "Hi"}, {"role": "narrator", "content": "Meanwhile..."}],
    "not_alternating": [{"role": "user", "content": "One"}, {"role": "user", "content": "Two"}],
    "long_tool_result": [
        {"role": "user", "content": "Read the file."},
        {"role": "assistant", "content": None, "tool_calls": [call("search", {"query": "file"})]},
        {"role": "tool", "name": "search", "content": "A very long tool result that goes on and on, well past sixty characters of text."},
    ],
}

DEEPSEEK_TOKENS = ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>")
PLAIN_TOKENS = ("<s>", "</s>")

# (template, conversation, add_generation_prompt, extra variables). Every template meets every
# conversation kind it is meant for; tools go through `extra`, as apply_chat_template's tools=.
CASES = []
for conversation in ["user_only", "system_user", "two_systems", "multi_turn", "reasoning", "tool_single",
                     "tool_multi", "ends_with_tool", "unicode", "empty_content", "whitespace"]:
    for prompt in (True, False):
        if prompt or conversation in ("multi_turn", "tool_single", "reasoning", "ends_with_tool"):
            CASES.append(("deepseek_v3", conversation, prompt, {}))
for conversation in ["system_user", "two_systems", "multi_turn", "reasoning", "tool_single", "tool_multi",
                     "ends_with_tool", "content_and_tool_call", "unicode"]:
    CASES.append(("deepseek_r1_style", conversation, True, {}))
CASES.append(("deepseek_r1_style", "reasoning", False, {}))
for conversation, prompt, extra in [
    ("user_only", True, {}),
    ("system_user", True, {"tools": [GET_WEATHER, SEARCH]}),
    ("multi_turn", False, {}),
    ("tool_single", True, {"tools": [GET_WEATHER]}),
    ("tool_multi", True, {"tools": [GET_WEATHER, SEARCH]}),
    ("ends_with_tool", True, {"tools": [SEARCH], "enable_thinking": False}),
    ("unicode", True, {"enable_thinking": True}),
    ("whitespace", False, {"tools": []}),
]:
    CASES.append(("chatml_tools", conversation, prompt, extra))
for conversation, prompt, extra in [
    ("system_user", True, {}),
    ("tool_multi", True, {"tools": [GET_WEATHER, SEARCH]}),
    ("reasoning", False, {}),
    ("content_parts", True, {}),
    ("long_tool_result", True, {"tools": [SEARCH]}),
    ("unicode", False, {}),
    ("bad_role", True, {}),
]:
    CASES.append(("macros_and_filters", conversation, prompt, extra))
for conversation, prompt, extra in [
    ("system_user", True, {}),
    ("tool_single", True, {"tools": [GET_WEATHER], "date_string": "01 Jan 2025"}),
    ("tool_multi", True, {"tools": [GET_WEATHER, SEARCH]}),
    ("whitespace", False, {}),
]:
    CASES.append(("llama_style", conversation, prompt, extra))
for conversation, prompt in [("system_user", True), ("multi_turn", False), ("reasoning", True),
                             ("not_alternating", True), ("tool_single", True)]:
    CASES.append(("mistral_style", conversation, prompt, {}))


def render_case(source, messages, add_generation_prompt, extra, tokens):
    extra = dict(extra)
    tools = extra.pop("tools", None)
    documents = extra.pop("documents", None)
    rendered, _ = render_jinja_template(
        conversations=[messages], tools=tools, documents=documents, chat_template=source,
        add_generation_prompt=add_generation_prompt, bos_token=tokens[0], eos_token=tokens[1], **extra)
    return rendered[0]


def make_renderings():
    config = json.loads(DEEPSEEK_CONFIG.read_text())
    templates = {
        "deepseek_v3": config["chat_template"],
        "deepseek_r1_style": DEEPSEEK_R1_STYLE,
        "chatml_tools": CHATML_TOOLS,
        "macros_and_filters": MACROS_AND_FILTERS,
        "llama_style": LLAMA_STYLE,
        "mistral_style": MISTRAL_STYLE,
    }
    cases = []
    for template, conversation, prompt, extra in CASES:
        tokens = DEEPSEEK_TOKENS if template.startswith("deepseek") else PLAIN_TOKENS
        case = {
            "name": f"{template}/{conversation}/{'prompt' if prompt else 'no_prompt'}",
            "template": template,
            "messages": CONVERSATIONS[conversation],
            "add_generation_prompt": prompt,
            "extra": extra,
            "bos_token": tokens[0],
            "eos_token": tokens[1],
        }
        try:
            case["expected"] = render_case(templates[template], CONVERSATIONS[conversation], prompt, extra, tokens)
        except Exception as error:  # HF raised: the engine must raise too
            case["error"] = True
            case["message"] = str(error)
        cases.append(case)
    return {"templates": templates, "cases": cases}


# ---------------------------------------------------------------------------------------------
# Snippets: one feature each, rendered with CONTEXT as the variables.

CONTEXT = {
    "xs": [3, 1, 2],
    "d": {"b": 1, "a": [1, 2]},
    "s": "Hello World",
    "u": "héllo wörld 😀",
    "n": None,
    "t": True,
    "f": 1.5,
    "i": 7,
    "empty": "",
    "words": ["b", "A", "a", "C"],
    "nested": {"a": {"b": {"c": 42}}, "list": [[1, 2], [3, 4]]},
    "users": [
        {"name": "ann", "age": 31, "admin": True},
        {"name": "Bob", "age": 25, "admin": False},
        {"name": "cy", "age": 40, "admin": True, "tags": ["x"]},
    ],
    "msg": {"role": "assistant", "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "get", "arguments": {"x": 1, "y": "é"}}}]},
    "text": "  line one\nline two  \n\n",
}

SNIPPETS = [
    # literals and printing
    "{{ 1 }}|{{ -1 }}|{{ 1.5 }}|{{ 1e3 }}|{{ 1_000 }}|{{ 0x1F }}|{{ 0o17 }}|{{ 0b101 }}",
    "{{ 'a' 'b' }}|{{ \"a\\nb\" }}|{{ 'a\\tb\\\\c\\'d' }}|{{ '\\u00e9\\x41' }}|{{ 'a\\\nb' }}|{{ '\\d' }}",
    "{{ true }}{{ True }}{{ false }}{{ none }}{{ None }}",
    "{{ [] }}|{{ {} }}|{{ () }}|{{ (1) }}|{{ (1,) }}|{{ 1, 2 }}|{{ (1, 'a') }}",
    "{{ {'a': [1, 2.5, none], 'b': {'c': true}} }}",
    "{{ [1, 'a', none, true, 1.5, {'k': 'v'}, (1,), (1, 2)] }}",
    "{{ [\"it's\", 'a\"b', \"a'b\\\"c\", '\\n\\t\\\\', 'é', '\\x00', '\\u3000', '😀', '\\xa0', '\\x7f'] }}",
    "{{ 0.1 + 0.2 }}|{{ 1e100 }}|{{ 123456789.123 }}|{{ -0.0 }}|{{ 1e-7 }}|{{ 3.0 * 2 }}|{{ 1e16 }}|{{ 1e15 }}",
    "{{ 0.0001 }}|{{ 0.00001 }}|{{ 1/3 }}|{{ 2/3 }}|{{ 12345678901234567890.0 }}|{{ 1.5e300 * 1e10 }}",
    "{{ xs }}|{{ d }}|{{ n }}|{{ t }}|{{ f }}|{{ users[0] }}",
    # arithmetic
    "{{ 7 / 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 % -3 }}|{{ 7 / 7 }}",
    "{{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ 2 ** 3 ** 2 }}|{{ -2 ** 2 }}|{{ 2.0 ** 0.5 }}",
    "{{ 7.5 // 2 }}|{{ 7.5 % 2 }}|{{ -7.5 // 2 }}|{{ -7.5 % 2 }}|{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 10 - 2 - 3 }}",
    "{{ 'ab' * 3 }}|{{ [1] * 3 }}|{{ 3 * 'x' }}|{{ [1] + [2] }}|{{ 'a' + 'b' }}|{{ 1 + 1.5 }}|{{ true + 1 }}|{{ 'x' * 0 }}|{{ 'x' * -1 }}",
    "{{ 'a' ~ 1 ~ none ~ true ~ 1.5 ~ missing ~ [1] }}",
    "{{ 1 / 0 }}",
    "{{ 1 // 0 }}",
    "{{ 1 % 0 }}",
    "{{ 'a' + 1 }}",
    "{{ 1 + 'a' }}",
    "{{ [1] + 'a' }}",
    "{{ missing + 1 }}",
    "{{ -'a' }}",
    "{{ -xs[0] }}|{{ - 1|abs }}|{{ +5 }}|{{ -(-3) }}|{{ -1.5|abs }}",
    # comparisons and logic
    "{{ 1 == 1.0 }}{{ true == 1 }}{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ [1,2] < [1,3] }}{{ 'a' < 'b' }}{{ 'B' < 'a' }}",
    "{{ 1 != 2 }}{{ none == none }}{{ 1 == '1' }}{{ [1, 2] == [1, 2] }}{{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }}{{ 2 >= 2 }}{{ 2 <= 1 }}",
    "{{ 1 < 'a' }}",
    "{{ none < 1 }}",
    "{{ 'b' in 'abc' }}{{ 2 in xs }}{{ 'a' in d }}{{ 'z' not in d }}{{ not 'z' in d }}{{ 'x' in missing }}{{ [1] in [[1], 2] }}",
    "{{ 1 in 'abc' }}",
    "{{ 'a' in none }}",
    "{{ none and missing }}|{{ true and 'x' }}|{{ 0 or 'y' }}|{{ '' or none }}|{{ not [] }}|{{ not none }}|{{ not not 'a' }}",
    "{{ 1 if xs else 2 }}|{{ 'a' if false }}|{{ ('a' if false) is defined }}|{{ 'x' if n is none else 'y' }}|{{ 1 if 0 else 2 if 0 else 3 }}",
    "{{ 'yes' if msg.content is none and msg.tool_calls else 'no' }}",
    # variables, attributes, subscripts
    "{{ s }}|{{ d.b }}|{{ d['a'] }}|{{ xs[0] }}|{{ xs[-1] }}|{{ xs.0 }}|{{ nested.a.b.c }}|{{ nested['a']['b'] }}|{{ nested.list.1.0 }}",
    "[{{ xs[5] }}][{{ d.missing }}][{{ missing }}][{{ s[100] }}][{{ xs['a'] }}][{{ none.x }}][{{ s.x }}]",
    "{{ missing.attr }}",
    "{{ d.missing.attr }}",
    "{{ none.x.y }}",
    "{{ missing[0] }}",
    "{{ users[0].name }}|{{ users[-1]['tags'][0] }}|{{ users[1].tags is defined }}|{{ msg.tool_calls[0].function.arguments.y }}",
    "{{ s[0] }}|{{ s[-1] }}|{{ s[1:3] }}|{{ s[::-1] }}|{{ s[:-2] }}|{{ s[6:] }}|{{ s[::2] }}|{{ s[-3:-1] }}|{{ s[5:1] }}|{{ s[5:1:-1] }}",
    "{{ u[0] }}|{{ u[1] }}|{{ u[-1] }}|{{ u[:5] }}|{{ u[::-1] }}|{{ u|length }}",
    "{{ xs[1:] }}|{{ xs[::2] }}|{{ xs[-2:] }}|{{ xs[5:] }}|{{ xs[:] }}|{{ xs[::-1] }}|{{ (1, 2, 3)[1:] }}",
    "{{ xs[::0] }}",
    "{{ xs[1::9223372036854775807] }}|{{ xs[::-9223372036854775807] }}|{{ s[-9223372036854775807:] }}|{{ xs[9223372036854775807] is defined }}",
    "{{ d['items'] is defined }}|{{ d.items is defined }}|{{ xs[true] }}|{{ xs[1.0] is defined }}",
    # string methods
    "{{ s.upper() }}|{{ s.lower() }}|{{ 'hello world'.title() }}|{{ \"they're bill's\".title() }}|{{ 'hELLO wORLD'.capitalize() }}|{{ s.swapcase() }}",
    "[{{ '  a b  '.strip() }}][{{ '  a b  '.lstrip() }}][{{ '  a b  '.rstrip() }}][{{ 'xxaxx'.strip('x') }}][{{ 'abcba'.strip('ab') }}][{{ '\\u3000a\\xa0'.strip() }}]",
    "{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a,b,c'.split(',', 1) }}{{ 'a,b,c'.rsplit(',', 1) }}{{ ' a b '.split(none, 1) }}{{ ' a b '.rsplit(none, 1) }}{{ ''.split() }}{{ ''.split(',') }}",
    "{{ 'a<sep>b<sep>c'.split('<sep>')[-1] }}|{{ 'x</think>y</think>z'.split('</think>')[-1] }}|{{ 'no tag'.split('</think>')[0] }}|{{ 'a b c'.split(maxsplit=1) }}",
    "{{ 'a,b'.split('') }}",
    "{{ s.startswith('He') }}{{ s.startswith(('x', 'H')) }}{{ s.endswith('ld') }}{{ s.endswith(('x', 'y')) }}{{ ''.startswith('') }}",
    "{{ s.replace('l', 'L') }}|{{ s.replace('l', 'L', 1) }}|{{ 'ab'.replace('', '-') }}|{{ s.find('o') }}|{{ s.find('z') }}|{{ u.find('w') }}|{{ s.rfind('o') }}|{{ s.count('l') }}|{{ 'aaa'.count('aa') }}",
    "{{ '{} and {}'.format(1, 'b') }}|{{ '{0}{1}{0}'.format('a', 'b') }}|{{ '{name}!'.format(name='x') }}|{{ '{{x}}'.format() }}|{{ '{!r}'.format('q') }}",
    "{{ '{:>5}|{:<5}|{:^5}|{:*^7}'.format('a', 'b', 'c', 'd') }}|{{ '{:.2f}|{:5d}|{:+d}|{:05.1f}|{:.3}'.format(3.14159, 42, 7, 2.5, 'abcdef') }}|{{ '{:%}'.format(0.25) }}",
    "{{ ', '.join(['a', 'b']) }}|{{ '-'.join('abc') }}|{{ ''.join([]) }}",
    "{{ ', '.join([1, 2]) }}",
    "{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ 'Hello'.isupper() }}{{ 'HELLO'.isupper() }}{{ 'hello1'.islower() }}{{ ' '.isspace() }}{{ '12'.isdigit() }}",
    "{{ 'prefix-x'.removeprefix('prefix-') }}|{{ 'x.txt'.removesuffix('.txt') }}|{{ 'ab'.center(6, '*') }}",
    "{{ u.upper() }}|{{ 'ÉCOLE Ωμέγα ПРИВЕТ'.lower() }}|{{ 'straße'.upper() }}|{{ 'éa'.capitalize() }}",
    # dict and list methods
    "{{ d.items() | list }}|{{ d.keys() | list }}|{{ d.values() | list }}|{{ d.get('b') }}|{{ d.get('z') }}|{{ d.get('z', 5) }}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for k, v in d | items %}{{ k }}{% endfor %}",
    "{{ xs.index(1) }}|{{ xs.count(3) }}",
    # filters: text
    "[{{ '  x  ' | trim }}][{{ 'xxhixx' | trim('x') }}][{{ text | trim }}][{{ missing | trim }}][{{ n | trim }}]",
    "{{ s | upper }}|{{ s | lower }}|{{ \"they're bill's x-y (z)\" | title }}|{{ 'hello WORLD' | capitalize }}|{{ 'a-b c_d' | title }}",
    "{{ s | replace('o', '0') }}|{{ s | replace('o', '0', 1) }}|{{ 'aaa' | replace('a', 'bb') }}|{{ 5 | replace('5', 'five') }}",
    "[{{ 'abc' | center(9) }}][{{ 'ab' | center(7) }}][{{ 'ab' | center(3) }}][{{ 'héllo' | center(9) }}]",
    "{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(2, blank=true) }}|{{ 'a\\nb' | indent('> ') }}|{{ 'a\\nb\\n' | indent(1) }}",
    "{{ 'hello world foo' | wordcount }}|{{ 'one, two;three  four' | wordcount }}|{{ '' | wordcount }}|{{ 'héllo wörld' | wordcount }}",
    "{{ '<a href=\"x\">&\\'' | e }}|{{ '<b>' | escape }}|{{ '<b>' | safe }}|{{ 5 | e }}|{{ '<' | forceescape }}",
    "{{ 1 | string }}|{{ none | string }}|{{ [1, 'a'] | string }}|{{ true | string }}|{{ (1 | string) is string }}|[{{ missing | string }}]",
    # filters: numbers
    "{{ '3.7' | int }}|{{ 'x' | int }}|{{ 'x' | int(5) }}|{{ '0x1A' | int(0, 16) }}|{{ '1A' | int(base=16) }}|{{ true | int }}|{{ 3.9 | int }}|{{ -3.9 | int }}|{{ ' 4 ' | int }}|{{ '1_000' | int }}|{{ none | int }}|{{ [] | int }}",
    "{{ '12' | float }}|{{ '1e3' | float }}|{{ 'x' | float }}|{{ 'x' | float(2.5) }}|{{ 3 | float }}|{{ ' 2.5 ' | float }}|{{ none | float }}",
    "{{ -3 | abs }}|{{ -2.5 | abs }}|{{ 3 | abs }}",
    "{{ 2.5 | round }}|{{ 3.5 | round }}|{{ 2.675 | round(2) }}|{{ 2.5 | round(0, 'floor') }}|{{ 2.1 | round(0, 'ceil') }}|{{ 3 | round }}|{{ -2.5 | round }}|{{ 1234.5678 | round(-2) }}|{{ 0.125 | round(2) }}",
    "{{ 'a' | round }}",
    "{{ 'x' | abs }}",
    # filters: sequences
    "{{ xs | length }}|{{ d | length }}|{{ s | length }}|{{ u | length }}|{{ missing | length }}|{{ [] | count }}|{{ users | length }}",
    "{{ 5 | length }}",
    "{{ xs | first }}|{{ xs | last }}|{{ 'abc' | first }}|{{ 'abc' | last }}|[{{ [] | first }}]|{{ d | first }}",
    "{{ 'abc' | list }}|{{ d | list }}|{{ xs | list }}|{{ missing | list }}|{{ (1, 2) | list }}",
    "{{ xs | join }}|{{ xs | join(', ') }}|{{ users | join(', ', attribute='name') }}|{{ [1, none, 'a'] | join('-') }}|[{{ missing | join(',') }}]",
    "{{ xs | sort }}|{{ words | sort }}|{{ words | sort(case_sensitive=true) }}|{{ words | sort(reverse=true) }}|{{ users | sort(attribute='age') | map(attribute='name') | join(',') }}",
    "{{ users | sort(attribute='admin,age') | map(attribute='name') | list }}|{{ users | sort(attribute='name', reverse=true) | map(attribute='name') | list }}",
    "{{ [3, 1, 2] | reverse | list }}|{{ 'abc' | reverse }}|{{ u | reverse }}",
    "{{ ['b', 'A', 'a', 'b'] | unique | list }}|{{ ['b', 'A', 'a'] | unique(case_sensitive=true) | list }}|{{ [1, 1.0, true, 2] | unique | list }}|{{ users | unique(attribute='admin') | map(attribute='name') | list }}",
    "{{ xs | sum }}|{{ users | sum(attribute='age') }}|{{ [1.5, 2] | sum }}|{{ [] | sum }}|{{ xs | sum(start=10) }}",
    "{{ xs | min }}|{{ xs | max }}|{{ words | min }}|{{ words | max }}|{{ words | min(case_sensitive=true) }}|{{ users | max(attribute='age') }}|[{{ [] | min }}]",
    "{{ [1, 2, 3, 4, 5] | batch(2) | list }}|{{ [1, 2, 3] | batch(2, 'x') | list }}",
    "{{ users | map(attribute='name') | list }}|{{ users | map(attribute='tags', default='none') | list }}|{{ ['a', 'b'] | map('upper') | list }}|{{ [' a ', 'b '] | map('trim') | list }}|{{ ['1', '2'] | map('int') | sum }}|{{ [[1], [2, 3]] | map('length') | list }}",
    "{{ nested.list | map(attribute='1') | list }}|{{ missing | map('upper') | list }}|{{ [users[2]] | map(attribute='tags.0') | list }}",
    "{{ users | map(attribute='tags.0') | list }}",
    "{{ users | selectattr('admin') | map(attribute='name') | join(',') }}|{{ users | rejectattr('admin') | map(attribute='name') | join(',') }}|{{ users | selectattr('age', 'gt', 30) | list | length }}|{{ users | selectattr('name', 'equalto', 'Bob') | first }}",
    "{{ [1, 2, 3, 4] | select('odd') | list }}|{{ [0, 1, '', none, 'a'] | select | list }}|{{ [1, 2, 3, 4] | reject('even') | list }}|{{ [1, 5, 10] | select('ge', 5) | list }}|{{ ['a', 1, none] | select('string') | list }}|{{ users | selectattr('tags', 'defined') | map(attribute='name') | list }}",
    "{{ d | items | list }}|{{ d | dictsort }}|{{ {'b': 1, 'A': 2} | dictsort }}|{{ {'b': 1, 'A': 2} | dictsort(true) }}|{{ {'x': 2, 'y': 1} | dictsort(by='value') }}|{{ missing | items | list }}",
    "{{ d | attr('b') }}|{{ users[0] | attr('name') }}|{{ (d | attr('items'))() | list }}",
    "{{ missing | default('x') }}|{{ none | default('x') }}|{{ '' | default('x') }}|{{ '' | default('x', true) }}|{{ none | d('y', true) }}|{{ false | default('z') }}|{{ missing | d }}|{{ d.missing | default(d.b) }}",
    # tojson
    "{{ d | tojson }}|{{ {'a': [1, 2.0, none, true, 'é\\n\"'] } | tojson }}|{{ 'é' | tojson(ensure_ascii=true) }}|{{ '😀' | tojson(true) }}",
    "{{ {'a': {'b': 1}, 'c': [], 'd': {}} | tojson(indent=2) }}|{{ [1, [2, 3]] | tojson(indent=0) }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}",
    "{{ {1: 2, none: 3, true: 4, 1.5: 5} | tojson }}|{{ (1, 2) | tojson }}|{{ {'a': 1, 'b': [1, 2]} | tojson(separators=(',', ':')) }}|{{ 1e20 | tojson }}|{{ 1.0 | tojson }}|{{ 's' | tojson }}",
    "{{ msg | tojson }}|{{ msg.tool_calls[0].function.arguments | tojson }}|{{ users[0] | tojson(indent='\\t') }}",
    "{{ missing | tojson }}",
    "{{ {'k': [1, 2]} | tojson(indent=4) }}",
    # tests
    "{{ xs is defined }}{{ missing is defined }}{{ missing is undefined }}{{ n is none }}{{ d.b is none }}{{ msg.content is none }}{{ msg.content is not none }}{{ d.z is not defined }}",
    "{{ s is string }}{{ 1 is string }}{{ 1 is number }}{{ 1.5 is number }}{{ true is number }}{{ 1 is integer }}{{ true is integer }}{{ 1.0 is integer }}{{ 1.0 is float }}{{ 1 is float }}",
    "{{ d is mapping }}{{ xs is mapping }}{{ xs is sequence }}{{ s is sequence }}{{ d is sequence }}{{ 1 is sequence }}{{ xs is iterable }}{{ s is iterable }}{{ 1 is iterable }}{{ missing is iterable }}{{ missing is sequence }}{{ missing is mapping }}",
    "{{ true is boolean }}{{ 1 is boolean }}{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}{{ none is false }}",
    "{{ 3 is odd }}{{ 3 is even }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 0 is even }}{{ -3 is odd }}",
    "{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 2 is gt 1 }}{{ 2 is ge 2 }}{{ 1 is le 0 }}{{ 2 is greaterthan 1 }}{{ 1 is lessthan 2 }}",
    "{{ 2 is in xs }}{{ 5 is in xs }}{{ 'a' is in 'cat' }}{{ 'a' is in d }}{{ 2 is not in xs }}",
    "{{ none is sameas none }}{{ true is sameas true }}{{ 1 is sameas true }}{{ xs is sameas xs }}{{ false is sameas 0 }}",
    "{{ 'abc' is lower }}{{ 'Abc' is lower }}{{ 'ABC' is upper }}{{ '123' is upper }}{{ 'é' is lower }}",
    "{{ range is callable }}{{ xs is callable }}{{ s.upper is callable }}{{ msg is not mapping }}",
    "{{ 'a' is odd }}",
    # globals
    "{{ range(3) | list }}|{{ range(1, 4) | list }}|{{ range(0, 10, 3) | list }}|{{ range(5, 0, -2) | list }}|{{ range(0) | list }}|{{ range(3, 1) | list }}",
    "{{ range(1, 2, 0) }}",
    "{{ dict(a=1, b='x') }}|{{ dict({'a': 1}, b=2) }}|{{ dict([['k', 'v']]) }}|{{ dict() }}",
    "{% set ns = namespace(a=1) %}{{ ns.a }}|{{ ns['a'] }}|[{{ ns.b }}]|{% set ns.b = 2 %}{{ ns.b }}|{{ ns }}",
    "{% set ns = namespace(d) %}{{ ns.b }}|{% set ns.b = ns.b + 1 %}{{ ns.b }}|{{ d.b }}",
    "{% set ns = namespace(count=0) %}{% for x in xs %}{% set ns.count = ns.count + x %}{% endfor %}{{ ns.count }}",
    "{% set x = 1 %}{% set x.y = 2 %}",
    "{{ raise_exception('custom failure: ' ~ xs | length) }}",
    "before{% if xs | length > 2 %}{{ raise_exception('too many') }}{% endif %}after",
    "{{ undefined_function() }}",
    "{{ xs() }}",
    # statements: if / for
    "{% if xs %}a{% elif n %}b{% else %}c{% endif %}|{% if n %}a{% elif xs %}b{% else %}c{% endif %}|{% if n %}a{% elif empty %}b{% else %}c{% endif %}|{% if missing %}x{% endif %}",
    "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.depth }}{{ loop.depth0 }}{{ loop.cycle('a', 'b') }};{% endfor %}",
    "{% for x in xs if x > 1 %}{{ loop.index }}/{{ loop.length }}:{{ x }} {% else %}none{% endfor %}|{% for x in xs if x > 5 %}{{ x }}{% else %}none{% endfor %}",
    "{% for x in [] %}a{% else %}empty{% endfor %}|{% for x in missing %}a{% else %}undefined is empty{% endfor %}",
    "{% for c in u %}{{ c }}.{% endfor %}",
    "{% for x in none %}{% endfor %}",
    "{% for x in 5 %}{% endfor %}",
    "{% for x in xs %}{% if x == 1 %}{% break %}{% endif %}{{ x }}{% endfor %}|{% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}",
    "{% for row in nested.list %}{% for x in row %}{{ loop.index }}{{ x }}{% if x == 3 %}{% break %}{% endif %}{% endfor %}/{{ loop.index }} {% endfor %}",
    "{% for a, b in nested.list %}{{ a }}{{ b }},{% endfor %}|{% for (a, b) in [(1, 2)] %}{{ a + b }}{% endfor %}",
    "{% for a, b in xs %}{% endfor %}",
    "{% for a, b, c in nested.list %}{% endfor %}",
    "{% for user in users %}{% set outer = loop %}{% for tag in user.tags | default([]) %}{{ outer.index }}{{ tag }}{% endfor %}{% endfor %}",
    "{% for i in range(3) %}{% if i == 0 %}{% set x = 'a' %}{% endif %}[{{ x }}]{% endfor %}[{{ x }}]",
    "{% set x = 'o' %}{% for i in range(3) %}{{ x }}{% set x = i %}{{ x }}{% endfor %}[{{ x }}]",
    "{% if true %}{% set y = 1 %}{% endif %}{{ y }}",
    "{% for m in users %}{{ loop.previtem.name if loop.previtem is defined else 'first' }}>{{ m.name }} {% endfor %}",
    "{% for x in xs %}{{ loop }} {% endfor %}",
    # statements: set, with, filter, raw, macros, call
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set t = 1, 2 %}{{ t }}|{% set l = [1, 2] %}{% set p, q = l %}{{ q }}",
    "{% set x %}  inner {{ 1 }} {% endset %}[{{ x }}]{% set y | upper | trim %}  abc {% endset %}[{{ y }}]",
    "{% filter upper %}hello {{ s }}{% endfilter %}|{% filter replace('a', 'b') | upper %}banana{% endfilter %}",
    "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]",
    "{% raw %}{{ not evaluated }} {% if %}{% endraw %}|{%- raw -%}  x  {%- endraw -%}|",
    "{% macro m(a, b='B') %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1) }}|{{ m(1, 2, 3) }}|{{ m(1, c=4) }}|{{ m(b=5, a=6) }}",
    "{% macro m(a, b=a * 2) %}{{ a }}-{{ b }}{% endmacro %}{{ m(3) }}|{{ m(3, 1) }}",
    "{% macro m(a, b) %}[{{ a }}][{{ b }}][{{ b is defined }}]{% endmacro %}{{ m(1) }}",
    "{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }}",
    "{% macro m(a) %}[{{ caller() }}]{% endmacro %}{% call m(1) %}body{% endcall %}",
    "{% macro m(a) %}[{{ caller(a * 2) }}]{% endmacro %}{% call(v) m(7) %}body{{ v }}{% endcall %}",
    "{% macro fact(n) %}{{ 1 if n <= 1 else n * fact(n - 1) | int }}{% endmacro %}{{ fact(5) }}",
    "{% macro list_items(items) %}{% for i in items %}<{{ i }}>{% endfor %}{% endmacro %}{{ list_items(xs) | upper }}{{ list_items(['a']) | length }}",
    "{% macro greet(name) -%}\n  Hello {{ name }}!\n{%- endmacro %}{{ greet('x') }}|{{ greet is callable }}",
    "{% generation %}{% set x = 1 %}gen{% endgeneration %}[{{ x }}]",
    "{% print 'printed ' ~ 1 %}",
    "{# a comment #}x{# another\n multi-line {{ comment }} #}y",
    # whitespace control, trim_blocks, lstrip_blocks
    "  {% if true %}\n  a\n  {% endif %}\nb",
    "{% for x in xs %}\n  {{ x }}\n{% endfor %}\nend",
    "{%- for x in xs -%}\n  {{ x }}\n{%- endfor -%}\nend",
    "a\n  {%- if true %}\nb\n  {%+ if true %}c{% endif %}\n{% endif +%}\nd",
    "x  {{- ' y ' -}}  z|x  {{ ' y ' }}  z|x\n  {{ 'v' }}\n  {% if true %}w{% endif %}\n",
    "line1\n    {# comment #}\nline2\n    {#- trimmed -#}   \nline3",
    "{% if true %}  \nkeep spaces{% endif %}|{% if true %}\n\nkeep blank{% endif %}",
    "\t{% if true %}\ttabs{% endif %}\n  \t{% if true %}x{% endif %}",
    "text {% if true %}inline{% endif %} text\n  {{ 1 }} {% if true %}\n  x\n  {% endif %}",
    "{% for i in range(2) %}\n{{ i }}\n{% endfor %}\n",
    "a{% set x = 1 %}\nb{% set y = 2 -%}\n\n  c{%- set z = 3 %}\n\nd",
    "  {%- raw %}\n  raw {{ x }}\n  {% endraw -%}\nafter",
    "x\r\ny\r{% if true %}\r\nz{% endif %}\n\n",
    "{{ 'a' }}\n{{ 'b' }}\n",
    "{% if true %}\n{% endif %}\n{% if true %}x{% endif %}\n",
    "   {% if xs %}{% for x in xs %}\n   {{ x }},\n   {% endfor %}{% endif %}   \ntail",
    "{{- '<s>' }}\n{%- for x in xs %}\n    {{- x }}\n{%- endfor %}\n\n",
    # precedence and literals
    "{{ 2 * 3 ~ 4 }}|{{ 'a' ~ (1 + 2) }}|{{ not true == false }}|{{ true and false or 'z' }}|{{ 'x' if true else 'y' | upper }}|{{ 'x' if false else 'y' | upper }}|{{ 10 // 3 * 3 }}|{{ 2 * -1 }}",
    "{{ 1 + 2 ~ 3 }}",
    "{{ {'a': 1,}['a'] }}|{{ [1, 2,][1] }}|{{ 'abc'[1] }}|{{ [1, 2, 3][0:1] }}|{{ (xs | reverse | list)[0] }}|{{ range(3) | join(',') }}|{{ 1 +\n 2 }}",
    "{{ 'é' > 'z' }}{{ 'a' < 'aa' }}{{ (1, 2) < (1, 3) }}{{ missing == none }}{{ missing == missing_too }}{{ none is defined }}",
    "{% set l = [1, 2] %}{% set m = l %}{{ l is sameas m }}{{ [1, 2] is sameas l }}",
    "a\\nb {{ 1 }} \\{{ 2 }}",
    "a\u3000{%- if true %}b{% endif %}|c{% if true -%}\u2003\u00a0d{% endif %}",
    "{% set a = 5 %}{% with a = 1, b = a %}{{ a }}{{ b }}{% endwith %}{{ a }}",
    "{% macro m() %}{% set inner = 1 %}{{ inner }}{% endmacro %}{{ m() }}[{{ inner }}]",
    "{% for x in xs %}{% for y in [x] %}{{ loop.index }}{% endfor %}{{ loop.index }} {% endfor %}",
    "{% for x in xs if x != 1 %}{{ loop.previtem }}-{{ x }}-{{ loop.nextitem }} {% endfor %}",
    "{% macro m(a) %}{{ caller(a, b=2) }}{% endmacro %}{% call(x, b=0) m(1) %}{{ x }}{{ b }}{% endcall %}",
    "{{ 'abc' | batch(2) | list }}|{{ d | dictsort(reverse=true) }}|{{ xs | map('string') | join('+') }}",
    "{{ xs | join(foo=1) }}",
    "{{ msg.tool_calls | map(attribute='function.name') | list }}|{{ msg.tool_calls[0]['function']['arguments'] | items | list }}",
    # filters on undefined and None
    "[{{ missing | upper }}][{{ missing | lower }}][{{ missing | title }}][{{ missing | capitalize }}][{{ missing | escape }}][{{ missing | center(3) }}]",
    "[{{ missing | length }}][{{ missing | string }}][{{ missing | safe }}][{{ missing | items | list }}][{{ missing | map(attribute='x') | list }}][{{ missing | selectattr('x') | list }}]",
    "{{ missing | indent }}",
    "{{ missing | attr('x') }}",
    "[{{ missing | replace('a', 'b') }}][{{ missing | wordcount }}][{{ missing | first }}][{{ missing | join }}][{{ missing | list }}][{{ missing | unique | list }}][{{ missing | select | list }}]",
    "{{ missing | int }}",
    "{{ missing | float }}",
    "{{ missing | abs }}",
    "{{ missing | round }}",
    "{{ missing | last }}",
    "{{ missing | sort }}",
    "{{ missing | sum }}",
    "{{ missing | min }}",
    "{{ missing | dictsort }}",
    "{{ missing | batch(2) | list }}",
    "[{{ none | upper }}][{{ none | trim }}][{{ none | replace('N', 'n') }}][{{ none | e }}][{{ none | wordcount }}][{{ none | default('x') }}][{{ none | tojson }}][{{ none | title }}]",
    "{{ none | length }}",
    "{{ none | list }}",
    "{{ none | first }}",
    "{{ none | join }}",
    "{{ 5 | upper }}|{{ 1.5 | string }}|{{ true | lower }}|{{ [1] | trim }}",
    # syntax errors
    "{% if true %}unclosed",
    "{% for x in xs %}{% endif %}",
    "{% endfor %}",
    "{{ 1 + }}",
    "{{ x | nosuchfilter }}",
    "{{ x is nosuchtest }}",
    "{% nosuchtag %}",
    "{{ 'unterminated }}",
    "{{ (1, 2 }}",
    "{{ 1 ]}",
    "{% break %}",
    "{% macro m() %}{% break %}{% endmacro %}",
    "{% set 1 = 2 %}",
    "{{ }}",
    "{# unclosed comment",
    "{{ x",
    "{% extends 'base.html' %}",
    "{% include 'other.html' %}",
    "{{ a b }}",
    "{% if x is defined is defined %}{% endif %}",
]


def make_expressions():
    cases = []
    for source in SNIPPETS:
        case = {"template": source}
        try:
            case["expected"] = _compile_jinja_template(source).render(**CONTEXT)
        except Exception as error:
            case["error"] = True
            case["message"] = f"{type(error).__name__}: {error}"
        cases.append(case)
    return {"context": CONTEXT, "cases": cases}


def write(path, data):
    text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
    path.write_text(text, encoding="utf-8")
    print(f"{path.relative_to(ROOT)}: {len(data['cases'])} cases, {len(text.encode())} bytes")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    write(OUT / "renderings.json", make_renderings())
    write(OUT / "expressions.json", make_expressions())


if __name__ == "__main__":
    main()
