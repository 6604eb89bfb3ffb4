#!/usr/bin/env bash
# Installs what building and testing dsinfer needs, skipping what is already there (idempotent).
# Debian packages, then pinned PyPI sources built into the git-ignored .deps/ (xgrammar's C++ core).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config   # the build
  libpcre2-dev                                   # tokenizer regexes (Unicode properties, JIT)
  libgtest-dev libgmock-dev                      # unit tests
  clang libclang-rt-14-dev                       # libFuzzer targets (make fuzz)
  libboost-dev                                   # HTTP server and client (Boost.Beast, header-only)
  xz-utils                                       # xz: the build decompresses tests/fixtures/*.xz
  curl ca-certificates                           # pinned PyPI sources (tools/setup_xgrammar.sh)
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
