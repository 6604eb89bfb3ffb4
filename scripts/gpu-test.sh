#!/usr/bin/env bash
# The GPU tests, in one command, on a machine with an H100 or H200 (DESIGN.md: "GPU tests run on a
# GPU machine through one script"). `make test` runs everything that needs no GPU; this runs the rest:
#   1. the conformance harness: every CUDA op against the CPU op at real DeepSeek-V3 shapes, with
#      the fast kernels and with the reference kernels;
#   2. the fixture models (bf16, FP8, V2-Lite-like) on the GPU against Hugging Face's logits;
#   3. the engine and the server end to end with --device cuda on the bundled model;
#   4. compute-sanitizer memcheck over the conformance harness.
# Every step fails loudly without a GPU. Usage: scripts/gpu-test.sh [BUILD_DIR] (default: build);
# logs go to $GPU_TEST_LOGS (default: BUILD_DIR/gpu-test-logs).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
logs=${GPU_TEST_LOGS:-$build/gpu-test-logs}
mkdir -p "$logs"
export DSINFER_SOURCE_DIR=$PWD

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || { echo "gpu-test: no GPU"; exit 1; }

failed=()
step() {  # step NAME COMMAND...: runs it, keeps its log, records a failure
  local name=$1
  shift
  local start=$SECONDS
  if "$@" >"$logs/$name.log" 2>&1; then
    echo "PASS  $name ($((SECONDS - start)) s)"
  else
    echo "FAIL  $name ($((SECONDS - start)) s): see $logs/$name.log"
    tail -n 30 "$logs/$name.log"
    failed+=("$name")
  fi
}

step conformance "$build/src/backend/cuda/cuda_conformance_test"
step models env DSINFER_TEST_DEVICE=cuda "$build/src/model/model_test"
step engine env DSINFER_TEST_DEVICE=cuda "$build/src/runtime/runtime_test" --gtest_filter='RealModel*'
step server env DSINFER_TEST_DEVICE=cuda "$build/src/server/server_test"
if command -v compute-sanitizer >/dev/null; then
  step memcheck compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$build/src/backend/cuda/cuda_conformance_test" --gtest_filter='*Small*'
else
  echo "FAIL  memcheck: compute-sanitizer is not installed"
  failed+=(memcheck)
fi

if ((${#failed[@]})); then
  echo "gpu-test: ${#failed[@]} failed: ${failed[*]}"
  exit 1
fi
echo "gpu-test: all passed"
