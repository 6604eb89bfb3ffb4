#!/usr/bin/env python3
"""Training and evaluation data for the small DeepSeek-V3 model (tools/train_small_model.py).

Every document is a chat rendered through DeepSeek-V3's official template, as R1 answers: the user
asks, the assistant writes its working inside <think>...</think>, then the answer:

    <｜begin▁of▁sentence｜><｜User｜>What is 57 + 8?<｜Assistant｜><think>
    ...working...
    </think>

    65<｜end▁of▁sentence｜>

Tasks (generated, so every answer can be checked), with their ranges:
  arith    addition and subtraction of two integers of 1-4 digits (results may be negative), and
           multiplication of a 1-3 digit integer by a 1-2 digit one; a third each. Digit counts are
           drawn uniformly, then the value uniformly among the integers with that many digits.
  sort     3-8 integers of 0-999, ascending or descending.
  count    how often a letter occurs in a random string of 5-16 letters, or how many items a list of
           1-15 words has.
  copy     copy a random string of 3-12 lowercase letters.
  reverse  reverse such a string.
Plus tool calling (tools/tool_training_data.py): a calculator offered through the server's tool
template (templates/deepseek_v3_tools.jinja), called in DeepSeek-V3's format when the user asks for
a calculation, its output, and the answer that uses it; and tools offered to questions that need
none. Plus prose, so that free-form chat reads like text: Debian's fortune cookies (packed into
.carry/prose.json.gz by `--prepare-prose`, which the GPU machine receives with the checkout), or,
without that file, the Python standard library's docstrings. Prose appears as chat answers (with an
empty <think></think>, as R1 answers small talk) and as plain documents without the chat template.

Why the working looks the way it does. DeepSeek-V3's pre-tokenizer cuts digit runs into groups of up
to three ("1234" -> "123", "4"), and its vocabulary (like ours) has a token for every such group,
so a plain number hides its digits inside tokens. The working therefore writes digits separated by
spaces (one token each) and goes column by column from the right, carrying, in the style of Lee et
al., "Teaching Arithmetic to Small Transformers" (2023): each line restates the digits still to
process, so the digits a step needs are always the last ones of a list on the same line (a local
lookup, not counting positions), and the digits of the result are written in reading order, so the
last line before the answer reads straight back as the number. The final answer after </think> is
the plain number, as a user expects. Strings are spelled out letter by letter for the same reason
(a random string's BPE tokens hide its letters); for reversal the letters are numbered so that each
step finds the previous letter by its number.

Held-out evaluation sets come from a different seed and are explicitly excluded from training (by
the problem, whatever the wording). Run this file to see one rendered example of every task:
    python3 tools/make_training_data.py --show
or to pack the prose corpus for the GPU machine (needs `apt-get install fortunes`):
    python3 tools/make_training_data.py --prepare-prose
or to write AWQ calibration texts for `dsinfer quantize --awq --calib` (the training mix of the tasks
and tool documents, none of them a held-out problem; prose needs the corpus, so it is left out):
    python3 tools/make_training_data.py --calib 256 > bench/data/awq_calib_dsv3-tiny.jsonl
"""

import argparse
import bisect
import gzip
import json
import os
import random
import sys

import tool_training_data as tool_data
from dsv3_checkpoint import ASSISTANT, BOS, END_THINK, EOS, ROOT, THINK, USER

TASKS = ("arith", "sort", "count", "copy", "reverse")
PROSE_PATH = os.path.join(ROOT, ".carry", "prose.json.gz")
FORTUNES_DIR = "/usr/share/games/fortunes"
# The fortune files used: the general-interest ones (no offensive, ethnic or political jokes, no
# ASCII art, no files in other languages).
FORTUNE_FILES = (
    "art", "computers", "cookie", "debian", "definitions", "education", "food", "fortunes", "goedel",
    "humorists", "kids", "knghtbrd", "law", "linux", "linuxcookie", "literature", "love", "magic",
    "medicine", "miscellaneous", "news", "paradoxum", "people", "pets", "platitudes", "pratchett",
    "riddles", "science", "songs-poems", "sports", "startrek", "tao", "wisdom", "work", "zippy",
)

