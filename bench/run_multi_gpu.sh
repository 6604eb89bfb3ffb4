#!/usr/bin/env bash
# The multi-GPU benchmarks, in one command on a machine with 2 or more GPUs (run from the repository
# root after the build; results go to bench/results/ and, when $OUT is set, to $OUT too):
#   bench/run_multi_gpu.sh [BUILD_DIR]
#   1. dispatch_bench: expert dispatch and combine at DeepSeek-V3's widths, NCCL's all-to-all and our
#      peer-buffer kernels, against DeepEP's published figures;
#   2. `dsinfer bench serve` against `dsinfer serve --device cuda` on DeepSeek-V3's real widths
#      (dummy FP8 weights, the first 6 layers: 3 dense, 3 MoE), on one GPU and then sharded over
#      every GPU: DP attention + EP (the peer-buffer dispatch for decode; prefill through NCCL's
#      all-to-all, then in peer-buffer chunks of 4096 tokens a rank) and TP + EP. The one-GPU
#      run is the sharded runs' anchor; the figure to read is output tokens/s per GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PORT=${PORT:-18125}
export DSINFER_COMMIT=${DSINFER_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
export NCCL_NVLS_ENABLE=0  # NVLink multicast off on shared machines (the device notes say why)
gpus=$(nvidia-smi -L | wc -l)
((gpus >= 2)) || { echo "run_multi_gpu: needs 2 or more GPUs, found $gpus"; exit 1; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z ' 'a-z-' | sed 's/nvidia-//; s/-.*//')
results=bench/results
trap '[[ -n "${server:-}" ]] && kill "$server" 2>/dev/null || true' EXIT

"$BUILD"/bench/dispatch_bench --out "$results/dispatch_${gpu}x$gpus.json"

# A model directory of DeepSeek-V3's config and the bundled model's tokenizer (the prompts are random
# tokens of it; the weights are random, made on the device).
model=$(mktemp -d)
cp configs/deepseek-v3/config.json "$model"/
cp models/dsv3-tiny/tokenizer.json models/dsv3-tiny/tokenizer_config.json "$model"/

source bench/serve_bench.sh
serve_run() {  # serve_run NAME [PARALLEL FLAGS...]
  local out="$results/serve_gpu_v3-6-layers_$1_${gpu}x$gpus.json" log="${OUT:-/tmp}/serve_$1_$gpu.log"
  shift
  serve_bench "$out" "$log" "--input-len 512 --output-len 128 --num-prompts 512 --max-concurrency 128" \
    --model "$model" --served-model-name v3-6-layers --load-format dummy --num-layers 6 "$@"
  # The load generator names its own machine as the device; the server's GPUs are the ones measured.
  # The KV cache the server planned (its log's banner) is the other figure that parallelism changes.
  python3 - "$out" "$gpus" "$*" "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" "$log" <<'PY'
import json, re, sys
path, gpus, flags, name, log = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
result = json.load(open(path))
banner = re.search(r"KV cache (\d+) pages of (\d+) tokens", open(log).read())
if banner:
    result["figures"]["kv_cache_tokens"] = int(banner.group(1)) * int(banner.group(2))
ranks = gpus if flags else 1
result["device"] = f"{ranks} x cuda: {name}" if ranks > 1 else f"cuda: {name}"
result["config"]["parallel"] = flags or "one GPU"
result["config"]["gpus"] = ranks
result["figures"]["output_throughput_per_gpu"] = result["figures"]["output_throughput"] / ranks
json.dump(result, open(path, "w"), indent=2)
PY
}
serve_run 1gpu
# The prompt steps through NCCL's all-to-all, then through the chunked peer buffers (the default).
serve_run "dp${gpus}-ep" --data-parallel-size "$gpus" --enable-expert-parallel --dispatch-chunk-tokens 0
serve_run "dp${gpus}-ep-chunks" --data-parallel-size "$gpus" --enable-expert-parallel --dispatch-chunk-tokens 4096
serve_run "tp${gpus}-ep" --tensor-parallel-size "$gpus" --enable-expert-parallel

python3 - "$results" "$gpu" "$gpus" <<'PY'
import json, sys
results, gpu, gpus = sys.argv[1], sys.argv[2], sys.argv[3]
one = json.load(open(f"{results}/serve_gpu_v3-6-layers_1gpu_{gpu}x{gpus}.json"))["figures"]
for name in (f"dp{gpus}-ep", f"dp{gpus}-ep-chunks", f"tp{gpus}-ep"):
    path = f"{results}/serve_gpu_v3-6-layers_{name}_{gpu}x{gpus}.json"
    result = json.load(open(path))
    result["anchor"] = {"name": "the same model and load on one GPU of the same machine, in this run",
                        "output_throughput": one["output_throughput"],
                        "output_throughput_per_gpu": one["output_throughput"],
                        "median_tpot_ms": one["median_tpot_ms"], "p90_tpot_ms": one["p90_tpot_ms"]}
    json.dump(result, open(path, "w"), indent=2)
PY
rm -rf "$model"
if [[ -n "${OUT:-}" ]]; then
  cp "$results/dispatch_${gpu}x$gpus.json" "$results"/serve_gpu_v3-6-layers_*_"${gpu}x$gpus".json "$OUT"/
fi
echo "run_multi_gpu: results in $results"
