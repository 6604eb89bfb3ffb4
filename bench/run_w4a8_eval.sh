#!/usr/bin/env bash
# W4A8 experts' accuracy on the bundled model (issue 9), on the CPU (the reference backend, which the
# GPU's int4 kernels are checked against):
#   - `dsinfer quantize --method w4a8` (round to nearest, group 128) writes the W4A8 copy;
#   - `dsinfer eval` on the five exact-match tasks, NUM problems a task (1000 by default), for the bf16
#     model, the W4A8 copy, and the W4A8 copy with the FP8 KV cache: each task's accuracy and the
#     differences from bf16 in points;
#   - `dsinfer eval --task kl --reference-model models/dsv3-tiny`: the KL divergence of the W4A8
#     configurations' next-token distributions from bf16's, teacher-forced over KL_NUM held-out
#     conversations (200 by default), and how often the top-1 token agrees.
# Writes bench/results/eval_w4a8_dsv3-tiny_cpu.json (bf16's accuracies as the anchor).
# Run from the repository root after `make build`:
#   bench/run_w4a8_eval.sh [NUM [KL_NUM]]
set -euo pipefail
BUILD=${BUILD:-build}
NUM=${1:-1000}
KL_NUM=${2:-200}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$BUILD"/dsinfer quantize --model models/dsv3-tiny --out "$scratch/w4a8" --method w4a8
tasks="arith sort count copy reverse"
run() {  # run NAME MODEL [EVAL FLAGS...]
  local name=$1 model=$2
  shift 2
  for task in $tasks; do
    "$BUILD"/dsinfer eval --model "$model" --task "$task" --num "$NUM" "$@" --json > "$scratch/${name}_$task.json"
  done
  [[ $name == bf16 ]] && return
  "$BUILD"/dsinfer eval --model "$model" --task kl --reference-model models/dsv3-tiny --num "$KL_NUM" "$@" --json \
    > "$scratch/${name}_kl.json"
}
run bf16 models/dsv3-tiny
run w4a8 "$scratch/w4a8"
run w4a8_fp8_kv "$scratch/w4a8" --kv-cache-dtype fp8
python3 - "$scratch" "$NUM" "$tasks" "$KL_NUM" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import eval_result
scratch, num, tasks, kl_num = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), int(sys.argv[4])
configs = ("w4a8", "w4a8_fp8_kv")
def accuracy(name, task):
    return json.load(open(f"{scratch}/{name}_{task}.json"))["accuracy"]
figures, anchor = {}, {"name": "the same tasks on the bf16 model (f32 cache), this run"}
for task in tasks:
    base = accuracy("bf16", task)
    anchor[f"{task}_accuracy"] = base
    for name in configs:
        figures[f"{task}_{name}_accuracy"] = accuracy(name, task)
        figures[f"{task}_{name}_points_vs_bf16"] = round(100 * (accuracy(name, task) - base), 2)
for name in configs:
    kl = json.load(open(f"{scratch}/{name}_kl.json"))
    for key in ("mean_kl", "max_kl", "top1_agreement", "positions"):
        figures[f"{name}_{key}"] = kl[key]
eval_result.write("bench/results/eval_w4a8_dsv3-tiny_cpu.json", "eval_w4a8",
                  {"model": "models/dsv3-tiny", "quantization": "dsinfer quantize --method w4a8 (round to nearest, "
                     "symmetric int4, group 128, BF16 scales; e4m3 activations, a scale per token row)",
                     "problems_per_task": num, "tasks": tasks, "kl_conversations": kl_num,
                     "configurations": ["bf16 (anchor)", "w4a8", "w4a8 + --kv-cache-dtype fp8"], "decoding": "greedy"},
                  figures, anchor)
PY
