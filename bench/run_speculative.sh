#!/usr/bin/env bash
# Speculative decoding with the bundled model's MTP module (issue 10), measured with `dsinfer eval` on
# the arith task (answers open with a reasoning section, so relaxed acceptance applies):
#   - output tokens/s and the mean acceptance length for N = 0 (off), 1, 2, 3 draft tokens (strict), with
#     1, 32 and 128 problems in flight, and each N's speed against N = 0 at the same concurrency;
#   - relaxed acceptance (TensorRT-LLM's defaults: top-10, delta 0.6) at N = 1..3, one in flight;
#   - the five tasks' accuracy, NUM problems each, for N = 3 strict and relaxed against no drafting
#     (drafting at 128 in flight whatever the load: adaptive drafting would stop it), and each task's
#     mean acceptance length there.
# Writes bench/results/speculative_dsv3-tiny_<device>.json (no drafting at the same concurrency is
# the anchor). Run from the repository root after the build:
#   bench/run_speculative.sh [NUM]          (DEVICE=cuda by default; BUILD=build)
set -euo pipefail
BUILD=${BUILD:-build}
DEVICE=${DEVICE:-cuda}
NUM=${1:-1000}
model=models/dsv3-tiny
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
if [[ $DEVICE == cpu ]]; then
  label=cpu device_name=
else
  device_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  label=$(tr 'A-Z ' 'a-z-' <<<"$device_name" | sed 's/nvidia-//; s/-.*//')
fi
run() {  # run NAME TASK NUM IN_FLIGHT N [relaxed] [always]: one eval with N draft tokens (0: none)
  local name=$1 task=$2 num=$3 in_flight=$4 n=$5 relaxed=${6:-} always=${7:-}
  local spec=()
  if ((n > 0)); then
    local extra=
    [[ $relaxed == relaxed ]] && extra=', "use_relaxed_acceptance_for_thinking": true'
    # The accuracy runs draft whatever the load (adaptive drafting would stop at 128 in flight).
    [[ $always == always ]] && extra="$extra, \"disable_by_batch_size\": 0"
    spec=(--speculative-config "{\"method\": \"mtp\", \"num_speculative_tokens\": $n$extra}")
  fi
  "$BUILD"/dsinfer eval --model "$model" --device "$DEVICE" --task "$task" --num "$num" --max-num-seqs "$in_flight" \
    "${spec[@]}" --json > "$scratch/$name.json"
}
for in_flight in 1 32 128; do
  num=$((in_flight == 1 ? 64 : 2 * in_flight))  # 16 at one in flight varied by 10% run to run
  for n in 0 1 2 3; do run "speed_c${in_flight}_n$n" arith "$num" "$in_flight" "$n"; done
done
for n in 1 2 3; do run "speed_c1_n${n}_relaxed" arith 64 1 "$n" relaxed; done
for task in arith sort count copy reverse; do
  run "acc_${task}_off" "$task" "$NUM" 128 0
  run "acc_${task}_strict" "$task" "$NUM" 128 3 strict always
  run "acc_${task}_relaxed" "$task" "$NUM" 128 3 relaxed always
done
python3 - "$scratch" "$NUM" "$label" "$device_name" "$DEVICE" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import eval_result
scratch, num, label, device_name, device = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def result(name):
    return json.load(open(f"{scratch}/{name}.json"))
figures, anchor = {}, {"name": "no drafting (N = 0), same task, concurrency and run"}
for c in (1, 32, 128):
    base = result(f"speed_c{c}_n0")["generated_tokens_per_s"]
    anchor[f"c{c}_tokens_per_s"] = base
    for n in (1, 2, 3):
        r = result(f"speed_c{c}_n{n}")
        figures[f"c{c}_n{n}_tokens_per_s"] = r["generated_tokens_per_s"]
        figures[f"c{c}_n{n}_vs_off"] = r["generated_tokens_per_s"] / base
        figures[f"c{c}_n{n}_mean_acceptance_length"] = r["mean_acceptance_length"]
for n in (1, 2, 3):
    r = result(f"speed_c1_n{n}_relaxed")
    figures[f"c1_n{n}_relaxed_mean_acceptance_length"] = r["mean_acceptance_length"]
    figures[f"c1_n{n}_relaxed_vs_off"] = r["generated_tokens_per_s"] / anchor["c1_tokens_per_s"]
for task in ("arith", "sort", "count", "copy", "reverse"):
    off = result(f"acc_{task}_off")["accuracy"]
    anchor[f"{task}_accuracy"] = off
    for mode in ("strict", "relaxed"):
        acc = result(f"acc_{task}_{mode}")["accuracy"]
        figures[f"{task}_n3_{mode}_accuracy"] = acc
        figures[f"{task}_n3_{mode}_points_vs_off"] = round(100 * (acc - off), 2)
        figures[f"{task}_n3_{mode}_mean_acceptance_length"] = result(f"acc_{task}_{mode}")["mean_acceptance_length"]
    figures[f"{task}_n3_relaxed_points_vs_strict"] = round(
        100 * (result(f"acc_{task}_relaxed")["accuracy"] - result(f"acc_{task}_strict")["accuracy"]), 2)
eval_result.write(f"bench/results/speculative_dsv3-tiny_{label}.json", "speculative",
                  {"model": "models/dsv3-tiny", "device": device, "speed_task": "arith (64 problems at 1 in flight, "
                   "2 per slot at 32 and 128)", "adaptive_drafting": "the speed runs with the default disable_by_batch_size "
                   "(64: no drafts at 128 in flight), the accuracy runs (128 in flight) drafting always",
                   "problems_per_task": num, "modes": "eagle (module 0 drafts every "
                   "position); relaxed: top-10, delta 0.6, inside <think>", "decoding": "greedy"},
                  figures, anchor, device=f"cuda: {device_name}" if device_name else None)
PY
