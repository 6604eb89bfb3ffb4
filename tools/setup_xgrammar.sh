#!/usr/bin/env bash
# Builds xgrammar's C++ core (structured output: grammars, token masks) from its pinned PyPI sdist
# into .deps/xgrammar-VERSION/ (git-ignored): a static library and its headers, no Python.
# cmake/xgrammar.cmake reads XGRAMMAR_VERSION below and imports the result as dsinfer::xgrammar.
#
#   .deps/xgrammar-VERSION.tar.gz   the sdist, checked against XGRAMMAR_SHA256
#   .deps/xgrammar-VERSION/src      the sdist unpacked (its sources are built, never copied into ours)
#   .deps/xgrammar-VERSION/build    CMake + Ninja build tree
#   .deps/xgrammar-VERSION/install  lib/libxgrammar.a, include/xgrammar, include/dlpack
#
# Idempotent: does nothing when the install's stamp names this version and hash. XGRAMMAR_JOBS sets
# the build's parallelism (default: nproc). Needs curl, tar, sha256sum, cmake, ninja, a C++17 compiler.
set -euo pipefail

XGRAMMAR_VERSION=0.2.8
XGRAMMAR_SHA256=8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80
XGRAMMAR_URL=https://files.pythonhosted.org/packages/03/0f/29f521535729be740779c2c98b630ef6607cf28be9b669895dd2b821ff63/xgrammar-${XGRAMMAR_VERSION}.tar.gz

root=$(cd "$(dirname "$0")/.." && pwd)
deps=$root/.deps
dir=$deps/xgrammar-$XGRAMMAR_VERSION
archive=$deps/xgrammar-$XGRAMMAR_VERSION.tar.gz
stamp=$dir/install/.dsinfer-stamp
jobs=${XGRAMMAR_JOBS:-$(nproc)}

say() { echo "setup_xgrammar: $*"; }
fail() { echo "setup_xgrammar: error: $*" >&2; exit 1; }

if [[ -f $stamp && $(cat "$stamp") == "$XGRAMMAR_VERSION $XGRAMMAR_SHA256" &&
      -f $dir/install/lib/libxgrammar.a ]]; then
  say "xgrammar $XGRAMMAR_VERSION already built in ${dir#"$root"/}/install"
  exit 0
fi

for tool in curl tar sha256sum cmake ninja; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (tools/setup.sh installs it)"
done

mkdir -p "$deps"
if [[ ! -f $archive ]] || ! echo "$XGRAMMAR_SHA256  $archive" | sha256sum --check --status; then
  say "downloading $XGRAMMAR_URL"
  curl --fail --location --silent --show-error --retry 3 -o "$archive.partial" "$XGRAMMAR_URL" ||
    fail "could not download the xgrammar $XGRAMMAR_VERSION sdist from PyPI"
  actual=$(sha256sum "$archive.partial" | cut -d' ' -f1)
  if [[ $actual != "$XGRAMMAR_SHA256" ]]; then
    rm -f "$archive.partial"
    fail "sha256 mismatch for xgrammar-$XGRAMMAR_VERSION.tar.gz: got $actual, pinned $XGRAMMAR_SHA256"
  fi
  mv "$archive.partial" "$archive"
fi
say "sha256 $XGRAMMAR_SHA256 verified"

# Unpack into a scratch folder first, so that src/ only ever appears whole.
rm -rf "$dir" "$deps/.unpack"
mkdir -p "$deps/.unpack" "$dir"
say "unpacking into ${dir#"$root"/}/src"
tar -xzf "$archive" -C "$deps/.unpack"
mv "$deps/.unpack/xgrammar-$XGRAMMAR_VERSION" "$dir/src"
rmdir "$deps/.unpack"

# xgrammar's CMakeLists reads config.cmake from the build folder before its own cmake/config.cmake
# (which turns the Python bindings on). Ours: the static C++ library alone.
mkdir -p "$dir/build"
cat >"$dir/build/config.cmake" <<'EOF'
set(XGRAMMAR_BUILD_PYTHON_BINDINGS OFF)
set(XGRAMMAR_BUILD_CXX_TESTS OFF)
set(XGRAMMAR_ENABLE_CPPTRACE OFF)
set(XGRAMMAR_ENABLE_COVERAGE OFF)
set(XGRAMMAR_ENABLE_INTERNAL_CHECK OFF)
EOF

# Its flags end in -flto=auto and -Werror; ours come after them and win. Without LTO, linking a
# dsinfer binary stays an ordinary link; a newer compiler's new warning must not fail our setup.
say "configuring (CMake + Ninja, Release, no Python bindings)"
cmake -S "$dir/src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$dir/install" -DCMAKE_CXX_FLAGS="-fno-lto -Wno-error" >"$dir/build/configure.log" 2>&1 ||
  { tail -n 30 "$dir/build/configure.log" >&2; fail "configuring xgrammar failed (log: ${dir#"$root"/}/build/configure.log)"; }

say "building libxgrammar.a with $jobs jobs (a few minutes on 2 cores)"
start=$SECONDS
cmake --build "$dir/build" -j "$jobs" --target xgrammar >"$dir/build/build.log" 2>&1 ||
  { tail -n 40 "$dir/build/build.log" >&2; fail "building xgrammar failed (log: ${dir#"$root"/}/build/build.log)"; }
cmake --install "$dir/build" >/dev/null ||
  fail "installing xgrammar into ${dir#"$root"/}/install failed"
echo "$XGRAMMAR_VERSION $XGRAMMAR_SHA256" >"$stamp"
say "built xgrammar $XGRAMMAR_VERSION in $((SECONDS - start)) s: ${dir#"$root"/}/install/lib/libxgrammar.a"