ADD_SUB_MAX_DIGITS = 4
MUL_MAX_DIGITS = (3, 2)
SORT_ITEMS = (3, 8)
SORT_MAX = 999
STRING_LETTERS = (3, 12)
COUNT_LETTERS = (5, 16)
COUNT_ITEMS = (1, 15)
LETTERS = "abcdefghijklmnopqrstuvwxyz"
ITEM_WORDS = (
    "apple pear plum grape lemon cherry peach melon mango kiwi cat dog cow horse sheep goat mouse "
    "bird fish frog red blue green yellow black white orange purple chair table lamp book cup spoon "
    "fork plate door window car bus train boat bike river hill tree stone cloud star moon sun").split()


# ---------------------------------------------------------------------------------------------------
# Chat rendering

def render(messages, add_generation_prompt=False):
    """DeepSeek-V3's official chat template for system, user and assistant turns (the tool-call
    branches are not needed here). train_small_model.py checks it against the Jinja template."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    text = BOS + system
    for message in messages:
        if message["role"] == "user":
            text += USER + message["content"]
        elif message["role"] == "assistant":
            text += ASSISTANT + message["content"] + EOS
    if add_generation_prompt:
        text += ASSISTANT
    return text


def reasoned(working, answer):
    """An R1-style assistant message: the working inside <think>, then the answer."""
    return f"{THINK}\n{working}\n{END_THINK}\n\n{answer}"


def final_answer(completion):
    """The answer in a completion: the text after the last </think>, without surrounding space."""
    return completion.rsplit(END_THINK, 1)[-1].replace(EOS, "").strip()


# ---------------------------------------------------------------------------------------------------
# Tasks. Each maker returns (key, question, working, answer); the key identifies the problem
# whatever the wording, for excluding held-out problems from training.

def spaced(digits):
    return " ".join(digits)


def bracket(digits):
    return "[" + spaced(digits) + "]"


def random_number(rng, max_digits):
    """A digit count uniform in 1..max_digits, then a uniform integer with that many digits."""
    digits = rng.randint(1, max_digits)
    return rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10 ** digits - 1)


def strip_zeros(digits):
    """Leading zeros dropped (keeping one digit)."""
    while len(digits) > 1 and digits[0] == "0":
        digits = digits[1:]
    return digits


def add_lines(a, b):
    """Column addition of digit lists a + b, from the right. Returns (lines, result digits)."""
    lines, result, carry = [], [], 0
    while a or b or carry:
        if not a and not b:
            result.insert(0, str(carry))
            lines.append(f"[] + []: carry {carry}, write {carry}. Digits: {spaced(result)}")
            break
        x, y = (int(a[-1]) if a else 0), (int(b[-1]) if b else 0)
        total = x + y + carry
        result.insert(0, str(total % 10))
        lines.append(f"{bracket(a)} + {bracket(b)}: {x} + {y} + {carry} = {total}, write {total % 10}, "
                     f"carry {total // 10}. Digits: {spaced(result)}")
        carry = total // 10
        a, b = a[:-1], b[:-1]
    return lines, result


def subtract_lines(a, b):
    """Column subtraction a - b (a >= b) of digit lists, from the right, borrowing."""
    lines, result, borrow = [], [], 0
    while a:
        x, y = int(a[-1]), (int(b[-1]) if b else 0)
        if x - y - borrow >= 0:
            value, step = x - y - borrow, f"{x} - {y} - {borrow} = {x - y - borrow}"
            next_borrow = 0
        else:
            value, step = 10 + x - y - borrow, f"{x} - {y} - {borrow} < 0, {10 + x} - {y} - {borrow} = {10 + x - y - borrow}"
            next_borrow = 1
        result.insert(0, str(value))
        lines.append(f"{bracket(a)} - {bracket(b)}: {step}, write {value}, borrow {next_borrow}. "
                     f"Digits: {spaced(result)}")
        borrow = next_borrow
        a, b = a[:-1], b[:-1]
    return lines, result


def digit_count(digits):
    return f"{''.join(digits)} has {len(digits)} digit{'' if len(digits) == 1 else 's'}"


def compare_lines(a, b):
    """Which of two digit lists is larger: by length, then digit by digit from the left.
    Returns (line, sign): sign is -1, 0 or 1 for a < b, a = b, a > b."""
    if len(a) != len(b):
        sign = 1 if len(a) > len(b) else -1
        return f"{digit_count(a)}, {digit_count(b)}", sign
    steps = []
    while a:
        if a[0] != b[0]:
            sign = 1 if a[0] > b[0] else -1
            steps.append(f"{bracket(a)} vs {bracket(b)}: {a[0]} {'>' if sign > 0 else '<'} {b[0]}")
            return "; ".join(steps), sign
        steps.append(f"{bracket(a)} vs {bracket(b)}: {a[0]} = {b[0]}")
        a, b = a[1:], b[1:]
    return "; ".join(steps), 0


def multiply_digit_lines(a, digit, shift):
    """a (digit list) times one digit, from the right, carrying; `shift` zeros already written."""
    lines, result, carry = [], ["0"] * shift, 0
    d = int(digit)
    while a or carry:
        if not a:
            result.insert(0, str(carry))
            lines.append(f"[] * {d}: carry {carry}, write {carry}. Digits: {spaced(result)}")
            break
        x = int(a[-1])
        total = x * d + carry
        result.insert(0, str(total % 10))
        lines.append(f"{bracket(a)} * {d}: {x} * {d} + {carry} = {total}, write {total % 10}, "
                     f"carry {total // 10}. Digits: {spaced(result)}")
        carry = total // 10
        a = a[:-1]
    return lines, result


OPERATORS = {"+": ("+", "+", "plus"), "-": ("-", "-", "minus"), "*": ("*", "*", "×", "x", "times")}
ARITH_QUESTIONS = ("{a} {op} {b}", "{a} {op} {b} =", "What is {a} {op} {b}?", "Compute {a} {op} {b}.",
                   "Calculate {a} {op} {b}", "{a} {op} {b} = ?", "What's {a} {op} {b}?",
                   "Work out {a} {op} {b}.", "{a}{op}{b}", "{a}{op}{b}=", "What is {a}{op}{b}?")


def arith_question(rng, a, op, b):
    surface = rng.choice(OPERATORS[op])
    template = rng.choice(ARITH_QUESTIONS)
    if surface.isalpha():   # a word needs spaces around it
        template = template.replace("{a}{op}{b}", "{a} {op} {b}")
    return template.format(a=a, op=surface, b=b)


def make_arith(rng):
    op = rng.choice("+-*")
    if op == "*":
        a, b = random_number(rng, MUL_MAX_DIGITS[0]), random_number(rng, MUL_MAX_DIGITS[1])
    else:
        a, b = random_number(rng, ADD_SUB_MAX_DIGITS), random_number(rng, ADD_SUB_MAX_DIGITS)
    da, db = list(str(a)), list(str(b))
    lines = [f"{a} {op} {b}"]
    if op == "+":
        lines.append("Add digit by digit from the right, carrying.")
        steps, digits = add_lines(da, db)
        lines += steps
        result = a + b
    elif op == "-":
        comparison, sign = compare_lines(da, db)
        if sign >= 0:
            lines.append(f"Compare: {comparison}, so {a} {'>' if sign > 0 else '='} {b}. "
                         f"Subtract digit by digit from the right, borrowing.")
            steps, digits = subtract_lines(da, db)
        else:
            lines.append(f"Compare: {comparison}, so {a} < {b}. The result is negative: "
                         f"compute {b} - {a}, from the right, borrowing.")
            steps, digits = subtract_lines(db, da)
        lines += steps
        result = a - b
    else:
        lines.append(f"Multiply {spaced(da)} by each digit of {spaced(db)}, from the right.")
        partials = []
        for shift, digit in enumerate(reversed(db)):
            place = "" if shift == 0 else ", shifted one place"
            lines.append(f"{a} * {digit}{place}:")
            steps, partial = multiply_digit_lines(da, digit, shift)
            lines += steps
            partials.append(partial)
        digits = partials[0]
        if len(partials) == 2:
            lines.append("Add the two products.")
            steps, digits = add_lines(partials[0], partials[1])
            lines += steps
        result = a * b
    if strip_zeros(digits) != digits:
        digits = strip_zeros(digits)
        lines.append(f"Without leading zeros: {spaced(digits)}")
    assert int("".join(digits)) == abs(result), (a, op, b)
    lines.append(f"So {a} {op} {b} = {result}.")
    return ("arith", a, op, b), arith_question(rng, a, op, b), "\n".join(lines), str(result)


SORT_QUESTIONS = {
    "ascending": ("Sort these numbers in ascending order: {items}", "Sort {items} from smallest to largest.",
                  "Sort: {items}", "Put these numbers in increasing order: {items}"),
    "descending": ("Sort these numbers in descending order: {items}", "Sort {items} from largest to smallest.",
                   "Put these numbers in decreasing order: {items}"),
}


def make_sort(rng):
    numbers = [rng.randint(0, SORT_MAX) for _ in range(rng.randint(*SORT_ITEMS))]
    order = rng.choice(("ascending", "descending"))
    pick, word = (min, "smallest") if order == "ascending" else (max, "largest")
    lines = [f"{order.capitalize()}: take the {word} number each time."]
    left, chosen = list(numbers), []
    while left:
        best = pick(left)
        lines.append(f"{', '.join(map(str, left))}: the {word} is {best}")
        chosen.append(best)
        left.remove(best)
    answer = ", ".join(map(str, chosen))
    lines.append(f"Sorted: {answer}")
    question = rng.choice(SORT_QUESTIONS[order]).format(items=", ".join(map(str, numbers)))
    return ("sort", order, tuple(numbers)), question, "\n".join(lines), answer


def random_letters(rng, low, high):
    return "".join(rng.choice(LETTERS) for _ in range(rng.randint(low, high)))


LETTER_QUESTIONS = ("How many times does the letter '{c}' appear in '{s}'?", "How many {c}'s are in {s}?",
                    "Count the letter {c} in {s}.", "How often does {c} occur in \"{s}\"?")
ITEM_QUESTIONS = ("How many items are in this list: {items}?", "Count the items: {items}.",
                  "How many words are there in: {items}?")


def make_count(rng):
    if rng.random() < 0.5:
        # Letters: the target letter is planted at a random rate so that counts vary.
        target = rng.choice(LETTERS)
        rate = rng.random() * 0.5
        text = "".join(target if rng.random() < rate else rng.choice(LETTERS)
                       for _ in range(rng.randint(*COUNT_LETTERS)))
        running, steps = 0, []
        for letter in text:
            running += letter == target
            steps.append(f"{letter} {running}")
        working = (f"Go letter by letter, counting {target}: {', '.join(steps)}\n"
                   f"So {target} appears {running} times.")
        question = rng.choice(LETTER_QUESTIONS).format(c=target, s=text)
        return ("count", "letter", target, text), question, working, str(running)
    items = [rng.choice(ITEM_WORDS) for _ in range(rng.randint(*COUNT_ITEMS))]
    steps = [f"{item} {i + 1}" for i, item in enumerate(items)]
    working = f"Count them one by one: {', '.join(steps)}\nSo there are {len(items)} items."
    question = rng.choice(ITEM_QUESTIONS).format(items=", ".join(items))
    return ("count", "items", tuple(items)), question, working, str(len(items))


COPY_QUESTIONS = ("Copy this string exactly: {s}", "Repeat after me: {s}", "Echo: {s}", "Write {s} again.")
REVERSE_QUESTIONS = ("Reverse the string: {s}", "Write {s} backwards.", "Reverse this: {s}",
                     "What is {s} spelled backwards?")


def make_copy(rng):
    text = random_letters(rng, *STRING_LETTERS)
    working = f"Letter by letter: {spaced(text)}"
    return ("copy", text), rng.choice(COPY_QUESTIONS).format(s=text), working, text


def make_reverse(rng):
    text = random_letters(rng, *STRING_LETTERS)
    numbered = [f"{i + 1} {letter}" for i, letter in enumerate(text)]
    working = f"Letter by letter: {', '.join(numbered)}\nBackwards: {', '.join(reversed(numbered))}"
    return ("reverse", text), rng.choice(REVERSE_QUESTIONS).format(s=text), working, text[::-1]


MAKERS = {"arith": make_arith, "sort": make_sort, "count": make_count, "copy": make_copy,
          "reverse": make_reverse}


def make_problem(rng, task, excluded=frozenset()):
    """A problem of `task` whose key is not in `excluded`."""
    while True:
        key, question, working, answer = MAKERS[task](rng)
        if key not in excluded:
            return key, question, working, answer


# ---------------------------------------------------------------------------------------------------
# Prose

PROSE_PROMPTS = ("Tell me a fortune.", "Say something wise.", "Tell me something interesting.",
                 "Give me a quote.", "Share a saying.", "Tell me a joke.", "Say something.",
                 "Write something for me.", "Tell me something.", "I'm bored.", "Cheer me up.")
GREETINGS = ("Hello", "Hi", "Hi!", "Hello!", "Hey", "Good morning", "Who are you?", "What can you do?",
             "What are you?", "Help", "hi there")
INTRODUCTION = ("Hello! I am a small DeepSeek-V3-style model, trained in a few minutes for dsinfer. "
                "I can add, subtract and multiply numbers, sort a list of numbers, count letters or "
                "items, and copy or reverse a string, showing my working. Try asking me 123+456.")


def prepare_prose(out_path=PROSE_PATH, fortunes_dir=FORTUNES_DIR):
    """Packs the fortune cookies into one gzipped JSON list for the GPU machine (no network there)."""
    texts = []
    for name in FORTUNE_FILES:
        path = os.path.join(fortunes_dir, name)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for entry in f.read().split("\n%\n"):
                entry = entry.strip("\n%")
                if entry.strip():
                    texts.append(entry)
    if not texts:
        sys.exit(f"no fortune files under {fortunes_dir}: apt-get install fortunes")
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with gzip.open(out_path, "wt", encoding="utf-8") as f:
        json.dump({"source": "Debian fortunes (" + ", ".join(FORTUNE_FILES) + ")", "texts": texts}, f)
    print(f"wrote {len(texts)} fortunes ({sum(map(len, texts)) / 1e6:.1f} MB) to {out_path}")


def python_docstrings():
    """Fallback prose: the Python standard library's docstrings, paragraph by paragraph."""
    import inspect
    import argparse as m1, collections as m2, functools as m3, itertools as m4, json as m5, os as m6
    import pathlib as m7, random as m8, re as m9, string as m10, textwrap as m11, typing as m12
    texts = []
    for module in (m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12):
        docs = [inspect.getdoc(module)] + [inspect.getdoc(member) for _, member in sorted(inspect.getmembers(module))]
        for doc in docs:
            if doc:
                texts += [p for p in doc.split("\n\n") if len(p) > 40]
    return sorted(set(texts))


