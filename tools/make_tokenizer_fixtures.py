#!/usr/bin/env python3
"""Writes the tokenizer test fixtures under tests/fixtures/tokenizer/ from Hugging Face tokenizers.

Pinned: tokenizers==0.23.2 (the reference). Ids come from tokenizers.Tokenizer.from_file on the
tokenizer.json itself, never from transformers' AutoTokenizer, which rebuilds DeepSeek's
pre-tokenizer differently. Run from anywhere:

    /work/refenv/bin/python tools/make_tokenizer_fixtures.py

Files written:
  deepseek_v3_encode.json   [{"text", "ids", "ids_with_special", "decoded",
                              "decoded_skip_special" (only where it differs)}]
      ids: Tokenizer.encode(text, add_special_tokens=False).ids. ids_with_special: [bos] + ids. The
      DeepSeek post-processor (ByteLevel) adds nothing; the BOS comes from tokenizer_config.json's
      add_bos_token, which transformers' LlamaTokenizerFast applies, so it is added here by hand.
      decoded: decode(ids, skip_special_tokens=False); decoded_skip_special: with True.
  deepseek_v3_decode.json   [{"ids", "decoded", "decoded_skip_special"}] for id sequences that
      are not encodings: random ids, byte tokens that split or break UTF-8 characters.
  pre_tokenizers.json       [{"pre_tokenizer": config, "cases": [{"text", "pieces"}]}]: pieces as
      pre_tokenize_str gives them (byte-level pieces spelled in the byte-level alphabet).
  tiny_bytelevel/tokenizer.json, tiny_bytelevel_encode.json: a byte-level BPE trained here with a
      different pre-tokenizer (merges as pairs, prefix spaces, Split behaviours, added tokens with
      lstrip/rstrip/single_word).
  tiny_charlevel/tokenizer.json, tiny_charlevel_encode.json: a character-level BPE without a
      decoder, with unk_token, fuse_unk, byte_fallback and ignore_merges.

It also writes src/tokenizer/unicode_sets.inc: the characters Hugging Face's Oniguruma (Unicode
16) puts in the general categories that tokenizer patterns use but that Unicode 14, which PCRE2
10.42 and this Python know, leaves unassigned (new emoji, CJK extensions H and I, new scripts),
and where its Punctuation pre-tokenizer (an older Unicode table) departs from Unicode 14.
"""

import json
import lzma
import os
import random
import sys
import unicodedata

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

PINNED_VERSION = "0.23.2"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Its tokenizer.json is kept xz-compressed, as tokenizer.json.xz (7.8 MB plain).
DEEPSEEK_DIR = os.path.join(ROOT, "tests/fixtures/tokenizers/deepseek-v3")
OUT_DIR = os.path.join(ROOT, "tests/fixtures/tokenizer")

PYTHON_CODE = '''def fib(n: int) -> int:
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


if __name__ == "__main__":
    print([fib(i) for i in range(10)])  # [0, 1, 1, 2, ...]
'''

CPP_CODE = '''#include <vector>
template <typename T>
T sum(const std::vector<T>& xs) {
\tT total{};
\tfor (const auto& x : xs) total += x;  // TODO: SIMD
\treturn total;
}
int main() { return sum(std::vector<int>{1, 2, 3}) == 6 ? 0 : 1; }
'''

JSON_CODE = ('{"model": "deepseek-v3", "layers": 61, "rope": {"type": "yarn", "factor": 40.0}, '
             '"ok": true, "x": null}')

HTML_CODE = '''<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Test &amp; check</title></head>
<body><p class="note">Hello,&nbsp;<b>world</b>!</p><!-- comment --></body></html>'''

CHAT = ("<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>What is 2+2?"
        "<｜Assistant｜><think>\nSimple arithmetic.\n</think>\n\n2 + 2 = 4.<｜end▁of▁sentence｜>")

TOOL_CALL = ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
             '{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>')

