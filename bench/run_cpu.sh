#!/usr/bin/env bash
# The CPU benchmarks behind the README's performance table, and the table itself. Run from the
# repository root after `make build`, on an otherwise idle machine:
#   PYTHON=/path/to/python bench/run_cpu.sh
# PYTHON must have the anchors' packages (tokenizers 0.23.2, torch 2.11, transformers 5.17).
set -euo pipefail
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-python3}
PORT=${PORT:-18123}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"; [[ -n "${server:-}" ]] && kill "$server" 2>/dev/null || true' EXIT

# Tokenizer: encode MB/s on one thread, against Hugging Face tokenizers on the same text.
"$PYTHON" tools/bench_hf_tokenizer.py --out "$scratch/hf_tokenizer.json"
"$BUILD"/bench/tokenizer_bench --anchor "$scratch/hf_tokenizer.json"

# One sequence through `dsinfer generate`'s path, against transformers on the same model and prompt.
for model in tests/fixtures/models/v3-tiny models/dsv3-tiny; do
  name=$(basename "$model")
  "$PYTHON" tools/bench_hf_generate.py --model "$model" --out "$scratch/hf_generate_$name.json"
  "$BUILD"/bench/generate_bench --model "$model" --anchor "$scratch/hf_generate_$name.json"
done

# Engine CPU time per step at 256 running sequences: the median of nine processes (the figure
# moves by up to +-25% between processes with the heap's layout).
for run in 1 2 3 4 5 6 7 8 9; do
  "$BUILD"/bench/engine_overhead_bench --steps 1500 --out "$scratch/engine_overhead_$run.json"
done
"$PYTHON" - "$scratch" <<'PY'
import glob, json, statistics, sys
runs = [json.load(open(p)) for p in sorted(glob.glob(sys.argv[1] + "/engine_overhead_*.json"))]
values = [r["figures"]["overhead_us_per_step"] for r in runs]
result = runs[0]
result["figures"] = {"overhead_us_per_step": statistics.median(values)}
result["config"]["runs"] = [round(v, 1) for v in values]
result["config"]["statistic"] = "median over separate processes"
json.dump(result, open("bench/results/engine_overhead.json", "w"), indent=2)
PY

# Concurrent streaming connections one server process holds.
"$BUILD"/bench/http_connections_bench

# The server on the bundled model under load (dsinfer bench serve), with the batch-1 decode rate
# of the same model as the anchor: what batching adds on this machine.
"$BUILD"/dsinfer serve --model models/dsv3-tiny --served-model-name dsv3-tiny --port "$PORT" > "$scratch/serve.log" 2>&1 &
server=$!
until curl -sf "http://127.0.0.1:$PORT/health" > /dev/null; do sleep 0.2; done
"$BUILD"/dsinfer bench serve --base-url "http://127.0.0.1:$PORT" --input-len 128 --output-len 128 \
  --num-prompts 64 --max-concurrency 16 --disable-progress --out "$scratch/serve.json"
"$BUILD"/dsinfer bench serve --base-url "http://127.0.0.1:$PORT" --input-len 128 --output-len 128 \
  --num-prompts 32 --request-rate 1 --find-max-qpm --slo-tpot-ms 50 --max-probes 6 --disable-progress \
  --out "$scratch/serve_max_qpm.json"
kill "$server"
server=
"$PYTHON" - "$scratch" <<'PY'
import json, sys
scratch = sys.argv[1]
batch1 = json.load(open("bench/results/generate_dsv3-tiny.json"))["figures"]["decode_tokens_per_s"]
for name, out in (("serve.json", "serve_dsv3-tiny.json"), ("serve_max_qpm.json", "serve_max_qpm_dsv3-tiny.json")):
    result = json.load(open(f"{scratch}/{name}"))
    result["anchor"] = {"name": "batch-1 decode of the same model on this machine (generate_bench)",
                        "output_throughput": batch1}
    json.dump(result, open(f"bench/results/{out}", "w"), indent=2)
PY

"$PYTHON" tools/results_table.py