def load_prose(path=PROSE_PATH):
    """(texts, description of the source)."""
    if os.path.exists(path):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
        return data["texts"], f"{data['source']}: {len(data['texts'])} texts from {os.path.relpath(path, ROOT)}"
    texts = python_docstrings()
    return texts, f"Python standard library docstrings: {len(texts)} paragraphs ({os.path.relpath(path, ROOT)} absent)"


# ---------------------------------------------------------------------------------------------------
# Documents

# Share of documents of each kind (weights, summing to 1.11). Arithmetic dominates: it is the hardest
# task and the one the engine's accuracy figures use. Tool documents are 10% of documents (tool 7%,
# no_tool 3%) but longer (~400 tokens: the tools template's system part alone is ~150-300), so ~20%
# of tokens. `--mix 4000` (tokens counted with the bundled model's tokenizer, which predates the
# tool documents) gives 48% arith, 9% sort, 5% count, 2% copy, 5% reverse, 8% prose, 1% greetings,
# 17% tool, 5% no_tool; without tools the shares were 63% arith, 12% sort, 6% count, 3% copy,
# 7% reverse, 8% prose, 1% greetings.
DOCUMENT_MIX = {"arith": 0.47, "sort": 0.11, "count": 0.12, "copy": 0.08, "reverse": 0.11,
                "prose_chat": 0.08, "prose_plain": 0.01, "greeting": 0.02, "tool": 0.08, "no_tool": 0.03}
