#!/usr/bin/env bash
# W4A8 experts' accuracy on the bundled model (issue 9), on the CPU (the reference backend, which the
# GPU's int4 kernels are checked against) or, with DEVICE=cuda, on the GPU:
#   - `dsinfer quantize --method w4a8` writes two W4A8 copies (on the CPU, whatever DEVICE): round to
#     nearest (symmetric int4, group 128), and AWQ (`--awq --calib`, calibrated on CALIB,
#     bench/data/awq_calib_dsv3-tiny.jsonl by default: texts of the model's training tasks, none of
#     them an eval problem);
#   - `dsinfer eval` on the five exact-match tasks, NUM problems a task (1000 by default), for the bf16
#     model (the anchor), bf16 with the FP8 KV cache, each W4A8 copy, and each W4A8 copy with the FP8
#     KV cache: each task's accuracy and the differences from bf16 in points;
#   - `dsinfer eval --task kl --reference-model models/dsv3-tiny`: the KL divergence of each other
#     configuration's next-token distributions from bf16's, teacher-forced over KL_NUM held-out
#     conversations (200 by default), and how often the top-1 token agrees.
# Figures: w4a8 is round to nearest (the name older results used), w4a8_awq the AWQ copy; fp8_kv adds
# --kv-cache-dtype fp8 (FP8_KV=0 leaves those configurations out, for a backend without the FP8 cache).
# Writes bench/results/eval_w4a8_dsv3-tiny_$DEVICE.json (bf16's accuracies as the anchor).
# Run from the repository root after `make build`:
#   bench/run_w4a8_eval.sh [NUM [KL_NUM]]
#   DEVICE=cuda BUILD=build-cuda bench/run_w4a8_eval.sh
set -euo pipefail
BUILD=${BUILD:-build}
DEVICE=${DEVICE:-cpu}
FP8_KV=${FP8_KV:-1}
CALIB=${CALIB:-bench/data/awq_calib_dsv3-tiny.jsonl}
NUM=${1:-1000}
KL_NUM=${2:-200}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$BUILD"/dsinfer quantize --model models/dsv3-tiny --out "$scratch/w4a8" --method w4a8
"$BUILD"/dsinfer quantize --model models/dsv3-tiny --out "$scratch/w4a8_awq" --method w4a8 --awq --calib "$CALIB"
tasks="arith sort count copy reverse"
run() {  # run NAME MODEL [EVAL FLAGS...]
  local name=$1 model=$2
  shift 2
  for task in $tasks; do
    "$BUILD"/dsinfer eval --device "$DEVICE" --model "$model" --task "$task" --num "$NUM" "$@" --json \
      > "$scratch/${name}_$task.json"
  done
  [[ $name == bf16 ]] && return
  "$BUILD"/dsinfer eval --device "$DEVICE" --model "$model" --task kl --reference-model models/dsv3-tiny \
    --num "$KL_NUM" "$@" --json > "$scratch/${name}_kl.json"
}
run bf16 models/dsv3-tiny
run w4a8 "$scratch/w4a8"
run w4a8_awq "$scratch/w4a8_awq"
configs="w4a8 w4a8_awq"
if [[ $FP8_KV == 1 ]]; then
  run fp8_kv models/dsv3-tiny --kv-cache-dtype fp8
  run w4a8_fp8_kv "$scratch/w4a8" --kv-cache-dtype fp8
  run w4a8_awq_fp8_kv "$scratch/w4a8_awq" --kv-cache-dtype fp8
  configs="fp8_kv w4a8 w4a8_fp8_kv w4a8_awq w4a8_awq_fp8_kv"
fi
device_name=cpu
if [[ $DEVICE != cpu ]]; then
  device_name="$DEVICE: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
fi
python3 - "$scratch" "$NUM" "$tasks" "$KL_NUM" "$DEVICE" "$device_name" "$CALIB" "$configs" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import eval_result
scratch, num, tasks, kl_num = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), int(sys.argv[4])
device, device_name, calib, configs = sys.argv[5], sys.argv[6], sys.argv[7], sys.argv[8].split()
def accuracy(name, task):
    return json.load(open(f"{scratch}/{name}_{task}.json"))["accuracy"]
figures, anchor = {}, {"name": "the same tasks on the bf16 model (compute-dtype cache), this run"}
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
for name in configs:  # the worst task
    if name != "fp8_kv":
        figures[f"{name}_worst_points_vs_bf16"] = min(figures[f"{t}_{name}_points_vs_bf16"] for t in tasks)
eval_result.write(f"bench/results/eval_w4a8_dsv3-tiny_{device}.json", "eval_w4a8",
                  {"model": "models/dsv3-tiny", "quantization": "dsinfer quantize --method w4a8: w4a8 round to "
                     "nearest, w4a8_awq with --awq --calib " + calib + " (symmetric int4, group 128, BF16 scales; "
                     "e4m3 activations, a scale per token row)",
                     "problems_per_task": num, "tasks": tasks, "kl_conversations": kl_num,
                     "configurations": ["bf16 (anchor)"] + [name.replace("_fp8_kv", " + --kv-cache-dtype fp8")
                                                              for name in configs],
                     "decoding": "greedy"},
                  figures, anchor, device=None if device == "cpu" else device_name)
PY
