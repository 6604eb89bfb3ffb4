#!/usr/bin/env python3
"""The parallel flags from the command line: `dsinfer generate` on a model held by several ranks
(CPU threads) prints the tokens the whole model prints, for the layouts a user would start with
vLLM's or SGLang's spellings. Fails (never skips) when a run fails or differs."""
import argparse
import json
import subprocess
import sys

LAYOUTS = [
    ["--tensor-parallel-size", "2"],                                     # vLLM: TP 2, experts along I
    ["--tensor-parallel-size", "2", "--enable-expert-parallel"],         # vLLM: TP 2 + EP 2
    ["--data-parallel-size", "2", "--enable-expert-parallel"],           # vLLM: DP attention + EP 2
    ["--data-parallel-size", "2", "--enable-expert-parallel",            # the same through the all-to-all
     "--num-max-dispatch-tokens-per-rank", "0", "--dispatch-chunk-tokens", "0"],
    ["--data-parallel-size", "2", "--enable-expert-parallel",            # + small peer buffers: the prompt
     "--num-max-dispatch-tokens-per-rank", "4", "--dispatch-chunk-tokens", "8"],  # in rounds of 8
    ["--tp", "4", "--dp", "2", "--enable-dp-attention", "--ep", "4"],    # SGLang: 2 groups of 2, EP 4
    ["--tp", "2", "--dp", "2", "--enable-dp-attention", "--ep", "2",     # SGLang: + EPLB
     "--enable-eplb", "--ep-num-redundant-experts", "2", "--eplb-rebalance-num-iterations", "16"],
]


def ranks(layout):
    """The ranks a layout asks for: --tp (and --dp without --enable-dp-attention)."""
    size = {flag: int(layout[i + 1]) for i, flag in enumerate(layout[:-1]) if flag.startswith("--") and
            layout[i + 1].isdigit()}
    tp = size.get("--tp", size.get("--tensor-parallel-size", 1))
    dp = size.get("--dp", size.get("--data-parallel-size", 1))
    return tp if "--enable-dp-attention" in layout else tp * dp


def generate(dsinfer, model, prompt, device, extra):
    command = [dsinfer, "generate", "--model", model, "--device", device, "--chat", "--prompt", prompt,
               "--max-new-tokens", "300", "--json", *extra]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)} exited {result.returncode}:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsinfer", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--device", default="cpu", help="cpu (ranks as threads), or cuda (a GPU a rank)")
    parser.add_argument("--max-ranks", type=int, default=0, help="leave out layouts of more ranks (0: none)")
    args = parser.parse_args()
    layouts = [layout for layout in LAYOUTS if not args.max_ranks or ranks(layout) <= args.max_ranks]
    for layout in LAYOUTS:
        if layout not in layouts:
            print(f"left out (more than {args.max_ranks} ranks): {' '.join(layout)}")
    failures = 0
    prompts = ["123+456", "Sort 228, 881, 622, 489 from smallest to largest."]
    for prompt in prompts:
        whole = generate(args.dsinfer, args.model, prompt, args.device, [])
        for layout in layouts:
            sharded = generate(args.dsinfer, args.model, prompt, args.device, layout)
            same = sharded["output_ids"] == whole["output_ids"]
            print(f"{'ok  ' if same else 'FAIL'} {prompt!r} {' '.join(layout)}: {len(sharded['output_ids'])} tokens")
            failures += 0 if same else 1
    print(f"{len(prompts) * len(layouts) - failures} passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