HAND_WRITTEN = [
    # English, contractions, casing
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "I don't think they'll've finished; it's what we'd hoped, isn't it?",
    "SHOUTING WORDS AND MiXeD cAsE",
    "She said \"hi\" and left.",
    "“Smart quotes”, ‘single ones’, «guillemets» and „German quotes“",
    "naïve café résumé coöperate",
    # European languages
    "Größenwahn über Äpfel, Öl und Übermut — die Straße ist schön.",
    "Donaudampfschifffahrtsgesellschaftskapitänsmütze",
    "L'été dernier, nous sommes allés à Noël ; c'était déjà ça, n'est-ce pas ?",
    "Привет, мир! Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Καλημέρα!",
    "Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Türkçe: İstanbul'da ılık bir gün.",
    # Right-to-left and Indic, South-East Asian
    "مرحبا بالعالم! هذا اختبار للمحلل.",
    "שלום עולם, זה מבחן.",
    "नमस्ते दुनिया, यह एक परीक्षण है।",
    "বাংলা ভাষা ১২৩",
    "สวัสดีชาวโลก นี่คือการทดสอบภาษาไทย",
    "Tiếng Việt có dấu: Xin chào thế giới",
    # CJK
    "안녕하세요 세계! 한국어 테스트입니다.",
    "こんにちは世界。カタカナとひらがなと漢字を混ぜる。",
    "東京タワーへ行こう！ラーメンを食べたい。",
    "你好，世界！我们正在测试分词器。",
    "這是繁體中文的測試，臺灣與香港都使用繁體字。",
    "「引用」『二重』【括弧】〈山括弧〉《书名》，。、；：？！……——～·",
    "中文English混合mixed文本text",
    "ｆｕｌｌ－ｗｉｄｔｈ　ＡＳＣＩＩ　１２３",
    "半角ｶﾀｶﾅ",
    # Emoji
    "👍 👍🏻 👍🏽 👍🏿",
    "👩‍👩‍👧‍👦 family, 👨🏿‍💻 coder, 🏳️‍🌈 flag",
    "🇺🇸🇯🇵🇩🇪🇫🇷🇨🇳",
    "❤️ ❤ ☺️ ✌️ 1️⃣ #️⃣",
    "😀😃😄😁😆😅🤣😂",
    "emoji at end 🎉",
    "🧑‍🤝‍🧑🫶🏽",
    # Code
    PYTHON_CODE,
    CPP_CODE,
    JSON_CODE,
    HTML_CODE,
    "SELECT id, name FROM users WHERE age >= 21 ORDER BY name DESC;",
    "x = [i**2 for i in range(10) if i % 2 == 0]",
    "fn main() { println!(\"{}\", 1 << 3); }",
    "$ ls -la | grep '.txt' > out.log && echo $?",
    "    indented four\n\tindented tab\n        indented eight",
    # Numbers
    "0", "7", "42", "123", "1234", "12345", "123456", "1234567", "12345678", "123456789",
    "1234567890123456789012345678901234567890",
    "3.14159265358979",
    "1,000,000 and 1.000.000 and 1 000 000 and 1'000'000",
    "-42 +17 ±3",
    "0x1F 0b1011 0o755 1e-9 6.02e23",
    "2024-01-15T12:34:56Z",
    "Call 555-0123 or +1 (555) 012-3456.",
    "١٢٣٤٥ ٦٧٨٩",
    "１２３４５",
    "²³ ½ ¾ Ⅻ ⅷ ①②③",
    "v1.2.3-beta+build.45",
    "100%",
    "$19.99 €5 £3 ¥1000",
    # White space
    "",
    " ",
    "  ",
    "     ",
    "\t",
    "\t\t\t",
    "\n",
    "\n\n\n",
    "\r\n",
    "\r\n\r\n",
    "a b",
    "a  b",
    "a   b",
    "a\tb",
    "a\t\tb",
    "a\nb",
    "a \n b",
    "trailing spaces   ",
    "   leading spaces",
    " \t \n \r\n mixed \t\n",
    "line one\nline two\r\nline three\rline four",
    "\u3000ideographic space",
    "no\u00a0break\u00a0space",
    "next\u0085line",
    "line\u2028separator\u2029paragraph",
    "zero\u200bwidth\u200cjoiners\u200d",
    "\ufeffBOM at start",
    "end with newline\n",
    "  \n",
    # Special tokens inside text
    "<｜User｜>hello<｜Assistant｜>",
    "<think>x</think>",
    "<think>\nLet me think.\n</think>\n\nAnswer.",
    "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>",
    "<｜User",
    "｜User｜>",
    "<｜User｜",
    "< ｜User｜>",
    "<<｜User｜>>",
    "<｜User｜><｜User｜>",
    "<｜User｜> <｜Assistant｜> ",
    " <｜User｜>",
    "hi<｜User｜>there<｜Assistant｜>",
    "<｜place▁holder▁no▁42｜>",
    "text<｜place▁holder▁no▁799｜>more",
    "<｜place▁holder▁no▁800｜>",
    "<|EOT|>",
    "<｜fim▁begin｜>def f():<｜fim▁hole｜>\n    return 1<｜fim▁end｜>",
    "<｜▁pad▁｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁output▁begin｜>{\"temp\": 21}<｜tool▁output▁end｜>",
    CHAT,
    TOOL_CALL,
    "<｜begin▁of▁sentence｜><｜begin▁of▁sentence｜>",
    "<s></s><unk>[INST]",
    # Long and repeated
    "Pneumonoultramicroscopicsilicovolcanoconiosis",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "a" * 300,
    "ab" * 150,
    "abc " * 60,
    "的" * 120,
    "😀" * 40,
    " " * 200,
    "-" * 120,
    "=" * 80,
    "!" * 50,
    "\n" * 40,
    "0" * 100,
    "hello" * 40,
    "ha" * 7 + "!",
    # URLs, e-mail, paths
    "https://www.example.com/path/to/page?query=1&lang=en#section-2",
    "http://localhost:8000/v1/chat/completions",
    "mailto:someone@example.org",
    "ftp://ftp.example.net/pub/file.tar.gz",
    "C:\\Users\\name\\Documents\\file.txt",
    "/usr/local/lib/python3.11/site-packages/",
    "@username #hashtag",
    # Math
    "∫₀^∞ e^{-x²} dx = √π/2",
    "E = mc²",
    "∀x∈ℝ: x² ≥ 0 ∧ ∃y: y ≠ x",
    "\\frac{a}{b} + \\sum_{i=1}^{n} i^2 = \\frac{n(n+1)(2n+1)}{6}",
    "α + β = γ; Δx → 0",
    "f(x) = 3x^2 - 2x + 1",
    "1/2 + 1/3 = 5/6",
    "matrix [[1, 2], [3, 4]]",
    # Punctuation and symbols
    "...!?;:,",
    "--- *** ___ ~~~",
    "(parentheses) [brackets] {braces} <angles>",
    "a.b.c,d;e:f",
    "'s 't 're 've 'm 'll 'd",
    "'S 'T 'RE",
    "it's John's dog's bone",
    "©®™ §¶ †‡ •",
    "→ ← ↑ ↓ ⇒ ⇔",
    "♠♣♥♦ ♩♪♫",
    # Combining marks and odd characters
    "e\u0301 a\u0308 n\u0303",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a"
    "\u032f\u031e\u0320\u034dalgo",
    "control\x01chars\x7fhere\x00",
    "tab\tseparated\tvalues\t1\t2",
    "ÅÄÖ åäö Ææ Øø",
    "ﬁ ﬂ ﬀ ligatures",
    "𝐁𝐨𝐥𝐝 𝕯𝖔𝖚𝖇𝖑𝖊 𝒮𝒸𝓇𝒾𝓅𝓉",
    "Ω Å K",
    "Ελληνικά και English μαζί",
    "日本語とEnglishと123の混在",
    "Mixed: Hello 世界 мир 🌍 123!",
    # Characters assigned after Unicode 14 (see src/tokenizer/unicode_sets.h)
    "love 🩷🩵 you",
    "🩷abc",
    "new emoji 🫨🪼🪿🫎🫏🪽🫚🛜 and 🫩🫆🪾🫜🪉🪏🫟",
    "x\U00031350y \U00031350\U00031351中",
    "\U0002EBF0\U0002EBF1 ext I",
    "Kawi \U00011F04\U00011F05\U00011F34\U00011F43",
    "Nag Mundari digits \U0001E4F0\U0001E4F1\U0001E4F2\U0001E4F3\U0001E4F4",
    "Garay \U00010D40\U00010D41\U00010D4A\U00010D4B",
    "a\u1c89b \ua7cb\ua7cc",
]


