#!/usr/bin/env bash
# The GPU benchmarks behind the README's performance table, in one command on an H100 or H200 (run
# from the repository root after the build; results go to bench/results/ and, when $OUT is set, to
# $OUT too):
#   bench/run_gpu.sh [BUILD_DIR]
#   1. the chip's ceilings and the decode/prefill step at DeepSeek-V3's widths, 4 layers, FP8 dummy
#      weights: decode at batch 1, 64 and 256 with a 2K context against its roofline, prefill 8 x 2K,
#      and the speculative step verifying one draft a sequence (the MTP module is a fifth of this
#      4-layer model, against 1/62 of the whole one);
#   2. the same step on the 3-layer bf16 model ANCHORS.md's Hugging Face figures were measured on
#      (batch 1 and 32), for tokens/s against transformers;
#   3. generate_bench and `dsinfer bench serve` against `dsinfer serve --device cuda` on the bundled
#      model, with the overlap scheduler and with --disable-overlap-schedule.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PORT=${PORT:-18124}
# The commit the binaries were built from (a copied tree may carry stale git metadata).
export DSINFER_COMMIT=${DSINFER_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z ' 'a-z-' | sed 's/nvidia-//; s/-.*//')
results=bench/results
trap '[[ -n "${server:-}" ]] && kill "$server" 2>/dev/null || true' EXIT

"$BUILD"/bench/model_step_bench --config configs/deepseek-v3 --num-layers 4 --batches 1,64,256 --context 2048 \
  --prefill 8x2048 --speculative 1 --out "$results/model_step_deepseek-v3_$gpu.json"
"$BUILD"/bench/model_step_bench --config bench/configs/v3-3-layers --batches 1,32 --context 512 --prefill 8x1024 \
  --out "$results/model_step_v3-3-layers_$gpu.json"
"$BUILD"/bench/generate_bench --model models/dsv3-tiny --device cuda --out "$results/generate_gpu_dsv3-tiny_$gpu.json"

# The serving run twice: with the overlap scheduler (the default) and without it.
source bench/serve_bench.sh
serve_run() {  # serve_run RESULT_FILE [SERVE FLAGS...]
  local out=$1
  shift
  serve_bench "$out" /tmp/dsinfer-serve.log "--input-len 128 --output-len 128 --num-prompts 512 --max-concurrency 128" \
    --model models/dsv3-tiny --served-model-name dsv3-tiny "$@"
}
serve_run "$results/serve_gpu_dsv3-tiny_$gpu.json"
serve_run "$results/serve_gpu_no-overlap_dsv3-tiny_$gpu.json" --disable-overlap-schedule

# Anchors that are not measured in this run: the Hugging Face figures of ANCHORS.md (same GPU kind),
# and batch-1 generation for the serving run.
python3 - "$results" "$gpu" <<'PY'
import json, sys
results, gpu = sys.argv[1], sys.argv[2]
hf = {"h200": (22.0, 415.0, 98000.0), "h100": (15.7, 292.0, 91600.0)}.get(gpu)
path = f"{results}/model_step_v3-3-layers_{gpu}.json"
result = json.load(open(path))
fig = result["figures"]
fig["tokens_per_s_b1"] = 1e3 / fig["decode_ms_b1"]
fig["tokens_per_s_b32"] = 32e3 / fig["decode_ms_b32"]
# Steps back to back as the engine's overlap scheduler runs them: what `dsinfer generate` and the server get.
fig["tokens_per_s_overlapped_b1"] = 1e3 / fig["decode_overlapped_ms_b1"]
fig["tokens_per_s_overlapped_b32"] = 32e3 / fig["decode_overlapped_ms_b32"]
if hf:
    result["anchor"] = {"name": f"Hugging Face transformers 5.17, the same 3-layer V3-width bf16 model, on an {gpu.upper()} (ANCHORS.md)",
                        "tokens_per_s_b1": hf[0], "tokens_per_s_b32": hf[1], "prefill_tokens_per_s": hf[2]}
    fig["speedup_vs_hf_b1"] = fig["tokens_per_s_b1"] / hf[0]
    fig["speedup_vs_hf_b32"] = fig["tokens_per_s_b32"] / hf[1]
    fig["speedup_vs_hf_overlapped_b1"] = fig["tokens_per_s_overlapped_b1"] / hf[0]
    fig["speedup_vs_hf_overlapped_b32"] = fig["tokens_per_s_overlapped_b32"] / hf[1]
json.dump(result, open(path, "w"), indent=2)
batch1 = json.load(open(f"{results}/generate_gpu_dsv3-tiny_{gpu}.json"))["figures"]["decode_tokens_per_s"]
for name in ("serve_gpu", "serve_gpu_no-overlap"):
    serve = f"{results}/{name}_dsv3-tiny_{gpu}.json"
    result = json.load(open(serve))
    result["anchor"] = {"name": "batch-1 decode of the same model on the same GPU (generate_bench)",
                        "output_throughput": batch1}
    # The load generator names its own machine; the server's GPU is the one measured.
    result["device"] = json.load(open(f"{results}/generate_gpu_dsv3-tiny_{gpu}.json"))["device"]
    if name == "serve_gpu_no-overlap":
        result["config"]["overlap_schedule"] = False
    json.dump(result, open(serve, "w"), indent=2)
PY
# Only this script's own results (kernels_bench writes its own file, which a stale copy must not replace).
if [[ -n "${OUT:-}" ]]; then
  cp "$results"/{model_step_deepseek-v3,model_step_v3-3-layers}_"$gpu".json "$results"/generate_gpu_dsv3-tiny_"$gpu".json \
    "$results"/serve_gpu{,_no-overlap}_dsv3-tiny_"$gpu".json "$OUT"/
fi
echo "run_gpu: results in $results"
