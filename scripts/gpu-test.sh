#!/usr/bin/env bash
# The GPU tests, in one command, on a machine with an H100 or H200 (DESIGN.md: "GPU tests run on a
# GPU machine through one script"). `make test` runs everything that needs no GPU; this runs the rest:
#   1. the conformance harness: every CUDA op against the CPU op at real DeepSeek-V3 shapes
#      (`conformance`) and at small ones (`conformance-small`, with the long-walk and fused
#      quantization tests), with the fast kernels and with the reference kernels; every tiling of the
#      FP8 wgmma GEMMs; the W4A8 experts' int4 kernels;
#   2. the fixture models (bf16, FP8, V2-Lite-like) on the GPU against Hugging Face's logits, CUDA
#      graph replay against eager execution, and overlapped steps against synchronous ones;
#   3. the server end to end on the GPU (engine, sampling, streaming, failures, structured output
#      and logit_bias) over the fixture and the bundled models, speculative decoding's engine, and
#      the host KV tier's restores;
#   4. compute-sanitizer memcheck over the small-shape conformance; a request's KV pages between two
#      processes on the GPU over UCX's CUDA IPC (prefill/decode disaggregation's transfer);
#   5. on 2 GPUs or more, the NCCL communicator against the CPU's, and the model sharded over the
#      GPUs (tensor, DP-attention and expert parallel) against the whole model on GPU 0 (skipped,
#      and said so, on one GPU; layouts of more ranks than GPUs are left out, and listed).
# Every step fails loudly without a GPU. Usage: scripts/gpu-test.sh [BUILD_DIR] (default: build;
# scripts/pack-gpu-tests.sh packs a build's test binaries for a GPU machine that has none);
# logs go to $GPU_TEST_LOGS (default: BUILD_DIR/gpu-test-logs); $GPU_TEST_STEPS names a subset.
#
# On a machine of several GPUs the one-GPU steps run side by side, each on a GPU of its own as one
# comes free (the longest first), while the steps that take every GPU (nccl, sharded) run beside
# them: the real-shape conformance takes minutes (four steps, a quarter each), mostly the CPU's
# reference. The GPUs used are those CUDA_VISIBLE_DEVICES lists, or all; GPU_TEST_PARALLEL=0 runs
# the steps one after another.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build=${1:-build}
logs=${GPU_TEST_LOGS:-$build/gpu-test-logs}
mkdir -p "$logs"
rm -f "$logs"/*.status
export DSINFER_SOURCE_DIR=$PWD

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || { echo "gpu-test: no GPU"; exit 1; }
if [[ -n "${CUDA_VISIBLE_DEVICES:-}" ]]; then
  IFS=, read -r -a gpus <<<"$CUDA_VISIBLE_DEVICES"
else
  mapfile -t gpus < <(nvidia-smi --query-gpu=index --format=csv,noheader | tr -d ' ')
fi
parallel=${GPU_TEST_PARALLEL:-1}
((${#gpus[@]} < 2)) && parallel=0

selected() {  # GPU_TEST_STEPS="conformance-1 models ..." runs only those steps (a run split over several calls)
  [[ -z "${GPU_TEST_STEPS:-}" || " $GPU_TEST_STEPS " == *" $1 "* ]]
}

run_step() {  # run_step NAME COMMAND...: runs it, keeps its log, leaves PASS or FAIL in NAME.status
  local name=$1 start=$SECONDS
  shift
  if "$@" >"$logs/$name.log" 2>&1; then
    echo "PASS  $name ($((SECONDS - start)) s)" | tee "$logs/$name.status"
  else
    echo "FAIL  $name ($((SECONDS - start)) s): see $logs/$name.log" | tee "$logs/$name.status"
    tail -n 30 "$logs/$name.log"
  fi
}

# The one-GPU steps, longest first: NAME then its command, one step a line.
exact="*SixtyFourConcurrentStreamsEachMatchTheRequestRunAlone*:*PreemptionInATinyPoolStillGivesTheSameOutputs*"
one_gpu_steps=(
  # The real-shape tier in four quarters (every fourth case each): its CPU reference takes minutes
  # (half of it ran past 230 s on an H200 machine), and a quarter fits one call of a lent GPU machine.
  "conformance-1|env DSINFER_CONFORMANCE_SHARD=0/4 $build/src/backend/cuda/cuda_conformance_test --gtest_filter=*RealDeepSeekShapes*"
  "conformance-2|env DSINFER_CONFORMANCE_SHARD=1/4 $build/src/backend/cuda/cuda_conformance_test --gtest_filter=*RealDeepSeekShapes*"
  "conformance-3|env DSINFER_CONFORMANCE_SHARD=2/4 $build/src/backend/cuda/cuda_conformance_test --gtest_filter=*RealDeepSeekShapes*"
  "conformance-4|env DSINFER_CONFORMANCE_SHARD=3/4 $build/src/backend/cuda/cuda_conformance_test --gtest_filter=*RealDeepSeekShapes*"
  # Every tiling of our FP8 wgmma GEMMs (swap-AB and tiled) against the fallback GEMM, M 1 to 4096.
  "fp8-kernels|$build/src/backend/cuda/fp8_gemm_wgmma_check --no-bench"
  # The BF16 MLA decode kernels against each other (kWgmma and kTensorCore against kSimple): uniform,
  # 16-head, flat-softmax, ragged split and unsplit batches, draft verification, and graph replay.
  "mla-kernels|$build/src/backend/cuda/mla_decode_check --no-bench"
  # The FP8 KV cache's MLA decode (FP8 wgmma for Q K^T and P V) against an f64 reference at 1K, 8K,
  # 32K and 128K of context (the error bounded and not growing with it), ragged batches against the
  # generic kernel, and graph replay.
  "fp8-mla|$build/src/backend/cuda/mla_decode_fp8_check"
  # W4A8 experts' int4 kernels against their reference kernel and a float64 host product, graph
  # replay and run-to-run bits (the timings and the 1.4x bar lines are printed without --quick).
  "w4a8-kernels|$build/src/backend/cuda/moe_w4a8_rows_check --quick"
  "conformance-small|$build/src/backend/cuda/cuda_conformance_test --gtest_filter=-*RealDeepSeekShapes*"
  "memcheck|compute-sanitizer --tool memcheck --error-exitcode 1 $build/src/backend/cuda/cuda_conformance_test --gtest_filter=*Small*"
  "models|env DSINFER_TEST_DEVICE=cuda $build/src/model/model_test"
  # Bit-exact batch invariance (a batched request gives exactly its solo tokens) is a CPU property
  # (DESIGN.md, "The device step", item 7): on the GPU a near-tie may resolve differently with
  # another batch. Those tests run on the CPU in `make test` and are left out here.
  "server|env DSINFER_TEST_DEVICE=cuda $build/src/server/server_test --gtest_filter=-$exact"
  # Speculative decoding (MTP drafts) on the bundled model: greedy outputs as without drafts up to a
  # near-tie, drafts accepted, drafting stopped and resumed by load, pages returned (the tests of exact
  # equality are CPU-only).
  "speculative|env DSINFER_TEST_DEVICE=cuda $build/src/runtime/speculative_engine_test --gtest_filter=*Greedy*:*Aborted*:*Relaxed*:*Drafting*"
  # Structured output and logit_bias end to end: the CUDA sampler's masks and biases on the bundled model.
  "structured|env DSINFER_TEST_DEVICE=cuda $build/src/server/server_structured_test"
  # The host KV tier (issue 14): pinned host pages, copies queued on the stream between steps; pages
  # restored on a 5-page pool give the outputs of a 64-page pool's prefix hits (the tests that
  # compare against recomputed prefixes are CPU-only, as batch invariance is).
  "host-kv|env DSINFER_TEST_DEVICE=cuda $build/src/runtime/runtime_test --gtest_filter=TierOnTheModel.ATinyPool*:TierOnTheModel.Layouts*"
  "graphs|$build/src/model/decode_graphs_test"
  # A request's KV pages between a prefill and a decode process on this GPU over UCX (CUDA IPC),
  # every destination page's bytes checked (kv_transfer_bench --check).
  "transfer|$build/bench/kv_transfer_bench --check"
  # Prefill/decode disaggregation end to end on this GPU: router, prefill and decode processes side by
  # side, pages by CUDA IPC (whole, and layer by layer as the device writes each layer), against a
  # server of both phases, and the faults (tests/pd/pd_test.py).
  "pd|python3 tests/pd/pd_test.py --gpu --dsinfer $build/dsinfer --logs $logs/pd"
  "overlap|$build/src/runtime/overlap_executor_test"
)
if [[ " ${GPU_TEST_STEPS:-} " == *" memcheck "* || -z "${GPU_TEST_STEPS:-}" ]] && ! command -v compute-sanitizer >/dev/null; then
  echo "FAIL  memcheck: compute-sanitizer is not installed" | tee "$logs/memcheck.status"
  one_gpu_steps=("${one_gpu_steps[@]/memcheck|*/}")
