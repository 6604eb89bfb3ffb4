#!/usr/bin/env bash
# The server's soak (issue 13): `dsinfer serve` on the bundled model (CPU) for 10 minutes under 24
# clients mixing whole and streamed answers, slow readers, disconnects and bad requests; then the
# KV pages in use must be back to 0, no connection left open and /health answering. Writes
# bench/results/soak_cpu.json (RSS at the start, every 30 s and at the end) and exits non-zero on a
# leaked page, RSS growth, a stuck connection or an error (bench/soak.py says what each client does).
# Run from the repository root after `make build`, on an otherwise idle machine:
#   bench/run_soak.sh                 the full run (10 minutes)
#   bench/run_soak.sh --smoke         a few seconds, to check that it works; writes under /tmp
#   bench/run_soak.sh --duration 60   any flag of bench/soak.py (--clients, --num-kv-pages, ...)
set -euo pipefail
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-python3}
if [[ ! -x "$BUILD/dsinfer" ]]; then
  echo "run_soak.sh: $BUILD/dsinfer is missing: run make build (or set BUILD)" >&2
  exit 2
fi
exec "$PYTHON" bench/soak.py --dsinfer "$BUILD/dsinfer" --model models/dsv3-tiny "$@"
