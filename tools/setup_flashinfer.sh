#!/usr/bin/env bash
# Unpacks FlashInfer's header-only CUDA sources, and the CUTLASS/CuTe headers its wheel carries, from
# the pinned PyPI wheel into the git-ignored .deps/flashinfer/ for kernels_bench's FlashInfer anchor
# (bench/gpu/flashinfer_prefill.cu: FlashInfer's sm90 ragged prefill timed beside ours, issue 8).
# Nothing of FlashInfer is vendored or copied into the tree; no Python package is installed.
#
#   .deps/flashinfer/include/flashinfer/   FlashInfer's include/ (the wheel's flashinfer/data/include)
#   .deps/flashinfer/cutlass/include/      cute/ and cutlass/ (the wheel's flashinfer/data/cutlass/include,
#                                          CUTLASS 4.5 headers, so no separate nvidia-cutlass wheel)
#   .deps/flashinfer/cutlass/tools/util/include/   cutlass/util/ (FlashInfer's cutlass_utils.cuh includes it)
#   .deps/flashinfer/cccl/{cub,libcudacxx/include,thrust}   the CCCL FlashInfer is built with (newer than
#                                          CUDA 13.0's: fastdiv.cuh needs cuda::fast_mod_div); FlashInfer's
#                                          own build puts these before the toolkit's, and so does ours
#   .deps/flashinfer/.dsinfer-stamp        "VERSION SHA256" of the unpacked wheel
#   .deps/wheels/                          the downloaded wheel (62 MB), checked against FLASHINFER_SHA256
#
# Idempotent: does nothing when the stamp names this version and hash. A wheel already in
# $FLASHINFER_WHEEL_CACHE (default /tmp/fi) or .deps/wheels is used instead of downloading.
# Not part of `make serve` or tools/setup.sh: only the GPU benchmark build needs it. Downloads with
# pip (`pip download`, no install); needs python3 -m pip, unzip, sha256sum.
# bench/gpu/CMakeLists.txt finds the result (or -DDSINFER_FLASHINFER_INCLUDE=DIR pointing at a
# folder laid out like .deps/flashinfer).
set -euo pipefail

FLASHINFER_VERSION=0.7.2.post1
FLASHINFER_WHEEL=flashinfer_python-${FLASHINFER_VERSION}-py3-none-any.whl
FLASHINFER_SHA256=bfdc18b9e1e4d8d0730fe4343dc0e284cd0c160086de80f99888bc4867922d49

root=$(cd "$(dirname "$0")/.." && pwd)
deps=$root/.deps
dir=$deps/flashinfer
wheels=$deps/wheels
stamp=$dir/.dsinfer-stamp
cache=${FLASHINFER_WHEEL_CACHE:-/tmp/fi}

say() { echo "setup_flashinfer: $*"; }
fail() { echo "setup_flashinfer: error: $*" >&2; exit 1; }

if [[ -f $stamp && $(cat "$stamp") == "$FLASHINFER_VERSION $FLASHINFER_SHA256" &&
      -f $dir/include/flashinfer/attention/hopper/prefill_sm90.cuh && -d $dir/cutlass/include/cute &&
      -d $dir/cutlass/tools/util/include/cutlass/util && -d $dir/cccl/libcudacxx/include/cuda ]]; then
  say "FlashInfer $FLASHINFER_VERSION headers already in ${dir#"$root"/}"
  exit 0
fi

# shellcheck source=tools/pinned_wheel.sh
source "$root/tools/pinned_wheel.sh"
need_tools unzip sha256sum python3
pinned_wheel "flashinfer-python==$FLASHINFER_VERSION" "$FLASHINFER_WHEEL" "$FLASHINFER_SHA256" "$wheels" \
  "$cache/$FLASHINFER_WHEEL"

# Only the header folders (about 60 MB), unpacked into a scratch folder first so that
# .deps/flashinfer only ever appears whole.
scratch=$deps/.flashinfer-unpack
rm -rf "$scratch" "$dir"
mkdir -p "$scratch"
unzip -q "$wheel" 'flashinfer/data/include/*' 'flashinfer/data/cutlass/include/*' \
  'flashinfer/data/cutlass/tools/util/include/*' 'flashinfer/data/cccl/cub/cub/*' \
  'flashinfer/data/cccl/libcudacxx/include/*' 'flashinfer/data/cccl/thrust/thrust/*' -d "$scratch" ||
  fail "unpacking the header folders of $wheel failed"
mkdir -p "$dir/cutlass/tools/util" "$dir/cccl/cub" "$dir/cccl/libcudacxx" "$dir/cccl/thrust"
mv "$scratch/flashinfer/data/include" "$dir/include"
mv "$scratch/flashinfer/data/cutlass/include" "$dir/cutlass/include"
mv "$scratch/flashinfer/data/cutlass/tools/util/include" "$dir/cutlass/tools/util/include"
mv "$scratch/flashinfer/data/cccl/cub/cub" "$dir/cccl/cub/cub"
mv "$scratch/flashinfer/data/cccl/libcudacxx/include" "$dir/cccl/libcudacxx/include"
mv "$scratch/flashinfer/data/cccl/thrust/thrust" "$dir/cccl/thrust/thrust"
rm -rf "$scratch"
echo "$FLASHINFER_VERSION $FLASHINFER_SHA256" >"$stamp"
say "FlashInfer $FLASHINFER_VERSION headers in ${dir#"$root"/} ($(du -sh "$dir" | cut -f1))"
