# Sourced by the GPU benchmark scripts: one `dsinfer bench serve` run against a `dsinfer serve` of its
# own. Needs $BUILD and $PORT; `server` holds the server's pid while it runs (for the caller's trap).
#   serve_bench RESULT_FILE LOG_FILE "BENCH FLAGS" SERVE FLAGS...
serve_bench() {
  local out=$1 log=$2 bench_flags=$3
  shift 3
  "$BUILD"/dsinfer serve --device cuda --port "$PORT" "$@" > "$log" 2>&1 &
  server=$!
  for _ in $(seq 900); do curl -sf "http://127.0.0.1:$PORT/health" > /dev/null && break; sleep 0.2; done
  # shellcheck disable=SC2086  # the bench flags are words
  "$BUILD"/dsinfer bench serve --base-url "http://127.0.0.1:$PORT" $bench_flags --disable-progress --out "$out"
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=
}
