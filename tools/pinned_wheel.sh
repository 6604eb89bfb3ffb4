# shellcheck shell=bash
# Sourced by the setup scripts that unpack a pinned PyPI wheel into .deps/ (setup_flashinfer.sh,
# setup_ucx.sh): the tools they need, and the wheel itself, downloaded with pip unless a verified
# copy is already there, its sha256 checked. The caller defines say() and fail().

# need_tools TOOL...: fails naming the first one missing.
need_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || fail "$tool is not installed (apt-get install $tool)"
  done
}

# pinned_wheel REQUIREMENT FILE SHA256 DIR [CANDIDATE...] [-- PIP_ARGS...]: sets `wheel` to a copy
# of FILE whose sha256 is SHA256: a candidate path or DIR/FILE when one matches, else DIR/FILE as pip
# downloads REQUIREMENT (e.g. libucx-cu13==1.22.0) with PIP_ARGS.
pinned_wheel() {
  local requirement=$1 file=$2 sha256=$3 dir=$4
  shift 4
  local candidates=() pip_args=()
  while (($#)); do
    if [[ $1 == -- ]]; then
      shift
      pip_args=("$@")
      break
    fi
    candidates+=("$1")
    shift
  done
  verified() { [[ -f $1 ]] && echo "$sha256  $1" | sha256sum --check --status; }
  local candidate
  for candidate in "${candidates[@]}" "$dir/$file"; do
    if verified "$candidate"; then
      wheel=$candidate
      say "sha256 $sha256 verified ($wheel)"
      return
    fi
  done
  mkdir -p "$dir"
  rm -f "${dir:?}/$file"
  say "downloading $requirement with pip into $dir"
  python3 -m pip download --quiet --no-deps --only-binary=:all: "${pip_args[@]}" --dest "$dir" "$requirement" ||
    fail "pip could not download $requirement from PyPI"
  [[ -f $dir/$file ]] || fail "pip saved no $file in $dir"
  if ! verified "$dir/$file"; then
    local actual
    actual=$(sha256sum "$dir/$file" | cut -d' ' -f1)
    rm -f "${dir:?}/$file"
    fail "sha256 mismatch for $file: got $actual, pinned $sha256"
  fi
  wheel=$dir/$file
  say "sha256 $sha256 verified ($wheel)"
}
