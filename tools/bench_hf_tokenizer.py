#!/usr/bin/env python3
"""The anchor for bench/tokenizer_bench.cc: Hugging Face tokenizers (Rust) on the same text.

Builds the same ~1 MiB text as the C++ benchmark (the DeepSeek-V3 encode fixture strings,
newline-joined, repeated to 1 MiB), times Tokenizer.encode and decode on one thread, and writes
the figures as JSON for tokenizer_bench --anchor. Pinned: tokenizers==0.23.2.

    RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false /work/refenv/bin/python \\
        tools/bench_hf_tokenizer.py --out /tmp/hf_anchor.json
"""

import argparse
import json
import lzma
import os
import statistics
import time

# Before tokenizers loads: one thread, as the C++ side.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

TEXT_BYTES = 1 << 20
RUNS = 7


def benchmark_text(fixtures):
    with open(fixtures, encoding="utf-8") as f:
        cases = json.load(f)
    text = ""
    while len(text.encode("utf-8")) < TEXT_BYTES:
        text += "".join(case["text"] + "\n" for case in cases)
    return text


def load_tokenizer(model):
    """MODEL/tokenizer.json, or MODEL/tokenizer.json.xz where it is kept compressed (the default
    model, tests/fixtures/tokenizers/deepseek-v3)."""
    path = os.path.join(model, "tokenizer.json")
    if os.path.exists(path):
        return Tokenizer.from_file(path)
    with lzma.open(path + ".xz", "rt", encoding="utf-8") as f:
        return Tokenizer.from_str(f.read())


def median_seconds(work):
    """Median thread CPU seconds of RUNS calls after one untimed call, as tokenizer_bench times."""
    work()
    seconds = []
    for _ in range(RUNS):
        start = time.thread_time()
        work()
        seconds.append(time.thread_time() - start)
    return statistics.median(seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tests/fixtures/tokenizers/deepseek-v3")
    parser.add_argument("--fixtures", default="tests/fixtures/tokenizer/deepseek_v3_encode.json")
    parser.add_argument("--out", help="also write the JSON here, for tokenizer_bench --anchor")
    args = parser.parse_args()

    text = benchmark_text(args.fixtures)
    megabytes = len(text.encode("utf-8")) / 1e6
    tokenizer = load_tokenizer(args.model)
    ids = []

    def encode():
        ids[:] = tokenizer.encode(text, add_special_tokens=False).ids

    encode_s = median_seconds(encode)
    decode_s = median_seconds(lambda: tokenizer.decode(ids, skip_special_tokens=False))
    # The word cache off, as in tokenizer_bench's uncached run: no room for new words, and the
    # (per-thread) words cached so far dropped.
    tokenizer.model._resize_cache(0)
    tokenizer.model._clear_cache()
    encode_uncached_s = median_seconds(lambda: tokenizer.encode(text, add_special_tokens=False))

    result = {
        "name": (f"HF tokenizers {tokenizers.__version__} (Rust) encode on the same text, "
                 "single thread"),
        "encode_mb_per_s": megabytes / encode_s,
        "encode_uncached_mb_per_s": megabytes / encode_uncached_s,
        "decode_mb_per_s": megabytes / decode_s,
        "tokens_per_s": len(ids) / encode_s,
        "tokens": len(ids),
        "threads": f"RAYON_NUM_THREADS={os.environ['RAYON_NUM_THREADS']}",
        "timer": "thread CPU time (time.thread_time), median of 7 after one warm-up run",
    }
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=2)
            out.write("\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