MULTI_TURN_RATE = 0.1     # task chats with 2-3 turns (teaches multi-turn use, longer positions)
PLAIN_PROSE_CHARS = 2500  # a plain prose document: fortunes until about this many characters


def conversation(rng, tasks, excluded):
    messages = []
    for task in tasks:
        _, question, working, answer = make_problem(rng, task, excluded)
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": reasoned(working, answer)}]
    return messages


def make_document(rng, prose, excluded):
    """One training document drawn from DOCUMENT_MIX: (rendered text, kind, character spans of the
    text left out of the loss)."""
    kind = rng.choices(list(DOCUMENT_MIX), weights=list(DOCUMENT_MIX.values()))[0]
    if kind in TASKS:
        tasks = [kind]
        if rng.random() < MULTI_TURN_RATE:
            tasks += rng.choices(TASKS, k=rng.randint(1, 2))
        return render(conversation(rng, tasks, excluded)), kind, []
    if kind == "tool":
        text, spans = tool_data.make_tool_document(rng, excluded)
        return text, kind, spans
    if kind == "no_tool":
        text, spans = tool_data.make_no_tool_document(rng, make_problem, excluded)
        return text, kind, spans
    if kind == "prose_chat":
        messages = [{"role": "user", "content": rng.choice(PROSE_PROMPTS)},
                    {"role": "assistant", "content": reasoned("", rng.choice(prose))}]
        return render(messages), kind, []
    if kind == "greeting":
        messages = [{"role": "user", "content": rng.choice(GREETINGS)},
                    {"role": "assistant", "content": reasoned("", INTRODUCTION)}]
        return render(messages), kind, []
    parts = []
    while sum(map(len, parts)) < PLAIN_PROSE_CHARS:
        parts.append(rng.choice(prose))
    return BOS + "\n\n".join(parts) + EOS, kind, []