fi

# The steps over every GPU: every collective over NCCL against LocalCommunicator, one thread per
# GPU (NVLink multicast stays off; the binary sets it too), and the sharded model's layouts, each
# needing tp x dp GPUs: those of more ranks than this machine has are left out (every layout's name
# holds "tp<N>_dp<M>", at its end or before a "_"). Skipped, on purpose, on one GPU.
multi_gpu_steps() {
  local count=${#gpus[@]}
  if ((count < 2)); then
    if selected nccl || selected sharded; then echo "SKIP nccl, sharded: need 2 GPUs"; fi
    return
  fi
  local too_big
  too_big=$(for tp in 1 2 3 4 8; do for dp in 1 2 3 4 8; do
    ((tp * dp > count)) && printf '*tp%d_dp%d:*tp%d_dp%d_*:' "$tp" "$dp" "$tp" "$dp"; done; done)
  selected nccl && run_step nccl env NCCL_NVLS_ENABLE=0 "$build/src/parallel/nccl_communicator_test"
  if selected sharded; then
    echo "sharded: layouts of more than $count ranks left out"
    run_step sharded env NCCL_NVLS_ENABLE=0 DSINFER_TEST_DEVICE=cuda "$build/src/runtime/sharded_model_test" \
      --gtest_filter="-${too_big%:}"
  fi
}

run_one_gpu_step() {  # run_one_gpu_step "NAME|COMMAND" [GPU] (with a GPU: in a subshell of its own)
  local name=${1%%|*} command=${1#*|}
  [[ -z "$name" ]] && return
  selected "$name" || return
  [[ -n "${2:-}" ]] && export CUDA_VISIBLE_DEVICES=$2
  local -
  set -f  # the command's words as written: its gtest filters' stars are not file names
  # shellcheck disable=SC2086
  run_step "$name" $command
}

if ((parallel)); then
  echo "gpu-test: steps side by side on GPUs ${gpus[*]}"
  multi_gpu_steps &
  declare -A busy=()  # GPU -> pid of the step on it
  for step in "${one_gpu_steps[@]}"; do
    name=${step%%|*}
    [[ -z "$name" ]] && continue
    selected "$name" || continue
    gpu=""
    while [[ -z "$gpu" ]]; do
      for g in "${gpus[@]}"; do
        if [[ -z "${busy[$g]:-}" ]] || ! kill -0 "${busy[$g]}" 2>/dev/null; then gpu=$g; break; fi
      done
      [[ -z "$gpu" ]] && sleep 1
    done
    run_one_gpu_step "$step" "$gpu" &
    busy[$gpu]=$!
  done
  wait
else
  for step in "${one_gpu_steps[@]}"; do run_one_gpu_step "$step"; done
  multi_gpu_steps
fi

failed=()
for status in "$logs"/*.status; do
  [[ -e "$status" ]] || continue
  grep -q '^FAIL' "$status" && failed+=("$(basename "$status" .status)")
done
if ((${#failed[@]})); then
  echo "gpu-test: ${#failed[@]} failed: ${failed[*]}"
  exit 1
fi
echo "gpu-test: all passed"
