#!/usr/bin/env bash
# Time from launching `backplane serve` to its first 200 on /v2/health/ready (every model loaded),
# a few runs; prints one figure (ms) per run. Noisy on a shared machine: compare runs made together.
#   tools/time-to-ready.sh [runs] [-- extra serve options]
# Environment: BACKPLANE (default dist/target/backplane/bin/backplane), PORT (default 18000),
# JAVA_OPTS as for bin/backplane.
set -euo pipefail
runs=${1:-5}; shift || true
[ "${1:-}" = "--" ] && shift
bin=${BACKPLANE:-dist/target/backplane/bin/backplane}
port=${PORT:-18000}
for _ in $(seq "$runs"); do
  start=$(date +%s%N)
  "$bin" serve --http-port="$port" --grpc-port=-1 --metrics-port=-1 --openai-port=-1 "$@" >/tmp/time-to-ready.$$.log 2>&1 &
  pid=$!
  until curl -fs -o /dev/null "http://127.0.0.1:$port/v2/health/ready"; do
    if ! kill -0 "$pid" 2>/dev/null; then echo "serve exited; log: /tmp/time-to-ready.$$.log" >&2; exit 1; fi
    sleep 0.01
  done
  echo $(( ($(date +%s%N) - start) / 1000000 ))
  kill -TERM "$pid"; wait "$pid" || true
done
