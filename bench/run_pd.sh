#!/usr/bin/env bash
# Issue 14's serving figure on one GPU: prefill/decode disaggregation (`dsinfer router` in front of a
# prefill and a decode instance, each with half of the GPU's memory budget, pages by CUDA IPC)
# against in-flight batching (one `dsinfer serve` with the whole budget), the same load from
# `dsinfer bench serve`: throughput, goodput at TPOT <= 50 ms, TTFT and TPOT distributions. On the
# bundled model and on DeepSeek-V3's widths (4 layers, dummy weights, the bundled tokenizer).
#   bench/run_pd.sh [BUILD_DIR] [RESULTS_DIR]
# Writes RESULTS_DIR/serve_pd_<model>_<gpu>.json (one file a model: both runs' figures and their
# ratios) and leaves each run's own bench serve JSON beside it.
#
# PD_GPUS=2 (a machine of two GPUs or more): the prefill instance on GPU 0 and the decode instance on
# GPU 1, each with 0.8 of its GPU, pages by CUDA IPC over NVLink, against in-flight batching on the
# same two GPUs (one `dsinfer serve --data-parallel-size 2 --enable-expert-parallel`, DP attention
# with expert parallelism, as SGLang serves DeepSeek); files serve_pd_<model>_<gpu>x2.json.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
results=${2:-bench/results}
mkdir -p "$results"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z ' 'a-z-' | sed 's/nvidia-//; s/-.*//')
gpus=${PD_GPUS:-1}
case $gpus in
  1) tag=$gpu ;;
  2) tag=${gpu}x2
     (($(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l) >= 2)) || { echo "run_pd: PD_GPUS=2 needs two GPUs"; exit 1; } ;;
  *) echo "run_pd: PD_GPUS is 1 or 2, not $gpus"; exit 1 ;;
esac
logs=${OUT:-/tmp}/pd_bench_logs
mkdir -p "$logs"
pids=()
trap 'for p in "${pids[@]:-}"; do kill "$p" 2>/dev/null || true; done' EXIT

# Starts a dsinfer verb in the background (on the GPUs $visible lists, all when it is empty); its
# address (from the line it prints when ready) in $url.
visible=
start() {  # start LOG ARGS...
  local log=$1
  shift
  if [[ -n "$visible" ]]; then
    CUDA_VISIBLE_DEVICES=$visible "$BUILD"/dsinfer "$@" > "$log" 2>&1 &
  else
    "$BUILD"/dsinfer "$@" > "$log" 2>&1 &
  fi
  pids+=($!)
  url=
  for _ in $(seq 1500); do
    url=$(grep -oE ' at http://[^ ]+' "$log" | head -1 | sed 's/^ at //') || true
    [[ -n "$url" ]] && curl -sf "$url/health" > /dev/null && return 0
    kill -0 "${pids[-1]}" 2>/dev/null || { echo "run_pd: $* exited:"; tail -20 "$log"; return 1; }
    sleep 0.2
  done
  echo "run_pd: $* did not come up"; tail -20 "$log"; return 1
}

stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}

load="--input-len 512 --output-len 128 --range-ratio 0.5 --num-prompts 512 --max-concurrency 128 --slo-tpot-ms 50"

