#!/usr/bin/env bash
# Installs what building and testing dsinfer needs, skipping what is already there (idempotent).
# Debian packages, then pinned PyPI sources built into the git-ignored .deps/ (xgrammar's C++ core),
# then the Python test clients in .deps/venv (the SDK tests and tools/plot_bench.py).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config   # the build
  libpcre2-dev                                   # tokenizer regexes (Unicode properties, JIT)
  libgtest-dev libgmock-dev                      # unit tests
  clang libclang-rt-14-dev                       # libFuzzer targets (make fuzz)
  libboost-dev                                   # HTTP server and client (Boost.Beast, header-only)
  libcli11-dev                                   # command-line flags (CLI11, header-only)
  xz-utils                                       # xz: the build decompresses tests/fixtures/*.xz
  curl ca-certificates                           # pinned PyPI sources (tools/setup_xgrammar.sh)
  python3 python3-venv                           # .deps/venv: the openai SDK and LangChain tests, plots
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

"$(dirname "$0")/setup_xgrammar.sh"
"$(dirname "$0")/setup_ucx.sh"

# The virtualenv of the Python clients: the official openai SDK and LangChain (tests/sdk, run by
# ctest) and matplotlib (tools/plot_bench.py), exactly as pinned, with their hashes, in
# tools/requirements-sdk.txt (made from tools/requirements-sdk.in by pip-compile --generate-hashes).
# Wheels only: nothing compiles here. A failure does not stop the rest of `make deps` (serving needs
# none of it); it says what pip could not get, and the SDK tests then fail asking for `make deps`.
# The stamp holds the requirements' hash and the interpreter's version: when both match, nothing runs.
# DSINFER_SETUP_VENV=0 skips it (a machine that only serves).
setup_venv() {
  local root venv requirements stamp want log
  if [[ ${DSINFER_SETUP_VENV:-1} == 0 ]]; then
    echo "setup: DSINFER_SETUP_VENV=0: not making .deps/venv (the SDK tests and plots need it)"
    return 0
  fi
  root=$(cd "$(dirname "$0")/.." && pwd)
  venv=$root/.deps/venv
  requirements=$root/tools/requirements-sdk.txt
  stamp=$venv/.dsinfer-stamp
  log=$root/.deps/venv-pip.log
  if ! command -v python3 >/dev/null; then
    echo "setup: error: python3 is not installed; the SDK tests and plots need it" >&2
    return 1
  fi
  want="$(sha256sum "$requirements" | cut -d' ' -f1) $(python3 -c 'import sys; print(sys.version.split()[0])')"
  if [[ -x $venv/bin/python && -f $stamp && $(cat "$stamp") == "$want" ]]; then
    echo "setup: Python clients already installed in .deps/venv"
    return 0
  fi
  echo "setup: installing the Python clients (openai, langchain, matplotlib) into .deps/venv"
  mkdir -p "$root/.deps"
  rm -rf "$venv"
  if ! python3 -m venv "$venv" >"$log" 2>&1; then
    cat "$log" >&2
    rm -rf "$venv"
    echo "setup: error: python3 -m venv failed (Debian: apt-get install python3-venv); log: .deps/venv-pip.log" >&2
    return 1
  fi
  # The file pins every package pip needs, with hashes: pip checks each download, and a dependency
  # missing from the file (another Python wanting another package) is an error, not a guess.
  if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --require-hashes \
       --only-binary :all: -r "$requirements" >>"$log" 2>&1; then
    # pip's own ERROR lines name the package (their lists of versions cut short).
    grep -E "^ERROR|THESE PACKAGES DO NOT MATCH" "$log" | head -n 8 | cut -c1-240 >&2 || true
    rm -rf "$venv"
    echo "setup: error: pip could not install tools/requirements-sdk.txt (above: what failed; full log:" \
         ".deps/venv-pip.log). Serving is unaffected; the SDK tests (tests/sdk) and tools/plot_bench.py" \
         "need it: fix what failed, then run \`make deps\` again." >&2
    return 1
  fi
  echo "$want" >"$stamp"
  echo "setup: Python clients installed in .deps/venv"
}

setup_venv || echo "setup: continuing without .deps/venv" >&2
