#!/usr/bin/env bash
# Packs the binaries scripts/gpu-test.sh runs, built on another machine, for a GPU machine that has
# no build of its own (a lent device whose transfers are small):
#   scripts/pack-gpu-tests.sh BUILD_DIR OUT.tar.xz [STEP...]
# STEPs are gpu-test.sh's step names (default: every step); the binaries come stripped, at their
# paths under BUILD_DIR, with the shared libraries a stock machine may lack under lib/: the C++
# runtime and PCRE2 of this machine, and UCX with its transport modules (lib/ucx/), all stripped.
# The binaries' fat binaries repeat from one to the next, so the archive is xz with a dictionary as
# large as its input: dsinfer and one test pack to about 6.6 MB, all 15 binaries (309 MiB) to about
# 11 MB (a CUDA Release build for sm_90a). Three quarters of each binary are its kernels; a build
# configured with -DDSINFER_CUDA_LINEINFO=OFF (the same machine code, no line tables) has them 2.5x
# smaller. On the GPU machine:
#   mkdir -p b && tar -xJf OUT.tar.xz -C b
#   LD_LIBRARY_PATH=$PWD/b/lib:<the directories of libnccl.so.2 and libcublasLt.so.13> \
#     GPU_TEST_STEPS="STEP..." scripts/gpu-test.sh b
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# < 2)); then
  echo "usage: scripts/pack-gpu-tests.sh BUILD_DIR OUT.tar.xz [STEP...]" >&2
  exit 2
fi
build=$1 out=$2
shift 2

# Each step's binaries, from gpu-test.sh's own step list ("NAME|COMMAND" lines), and the steps over
# every GPU (nccl, sharded).
declare -A step_binaries=()
while IFS= read -r line; do
  name=${line#*\"}
  name=${name%%|*}
  # shellcheck disable=SC2016 # the literal text $build/ that gpu-test.sh's commands start with
  step_binaries[$name]=$(grep -o '\$build/[A-Za-z0-9_/.-]*' <<<"$line" | sed 's|\$build/||' | tr '\n' ' ')
done < <(grep -E '^  "[a-z0-9-]+\|' scripts/gpu-test.sh)
step_binaries[nccl]=src/parallel/nccl_communicator_test
step_binaries[sharded]=src/runtime/sharded_model_test

steps=("$@")
((${#steps[@]})) || steps=("${!step_binaries[@]}")
declare -A wanted=()
for step in "${steps[@]}"; do
  [[ -n "${step_binaries[$step]+set}" ]] || { echo "pack-gpu-tests: no step '$step' in scripts/gpu-test.sh" >&2; exit 2; }
  for binary in ${step_binaries[$step]}; do wanted[$binary]=1; done
done

if grep -q '^DSINFER_CUDA_LINEINFO:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "pack-gpu-tests: $build has line tables in its kernels (-DDSINFER_CUDA_LINEINFO=OFF packs smaller)" >&2
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib/ucx"
for binary in "${!wanted[@]}"; do
  [[ -x "$build/$binary" ]] || { echo "pack-gpu-tests: $build/$binary is not built" >&2; exit 1; }
  mkdir -p "$stage/$(dirname "$binary")"
  strip -o "$stage/$binary" "$build/$binary"
  # The libraries a stock machine may lack; the CUDA libraries (cuBLASLt, NCCL) come with the GPU's.
  ldd "$build/$binary" | awk '/=> \// {print $3}' | grep -E 'libstdc\+\+|libpcre2|libuc[mpst]' |
    while read -r lib; do cp -n "$(readlink -f "$lib")" "$stage/lib/$(basename "$lib")"; done
done
# UCX loads its transports (CUDA IPC and copy, shared memory) as modules from lib/ucx beside libucs.
if compgen -G "$stage/lib/libucs.so*" >/dev/null; then
  ucs_dir=$(dirname "$(ldd "$build/dsinfer" | awk '/libucs.so/ {print $3}')")
  cp -nP "$ucs_dir"/ucx/libuct_cuda.so* "$ucs_dir"/ucx/libucm_cuda.so* "$ucs_dir"/ucx/libuct_cma.so* \
    "$stage/lib/ucx/" 2>/dev/null || true
  cp -nP "$ucs_dir"/libucs_signal.so* "$stage/lib/" 2>/dev/null || true
fi
find "$stage/lib" -type f -name '*.so*' -exec strip --strip-unneeded {} +  # UCX's come with their symbols

bytes=$(du -sb "$stage" | cut -f1)
dict_mib=$(((bytes >> 20) + 8))
((dict_mib > 1536)) && dict_mib=1536
tar -cf - -C "$stage" . | xz -9 --lzma2=dict=${dict_mib}MiB -T1 >"$out"
echo "pack-gpu-tests: ${#wanted[@]} binaries for ${steps[*]}: $((bytes >> 20)) MiB, $(($(stat -c %s "$out") >> 10)) KiB in $out"