run_model() {  # run_model NAME MODEL_FLAGS...
  local name=$1
  shift
  local model_flags=("$@")
  local single="$results/serve_ifb_${name}_$tag.json" pd="$results/serve_pd_${name}_$tag.json"
  local ifb_flags=() prefill_share=0.4 prefill_gpu= decode_gpu=
  if ((gpus == 2)); then
    ifb_flags=(--data-parallel-size 2 --enable-expert-parallel)
    prefill_share=0.8 prefill_gpu=0 decode_gpu=1
  fi
  visible=
  start "$logs/$name-single.log" serve "${model_flags[@]}" --device cuda --port 0 --gpu-memory-utilization 0.8 \
    "${ifb_flags[@]}"
  # shellcheck disable=SC2086
  "$BUILD"/dsinfer bench serve --base-url "$url" $load --disable-progress --out "$single"
  stop_all
  visible=$prefill_gpu
  start "$logs/$name-prefill.log" serve "${model_flags[@]}" --device cuda --port 0 --gpu-memory-utilization "$prefill_share" \
    --disaggregation-mode prefill --disaggregation-bootstrap-port 0 --disaggregation-ucx-transports cuda_ipc,cuda_copy,tcp
  local prefill=$url
  visible=$decode_gpu
  start "$logs/$name-decode.log" serve "${model_flags[@]}" --device cuda --port 0 --gpu-memory-utilization 0.8 \
    --disaggregation-mode decode --disaggregation-ucx-transports cuda_ipc,cuda_copy,tcp
  local decode=$url
  visible=
  start "$logs/$name-router.log" router --port 0 --prefill "$prefill" --decode "$decode"
  # shellcheck disable=SC2086
  "$BUILD"/dsinfer bench serve --base-url "$url" $load --disable-progress --out "$results/serve_pd_run_${name}_$tag.json"
  stop_all
  python3 - "$single" "$results/serve_pd_run_${name}_$tag.json" "$pd" "$name" \
    "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" "$gpus" <<'PY'
import datetime, json, os, subprocess, sys
single_path, pd_path, out, name, device, gpus = sys.argv[1:7]
commit = os.environ.get("DSINFER_COMMIT") or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                                            text=True).stdout.strip() or "unknown"
single, pd = json.load(open(single_path)), json.load(open(pd_path))
keys = ["completed", "failed", "output_throughput", "request_goodput", "goodput_qpm", "qpm", "median_ttft_ms",
        "p90_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p90_tpot_ms", "p99_tpot_ms", "median_e2e_ms", "p99_e2e_ms"]
figures = {}
for k in keys:
    figures[f"pd_{k}"] = pd["figures"].get(k)
    figures[f"ifb_{k}"] = single["figures"].get(k)
for k in ("output_throughput", "goodput_qpm"):
    if figures[f"ifb_{k}"]:
        figures[f"pd_vs_ifb_{k}"] = figures[f"pd_{k}"] / figures[f"ifb_{k}"]
if gpus == "2":
    placement = {"pd": "dsinfer router + a prefill instance on GPU 0 and a decode instance on GPU 1 (each "
                       "gpu-memory-utilization 0.8), pages by UCX CUDA IPC over NVLink, whole sends",
                 "ifb": "one dsinfer serve --data-parallel-size 2 --enable-expert-parallel on both GPUs, "
                        "gpu-memory-utilization 0.8 (in-flight batching, chunked prefill)"}
    where = "two GPUs"
else:
    placement = {"pd": "dsinfer router + a prefill (gpu-memory-utilization 0.4) and a decode instance (the rest "
                       "of 0.8) on the same GPU, pages by UCX CUDA IPC, whole sends",
                 "ifb": "one dsinfer serve, gpu-memory-utilization 0.8 (in-flight batching, chunked prefill)"}
    where = "one GPU"
result = {"benchmark": "pd_serving", "device": f"cuda: {device} ({where})", "commit": commit,
          "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
          "config": {"model": name, "load": single["config"], **placement},
          "figures": figures,
          "anchor": {"name": "in-flight batching on the same GPU budget, same load, same run (ifb_* figures)"}}
json.dump(result, open(out, "w"), indent=2)
print(json.dumps(figures, indent=1))
PY
}

run_model dsv3-tiny --model models/dsv3-tiny --served-model-name dsv3-tiny

model=$(mktemp -d)
cp configs/deepseek-v3/config.json "$model"/
cp models/dsv3-tiny/tokenizer.json models/dsv3-tiny/tokenizer_config.json "$model"/
run_model v3-4-layers --model "$model" --served-model-name v3-4-layers --load-format dummy --num-layers 4
