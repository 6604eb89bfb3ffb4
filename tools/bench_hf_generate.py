#!/usr/bin/env python3
"""The anchor for bench/generate_bench.cc: Hugging Face transformers generating with the same
model, prompt and length on this machine's CPU (float32, greedy, batch 1, KV cache on).

Usage: python3 tools/bench_hf_generate.py --model tests/fixtures/models/v3-tiny
           [--prompt 64] [--new 128] [--threads N] [--out bench/results/hf_generate_v3-tiny.json]
Needs torch and transformers (pinned: torch 2.11, transformers 5.17).
"""

import argparse
import json
import os
import statistics
import time

import torch
import transformers


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--new", type=int, default=128)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    vocab = model.config.vocab_size
    # The same prompt as generate_bench.cc.
    prompt = torch.tensor([[3 + (i * 7919) % (vocab - 3) for i in range(args.prompt)]])
    decode_rates, prefill_rates = [], []
    with torch.no_grad():
        model.generate(prompt, max_new_tokens=args.new, min_new_tokens=args.new, do_sample=False)  # warm-up
        for _ in range(args.runs):
            start = time.perf_counter()
            model(prompt)
            prefill = time.perf_counter() - start
            start = time.perf_counter()
            model.generate(prompt, max_new_tokens=args.new, min_new_tokens=args.new, do_sample=False)
            total = time.perf_counter() - start
            prefill_rates.append(args.prompt / prefill)
            decode_rates.append((args.new - 1) / max(total - prefill, 1e-9))
    result = {
        "name": f"Hugging Face transformers {transformers.__version__} (torch {torch.__version__}), float32 CPU, "
                f"generate() greedy batch 1, {args.threads} threads",
        "prefill_tokens_per_s": statistics.median(prefill_rates),
        "decode_tokens_per_s": statistics.median(decode_rates),
    }
    print(json.dumps(result, indent=2))
    name = os.path.basename(os.path.normpath(args.model))
    out = args.out or f"bench/results/hf_generate_{name}.json"
    with open(out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