def random_strings(count, seed):
    """Seeded mixes of words, digits, white space, special tokens, characters from many blocks
    and, now and then, any code point at all (assigned or not, private use included)."""
    rng = random.Random(seed)
    blocks = [
        (0x20, 0x7E), (0xA0, 0x17F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF),
        (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F),
        (0x2190, 0x22FF), (0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF),
        (0x1F300, 0x1F64F), (0x1F900, 0x1F9FF), (0x0300, 0x036F),
    ]
    words = ["the", "and", "of", "tokenizer", "DeepSeek", "model", "数据", "模型", "テスト",
             "данные", "λόγος", "x", "I'm", "you're", "it'll", "don't"]
    specials = ["<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>", "<think>", "</think>",
                "<｜tool▁sep｜>", "<｜User"]
    spaces = [" ", "  ", "\t", "\n", "\r\n", " \n", "\u3000", "\u00a0"]

    def random_char():
        if rng.random() < 0.05:
            return chr(rng.choice([rng.randint(0, 0xD7FF), rng.randint(0xE000, 0x10FFFF)]))
        while True:
            low, high = rng.choice(blocks)
            c = chr(rng.randint(low, high))
            if unicodedata.category(c) not in ("Cn", "Cs", "Co"):
                return c

    result = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 12)):
            kind = rng.random()
            if kind < 0.3:
                parts.append(rng.choice(words))
            elif kind < 0.45:
                parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
            elif kind < 0.6:
                parts.append(rng.choice(spaces))
            elif kind < 0.67:
                parts.append(rng.choice(specials))
            else:
                parts.append("".join(random_char() for _ in range(rng.randint(1, 8))))
        result.append("".join(parts))
    return result