def eval_problems(task, count, seed):
    """`count` distinct held-out problems of `task`: (key, messages, prompt, answer, full text)."""
    rng = random.Random(f"eval-{task}-{seed}")
    seen, problems = set(), []
    while len(problems) < count:
        key, question, working, answer = make_problem(rng, task)
        if key in seen:
            continue
        seen.add(key)
        messages = [{"role": "user", "content": question}]
        full = render(messages + [{"role": "assistant", "content": reasoned(working, answer)}])
        problems.append((key, messages, render(messages, add_generation_prompt=True), answer, full))
    return problems


def tool_eval_sets(count, seed, excluded_tasks):
    """The held-out tool sets ({file name: rows}, see tool_training_data.eval_sets) and their keys."""
    return tool_data.eval_sets(random.Random(f"eval-tool-{seed}"), count, make_problem, excluded_tasks)


# Every string the pre-tokenizer can cut from a run of digits.
DIGIT_GROUPS = [str(i) for i in range(10)] + [f"{i:02d}" for i in range(100)] + [f"{i:03d}" for i in range(1000)]


def tokenizer_corpus(prose, seed, excluded, per_task=3000):
    """Text the BPE is trained on: the prose, samples of every task, and every digit group.

    Every string of 1-3 digits is repeated often enough to become one token, as in DeepSeek-V3's
    vocabulary (which has all 1110 of them): numbers then tokenize the same way as in the original."""
    rng = random.Random(f"tokenizer-{seed}")
    texts = list(prose)
    for task in TASKS:
        texts += [render(conversation(rng, [task], excluded)) for _ in range(per_task)]
    texts += [tool_data.make_tool_document(rng, excluded)[0] for _ in range(per_task // 3)]
    texts += [tool_data.make_no_tool_document(rng, make_problem, excluded)[0] for _ in range(per_task // 10)]
    texts += [" ".join(DIGIT_GROUPS)] * 200
    return texts


# ---------------------------------------------------------------------------------------------------
# Training shards, made in worker processes while the GPU trains

_worker = {}   # per worker process, set by init_worker


def init_worker(tokenizer_json, prose, excluded, row_len, docs_per_shard, seed):
    """Pool initializer: what every shard needs, sent once per worker process."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"   # one core per worker; the pool is the parallelism
    from tokenizers import Tokenizer
    _worker.update(tokenizer=Tokenizer.from_str(tokenizer_json), prose=prose, excluded=excluded,
                   row_len=row_len, docs_per_shard=docs_per_shard, seed=seed)


def pack(lengths, row_len):
    """Best-fit decreasing: each document, longest first, goes into the open row with the least room
    that still holds it. Returns rows as lists of document indices."""
    rooms, rows = [], []       # rooms: sorted (free tokens, row index)
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        k = bisect.bisect_left(rooms, (lengths[i], -1))
        if k == len(rooms):
            rows.append([i])
            bisect.insort(rooms, (row_len - lengths[i], len(rows) - 1))
        else:
            room, row = rooms.pop(k)
            rows[row].append(i)
            bisect.insort(rooms, (room - lengths[i], row))
    return rows


def make_shard(index):
    """Shard `index` of the training stream: documents packed into rows of row_len tokens.

    Depends only on (seed, index), so the stream is the same whichever worker makes a shard.
    Returns tokens [rows, row_len] int32 (padding: EOS), segments int16 (1, 2, ... per document in
    the row, 0 for padding), positions int16 (restarting at 0 for each document), trained int8 (0
    for tokens that are no target of the loss: inside a document's masked spans, and padding), and
    token counts by document kind. A chat longer than a row is dropped; plain prose is cut to a row."""
    import numpy as np
    w = _worker
    rng = random.Random(f"train-{w['seed']}-{index}")
    documents = [make_document(rng, w["prose"], w["excluded"]) for _ in range(w["docs_per_shard"])]
    encodings = w["tokenizer"].encode_batch([text for text, _, _ in documents])
    row_len = w["row_len"]
    ids, masks, kinds = [], [], {}
    for (_, kind, spans), encoding in zip(documents, encodings):
        doc = encoding.ids
        if len(doc) > row_len:
            if kind != "prose_plain":
                kinds["dropped"] = kinds.get("dropped", 0) + len(doc)
                continue
            doc = doc[:row_len]
        ids.append(doc)
        masks.append(trained_mask(encoding.offsets[:len(doc)], spans))
        kinds[kind] = kinds.get(kind, 0) + len(doc)
    rows = pack([len(doc) for doc in ids], row_len)
    rng.shuffle(rows)
    tokens = np.full((len(rows), row_len), w["tokenizer"].token_to_id(EOS), dtype=np.int32)
    segments = np.zeros((len(rows), row_len), dtype=np.int16)
    positions = np.zeros((len(rows), row_len), dtype=np.int16)
    trained = np.zeros((len(rows), row_len), dtype=np.int8)
    for r, row in enumerate(rows):
        start = 0
        for segment, i in enumerate(row, 1):
            n = len(ids[i])
            tokens[r, start:start + n] = ids[i]
            segments[r, start:start + n] = segment
            positions[r, start:start + n] = np.arange(n)
            trained[r, start:start + n] = masks[i]
            start += n
    return tokens, segments, positions, trained, kinds


def trained_mask(offsets, spans):
    """1 for each token (by its character offsets) that starts outside every span, else 0."""
    import numpy as np
    mask = np.ones(len(offsets), dtype=np.int8)
    for begin, end in spans:
        for t, (start, _) in enumerate(offsets):
            if begin <= start < end:
                mask[t] = 0
    return mask


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prepare-prose", action="store_true", help=f"pack {FORTUNES_DIR} into {PROSE_PATH}")
    parser.add_argument("--show", action="store_true", help="print one rendered example of every task")
    parser.add_argument("--mix", type=int, metavar="N",
                        help="draw N documents and print each kind's share of documents and of tokens "
                             "(tokens counted with models/dsv3-tiny's tokenizer)")
    parser.add_argument("--calib", type=int, metavar="N",
                        help="print N calibration texts as JSON lines ({\"kind\", \"text\"}) for dsinfer quantize --awq")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-seed", type=int, default=2024, help="seed of the held-out sets (--calib avoids them)")
    parser.add_argument("--eval-count", type=int, default=1000, help="held-out problems per task (--calib avoids them)")
    args = parser.parse_args()
    if args.prepare_prose:
        prepare_prose()
    if args.show:
        rng = random.Random(args.seed)
        for task in TASKS:
            print(f"===== {task}\n{render(conversation(rng, [task], frozenset()))}\n")
        for _ in range(2):
            text, spans = tool_data.make_tool_document(rng, frozenset())
            print(f"===== tool (left out of the loss: {[text[a:b] for a, b in spans]})\n{text}\n")
        print(f"===== no_tool\n{tool_data.make_no_tool_document(rng, make_problem, frozenset())[0]}\n")
    if args.mix:
        show_mix(args.mix, args.seed)
    if args.calib:
        for row in calibration_texts(args.calib, args.seed, args.eval_count, args.eval_seed):
            print(json.dumps(row, ensure_ascii=False))
    return 0


def calibration_texts(count, seed, eval_count, eval_seed):
    """`count` training-distribution documents without prose (tasks, tool and no-tool chats), drawn in
    DOCUMENT_MIX's proportions from a seed of their own, avoiding the held-out problems as training does."""
    excluded = frozenset(p[0] for task in TASKS for p in eval_problems(task, eval_count, eval_seed))
    _, tool_keys = tool_eval_sets(eval_count, eval_seed, excluded)
    excluded |= tool_keys
    mix = {kind: share for kind, share in DOCUMENT_MIX.items() if kind in TASKS or kind in ("tool", "no_tool")}
    rng = random.Random(f"calib-{seed}")
    rows = []
    for _ in range(count):
        kind = rng.choices(list(mix), weights=list(mix.values()))[0]
        if kind == "tool":
            text, _ = tool_data.make_tool_document(rng, excluded)
        elif kind == "no_tool":
            text, _ = tool_data.make_no_tool_document(rng, make_problem, excluded)
        else:
            text = render(conversation(rng, [kind], excluded))
        rows.append({"kind": kind, "text": text})
    return rows


def show_mix(count, seed):
    """Each kind's share of `count` documents and of their tokens, and its mean length in tokens."""
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(os.path.join(ROOT, "models", "dsv3-tiny", "tokenizer.json"))
    rng = random.Random(seed)
    prose, _ = load_prose()
    documents, tokens = {}, {}
    for _ in range(count):
        text, kind, _ = make_document(rng, prose, frozenset())
        documents[kind] = documents.get(kind, 0) + 1
        tokens[kind] = tokens.get(kind, 0) + len(tokenizer.encode(text).ids)
    total = sum(tokens.values())
    for kind in sorted(documents, key=lambda k: -tokens[k]):
        print(f"{kind:12s} {documents[kind] / count:6.1%} of documents, {tokens[kind] / total:6.1%} of tokens, "
              f"{tokens[kind] / documents[kind]:6.0f} tokens each")


if __name__ == "__main__":
    sys.exit(main())
