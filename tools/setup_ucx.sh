#!/usr/bin/env bash
# UCX for the KV transfer of prefill/decode disaggregation (src/transfer/, issue 14): the pinned PyPI
# wheel libucx-cu13 (UCX's own build: TCP, shared memory, CMA, CUDA copy and CUDA IPC), unpacked
# into the git-ignored .deps/ucx-VERSION/ (include/ and lib/, lib/ucx/ its transport modules; the
# libraries find each other through $ORIGIN). Idempotent: a stamp holds the version and the wheel's
# sha256 (tools/pinned_wheel.sh). Needs python3 -m pip (`pip download`, no install), unzip and sha256sum.
# cmake/ucx.cmake reads UCX_VERSION from here.
set -euo pipefail

UCX_VERSION=1.22.0
UCX_WHEEL=libucx_cu13-${UCX_VERSION}-py3-none-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl
UCX_SHA256=c6e0aaa82dc6e49dc3ddaac465b530e014f48b6c1c6b5ae74fbdd199d824351b

root=$(cd "$(dirname "$0")/.." && pwd)
deps=$root/.deps
dir=$deps/ucx-$UCX_VERSION
wheels=$deps/wheels
stamp=$dir/.dsinfer-stamp

say() { echo "setup_ucx: $*"; }
fail() { echo "setup_ucx: error: $*" >&2; exit 1; }

if [[ -f $stamp && $(cat "$stamp") == "$UCX_VERSION $UCX_SHA256" && -f $dir/include/ucp/api/ucp.h &&
      -f $dir/lib/libucp.so.0 ]]; then
  say "UCX $UCX_VERSION already in ${dir#"$root"/}"
  exit 0
fi

# shellcheck source=tools/pinned_wheel.sh
source "$root/tools/pinned_wheel.sh"
need_tools unzip sha256sum python3
pinned_wheel "libucx-cu13==$UCX_VERSION" "$UCX_WHEEL" "$UCX_SHA256" "$wheels" -- --platform manylinux_2_28_x86_64

# Headers and shared libraries only, unpacked into a scratch folder first so that the folder only
# ever appears whole.
scratch=$deps/.ucx-unpack
rm -rf "$scratch" "$dir"
mkdir -p "$scratch"
unzip -q "$wheel" 'libucx/include/*' 'libucx/lib/*.so*' -d "$scratch" ||
  fail "unpacking $wheel failed"
mkdir -p "$dir"
mv "$scratch/libucx/include" "$dir/include"
mv "$scratch/libucx/lib" "$dir/lib"
rm -rf "$scratch"
echo "$UCX_VERSION $UCX_SHA256" >"$stamp"
say "UCX $UCX_VERSION in ${dir#"$root"/} ($(du -sh "$dir" | cut -f1))"
