#!/usr/bin/env bash
# Generation side by side in one command: the zoo's tiny LLM (benchmarks/zoo/make_llm.py) served by
# Backplane (samples/llm behind the openai frontend), by `transformers serve` as documented and with
# --continuous-batching, and called in-process (the floor), all measured by `backplane bench
# --openai-url` (the floor measures itself the same way); docs/benchmarks.md, "Generation: Backplane
# vs transformers serve", says what it measures. Makes what is missing first: the model environment
# with transformers' serving extra (tools/model-env.sh --serving), the LLM (up to date is a no-op)
# and dist/target/backplane (built when missing or older than any module's src/main). Then runs
# benchmarks-peers/llm/peers.py with the options given.
#
#   benchmarks-peers/llm-peers.sh                                   # the full run (~5 minutes)
#   benchmarks-peers/llm-peers.sh --duration-s 5 --warmup-s 1       # a smoke run
#   benchmarks-peers/llm-peers.sh --peers backplane,floor --out /tmp/llm.md
#
# Options (peers.py's): --peers backplane,ts,ts-cb,floor, --endpoint chat|completions (chat),
# --max-tokens N (64), --concurrency 1,8, --duration-s S (20), --warmup-s S (3, per level),
# --server-warmup-s S (10, each server at the highest concurrency first), --threads N (1,
# OMP_NUM_THREADS of every peer), --prompt TEXT, --out FILE, --keep; --llm DIR (default target/zoo-llm) and
# --dist DIR (default dist/target/backplane, built when missing or stale) are set here.
set -euo pipefail
cd "$(dirname "$0")/.."
llm=target/zoo-llm
dist=dist/target/backplane
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --llm) llm=$2; shift 2 ;;
    --dist) dist=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
PY=$(tools/model-env.sh --serving | tail -n 1)
"$PY" benchmarks/zoo/make_llm.py --out "$llm" >&2
if [ "$dist" = dist/target/backplane ] && { [ ! -x "$dist/bin/backplane" ] || [ -n "$(find . -path ./target -prune -o \( -path '*/src/main/*' -o -name pom.xml \) -newer "$dist/bin/backplane" -print -quit)" ]; }; then
  echo "building $dist ..." >&2
  ./mvnw -q -B -pl dist -am -DskipTests package
  touch "$dist/bin/backplane"  # the build copies it with its source's time: the stamp of this build
fi
exec "$PY" benchmarks-peers/llm/peers.py --python "$PY" --dist "$dist" --llm "$llm" "${args[@]}"
