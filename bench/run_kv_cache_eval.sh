#!/usr/bin/env bash
# The FP8 KV caches' accuracy on the bundled model (issue 9), on the CPU (the reference backend; the
# GPU has no FP8 cache yet):
#   - `dsinfer eval` on its five exact-match tasks with each --kv-cache-dtype, NUM problems a task
#     (1000 by default): each task's accuracy, and the FP8 caches' differences from the f32 cache in
#     points;
#   - `dsinfer eval --task kv_kl`: the KL divergence of the next-token distributions from the f32
#     cache's, teacher-forced over KL_NUM held-out conversations (200 by default), and how often the
#     top-1 token agrees.
# Writes bench/results/eval_kv_cache_dsv3-tiny_cpu.json (the f32 cache's accuracies as the anchor).
# Run from the repository root after `make build`:
#   bench/run_kv_cache_eval.sh [NUM [KL_NUM]]
set -euo pipefail
BUILD=${BUILD:-build}
NUM=${1:-1000}
KL_NUM=${2:-200}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
tasks="arith sort count copy reverse"
for dtype in auto fp8 fp8_ds_mla; do
  for task in $tasks; do
    "$BUILD"/dsinfer eval --model models/dsv3-tiny --task "$task" --num "$NUM" --kv-cache-dtype "$dtype" --json \
      > "$scratch/${dtype}_$task.json"
  done
  [[ $dtype == auto ]] && continue
  "$BUILD"/dsinfer eval --model models/dsv3-tiny --task kv_kl --num "$KL_NUM" --kv-cache-dtype "$dtype" --json \
    > "$scratch/${dtype}_kv_kl.json"
done
python3 - "$scratch" "$NUM" "$tasks" "$KL_NUM" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import eval_result
scratch, num, tasks, kl_num = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), int(sys.argv[4])
def accuracy(dtype, task):
    return json.load(open(f"{scratch}/{dtype}_{task}.json"))["accuracy"]
figures, anchor = {}, {"name": "the same tasks with the f32 cache (auto), this run"}
for task in tasks:
    base = accuracy("auto", task)
    anchor[f"{task}_accuracy"] = base
    for dtype in ("fp8", "fp8_ds_mla"):
        figures[f"{task}_{dtype}_accuracy"] = accuracy(dtype, task)
        figures[f"{task}_{dtype}_points_vs_f32"] = round(100 * (accuracy(dtype, task) - base), 2)
for dtype in ("fp8", "fp8_ds_mla"):
    kl = json.load(open(f"{scratch}/{dtype}_kv_kl.json"))
    for name in ("mean_kl", "max_kl", "top1_agreement", "positions"):
        figures[f"{dtype}_{name}"] = kl[name]
eval_result.write("bench/results/eval_kv_cache_dsv3-tiny_cpu.json", "eval_kv_cache",
                  {"model": "models/dsv3-tiny", "problems_per_task": num, "tasks": tasks, "kl_conversations": kl_num,
                     "kv_cache_dtypes": ["auto (f32)", "fp8", "fp8_ds_mla"], "decoding": "greedy"},
                  figures, anchor)
PY