def dump(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        json.dump(value, out, ensure_ascii=False, separators=(",", ":"))
        out.write("\n")
    print(f"wrote {os.path.relpath(path, ROOT)} ({os.path.getsize(path)} bytes)")


def encode_cases(tokenizer, texts, bos_id=None):
    cases = []
    for text in texts:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        case = {"text": text, "ids": ids}
        if bos_id is not None:
            case["ids_with_special"] = [bos_id] + ids
        case["decoded"] = tokenizer.decode(ids, skip_special_tokens=False)
        skipped = tokenizer.decode(ids, skip_special_tokens=True)
        if skipped != case["decoded"]:
            case["decoded_skip_special"] = skipped
        cases.append(case)
    return cases


def deepseek_fixtures():
    with lzma.open(os.path.join(DEEPSEEK_DIR, "tokenizer.json.xz"), "rt", encoding="utf-8") as f:
        tokenizer = Tokenizer.from_str(f.read())
    with open(os.path.join(DEEPSEEK_DIR, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    assert config["add_bos_token"] is True
    bos_id = tokenizer.token_to_id(config["bos_token"]["content"])
    texts = list(dict.fromkeys(HAND_WRITTEN + random_strings(90, seed=20240521)))  # drop repeats
    dump(os.path.join(OUT_DIR, "deepseek_v3_encode.json"), encode_cases(tokenizer, texts, bos_id))

    rng = random.Random(7)
    vocab_size = tokenizer.get_vocab_size()
    sequences = [[rng.randrange(vocab_size) for _ in range(rng.randint(1, 12))] for _ in range(60)]
    # Byte tokens alone and in pairs: lone lead bytes, stray continuation bytes, cut characters.
    byte_ids = [tokenizer.token_to_id(c) for c in pre_tokenizers.ByteLevel.alphabet()]
    byte_ids = sorted(i for i in byte_ids if i is not None)
    sequences += [[rng.choice(byte_ids) for _ in range(rng.randint(1, 6))] for _ in range(40)]
    for text in ["😀👍🏽", "中文字", "é", "👩‍👩‍👧‍👦"]:
        ids = tokenizer.encode(text).ids
        sequences += [ids[:cut] for cut in range(1, len(ids))] + [ids[1:], ids[::-1]]
    sequences += [[0], [1, 0], [128803, 6366, 128804], [128000, 100, 128814], [vocab_size - 1]]
    cases = [{"ids": ids, "decoded": tokenizer.decode(ids, skip_special_tokens=False),
              "decoded_skip_special": tokenizer.decode(ids, skip_special_tokens=True)}
             for ids in sequences]
    dump(os.path.join(OUT_DIR, "deepseek_v3_decode.json"), cases)
    return texts


PRE_TOKENIZER_TEXTS = [
    "Hello, world! How are you?", "abc123def 4567 89", "  leading and trailing  ", "a,b;;c , d",
    "x*y**z", "axxbx", "don't stop-me now!!", "e\u0301t\u00e9 na\u0308ive", "tab\tand\nnew\r\nline",
    "中文，标点。", "١٢٣ ²³ Ⅻ", "emoji👍🏽here", "mixed\u00a0\u3000\u0085spaces", "", "....", "123",
    "old table: \u2e4c\u2e58\u166d\u111c9!", "Unicode 16: 🩷x\U00031350 \U00010D40\U00010D41",
    "word chars: \u24b6\u24b7 \u00b9\u00bc x\u2460",
]

SPLIT_BEHAVIORS = ["isolated", "removed", "merged_with_previous", "merged_with_next", "contiguous"]

PRE_TOKENIZER_CONFIGS = [
    pre_tokenizers.Whitespace(),
    pre_tokenizers.WhitespaceSplit(),
    pre_tokenizers.Digits(individual_digits=True),
    pre_tokenizers.Digits(individual_digits=False),
    pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False),
    pre_tokenizers.Sequence([pre_tokenizers.Digits(), pre_tokenizers.ByteLevel()]),
    pre_tokenizers.Split(",", "removed"),
    pre_tokenizers.Split("*", "isolated"),
    pre_tokenizers.Split(Regex(r"x*"), "isolated"),
    pre_tokenizers.Split(Regex(r"x*"), "removed"),
    pre_tokenizers.Split(Regex(r"\s*"), "merged_with_next"),
    pre_tokenizers.Split(Regex(r"^\w|\w$"), "isolated"),
    pre_tokenizers.Split(Regex(r"\s"), "isolated"),
    pre_tokenizers.Split(Regex(r"\w+"), "isolated", invert=True),
    pre_tokenizers.Split(Regex(r"\h+"), "isolated"),
    pre_tokenizers.Split(Regex(r"[\u4e00-\u9fa5]+|\p{P}"), "isolated"),
] + [
    pre_tokenizers.Split(Regex(r"[,;!.]"), behavior, invert=invert)
    for behavior in SPLIT_BEHAVIORS
    for invert in [False, True]
] + [pre_tokenizers.Punctuation(behavior) for behavior in SPLIT_BEHAVIORS]


def pre_tokenizer_fixtures():
    groups = []
    for pre_tokenizer in PRE_TOKENIZER_CONFIGS:
        # The JSON form of a pre-tokenizer is what a tokenizer.json holds.
        holder = Tokenizer(models.BPE())
        holder.pre_tokenizer = pre_tokenizer
        config = json.loads(holder.to_str())["pre_tokenizer"]
        cases = [{"text": text,
                  "pieces": [piece for piece, _ in pre_tokenizer.pre_tokenize_str(text)]}
                 for text in PRE_TOKENIZER_TEXTS]
        groups.append({"pre_tokenizer": config, "cases": cases})
    dump(os.path.join(OUT_DIR, "pre_tokenizers.json"), groups)


def tiny_bytelevel(corpus, texts):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\s*[,;]"), "merged_with_previous"),
        pre_tokenizers.Split(Regex(r"\d"), "contiguous"),
        pre_tokenizers.Split("||", "removed"),
        pre_tokenizers.Split(Regex(r"[A-Z]"), "merged_with_next"),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"])
    tokenizer.train_from_iterator(corpus, trainer)
    tokenizer.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True),
                                  AddedToken("[SEP]", rstrip=True, special=True),
                                  AddedToken("<｜User｜>", special=True, normalized=False)])
    tokenizer.add_tokens([AddedToken("hello world", single_word=True, normalized=True),
                          AddedToken("::", lstrip=True, rstrip=True, normalized=False),
                          AddedToken("the", single_word=True, normalized=False),
                          AddedToken("emoji👍", normalized=True)])
    path = os.path.join(OUT_DIR, "tiny_bytelevel/tokenizer.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tokenizer.save(path)
    tokenizer = Tokenizer.from_file(path)
    extra = ["a <mask> b", "a   <mask>b", "<mask><mask>", "x[SEP]   y", "[SEP]\n\nz", "hello world",
             "say hello world.", "xhello world", "hello worldly", "a :: b", "a::b", "  ::  ",
             "the theme then the", "<｜User｜>the", "emoji👍👍", "1,2;3 ,4", "a||b|||c",
             "CamelCaseWords", "ABC DEF", "<|endoftext|>end"]
    cases = encode_cases(tokenizer, texts + extra)
    dump(os.path.join(OUT_DIR, "tiny_bytelevel_encode.json"), cases)


def tiny_charlevel(corpus, texts):
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]", fuse_unk=True, byte_fallback=True,
                                     ignore_merges=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Punctuation("merged_with_previous"),
        pre_tokenizers.Digits(individual_digits=True),
    ])
    trainer = trainers.BpeTrainer(vocab_size=400, show_progress=False, limit_alphabet=60,
                                  special_tokens=["[UNK]", "[CLS]"])
    tokenizer.train_from_iterator(corpus, trainer)
    config = json.loads(tokenizer.to_str())
    vocab = config["model"]["vocab"]
    # Byte tokens for the bytes of two-byte characters only: Latin letters outside the trained
    # alphabet fall back to bytes, three- and four-byte characters (CJK, emoji) to [UNK].
    for byte in list(range(0x20, 0x7F)) + list(range(0x80, 0xE0)):
        vocab.setdefault(f"<0x{byte:02X}>", len(vocab))
    path = os.path.join(OUT_DIR, "tiny_charlevel/tokenizer.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        json.dump(config, out, ensure_ascii=False, indent=1)
    tokenizer = Tokenizer.from_file(path)
    extra = ["[CLS] hello [UNK]", "ŁÓDŹ żółw", "中文字 mixed é", "unknown🙂🙂 chars", "the"]
    cases = encode_cases(tokenizer, texts + extra)
    dump(os.path.join(OUT_DIR, "tiny_charlevel_encode.json"), cases)


def class_items(code_points):
    """PCRE2 class items for a set of code points: \\x{..} and \\x{..}-\\x{..}, as C++ literals."""
    ranges = []
    for c in sorted(code_points):
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    items = [f"\\\\x{{{low:x}}}" + (f"-\\\\x{{{high:x}}}" if high > low else "")
             for low, high in ranges]
    return ["".join(items[start:start + 4]) for start in range(0, len(items), 4)] or [""]


def matched_by(split, chars):
    remaining = set("".join(piece for piece, _ in split.pre_tokenize_str("".join(chars))))
    return {ord(c) for c in chars if c not in remaining}


def unicode_sets():
    """src/tokenizer/unicode_sets.inc: where Hugging Face's engines and Unicode 14 disagree."""
    every = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    unassigned = [c for c in every if unicodedata.category(c) == "Cn"]
    sets = {}
    # Oniguruma (Unicode 16) puts these characters, unassigned in Unicode 14, in general categories.
    for category in ["L", "M", "N", "Nd", "P", "S"]:
        split = pre_tokenizers.Split(Regex(rf"\p{{{category}}}"), "removed")
        sets[category] = matched_by(split, unassigned)
    # The Punctuation pre-tokenizer reads an older Unicode table than either engine.
    hf_punctuation = matched_by(pre_tokenizers.Punctuation("removed"), every)
    ascii_punctuation = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
    unicode_punctuation = {ord(c) for c in every
                           if unicodedata.category(c).startswith("P") or c in ascii_punctuation}
    sets["PunctuationExtra"] = hf_punctuation - unicode_punctuation
    sets["PunctuationMissing"] = unicode_punctuation - hf_punctuation
    unicode = unicodedata.unidata_version
    lines = [
        f"// Generated by tools/make_tokenizer_fixtures.py, tokenizers {tokenizers.__version__}.",
        f"// L, M, N, Nd, P, S: code points unassigned in Unicode {unicode} that its Oniguruma",
        "// puts in that general category. PunctuationExtra, PunctuationMissing: what its",
        "// Punctuation pre-tokenizer counts as punctuation beyond, and short of, P and ASCII",
        "// punctuation. Do not edit.",
    ]
    for name, code_points in sets.items():
        lines.append(f'{{"{name}",')
        lines += [f'  "{chunk}"' for chunk in class_items(code_points)]
        lines[-1] += "},"
    path = os.path.join(ROOT, "src/tokenizer/unicode_sets.inc")
    with open(path, "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    print(f"wrote {os.path.relpath(path, ROOT)} ({os.path.getsize(path)} bytes)")


def main():
    if tokenizers.__version__ != PINNED_VERSION:
        sys.exit(f"tokenizers {tokenizers.__version__} found; the fixtures need {PINNED_VERSION}")
    unicode_sets()
    texts = deepseek_fixtures()
    pre_tokenizer_fixtures()
    corpus = HAND_WRITTEN * 3
    tiny_bytelevel(corpus, texts[::3])
    tiny_charlevel(corpus, texts[1::3])


if __name__ == "__main__":
    main()
