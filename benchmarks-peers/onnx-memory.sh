#!/usr/bin/env bash
# What one loaded ONNX model costs in resident memory under `backplane serve`, with ONNX Runtime's
# memory settings as Triton's onnxruntime backend names them (docs/backends/cpu.md), and what each
# setting costs in speed. For every variant: a server in explicit mode, its VmRSS (the JVM; the CPU
# backend runs in-process) before the load, after the load (model_warmup included), after 1 caller
# and after 8 callers (the dynamic batcher's batches: the arena's high-water mark); the same with two
# instances, whose difference is what one more instance adds. Prints a markdown table. One more
# variant turns the intra-op pool's spinning off: a speed question (whether ORT's threads spinning
# after each run take the cores from the REST frontend's event loops), in the same table.
#
#   benchmarks-peers/onnx-memory.sh                    # the zoo's resnet50 (target/zoo), every variant
#   benchmarks-peers/onnx-memory.sh --model bert --seconds 5
#
# Needs the zoo (benchmarks/zoo/make_zoo.py --out target/zoo) and the dist (built when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
zoo=target/zoo
model=resnet50
seconds=5
port=${PORT:-18100}
while [ $# -gt 0 ]; do
  case "$1" in
    --zoo) zoo=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    *) echo "onnx-memory.sh: unknown option $1 (use --zoo DIR, --model NAME, --seconds S)" >&2; exit 2 ;;
  esac
done
[ -f "$zoo/$model/config.pbtxt" ] || { echo "onnx-memory.sh: no $zoo/$model; make it with benchmarks/zoo/make_zoo.py --out $zoo" >&2; exit 1; }
bin=dist/target/backplane/bin/backplane
[ -x "$bin" ] || ./mvnw -q -B -pl dist -am -DskipTests package
file_kb=$(( $(stat -c %s "$zoo/$model/1/model.onnx") / 1024 ))
work=target/onnx-memory
rm -rf "$work"

# name|parameters (key=value,...)
variants=(
  "defaults|"
  "no prepacking|session.disable_prepacking=1"
  "arena off|enable_mem_arena=0"
  "no prepacking, arena and pattern off|session.disable_prepacking=1,enable_mem_arena=0,enable_mem_pattern=0"
  "no intra-op spinning (speed, not memory)|session.intra_op.allow_spinning=0"
)

# One column of `backplane bench --format csv`'s first level.
column_of() { python3 -c 'import csv, io, sys; print(next(csv.DictReader(io.StringIO(sys.argv[2])))[sys.argv[1]])' "$1" "$2"; }

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# Prints "rss_before rss_loaded rss_c1 rss_c8 p50_c1_us rps_c8" for one variant and instance count.
measure() {
  local dir=$1 pid before loaded c1 c8 out
  "$bin" serve --model-repository "$dir" --allow-links-outside-repository --model-control-mode explicit --http-port "$port" --grpc-port -1 --metrics-port -1 --openai-port -1 \
    >"$dir.log" 2>&1 &
  pid=$!
  until curl -fs -o /dev/null "http://127.0.0.1:$port/v2/health/live"; do
    kill -0 "$pid" 2>/dev/null || { echo "serve exited; log: $dir.log" >&2; exit 1; }
    sleep 0.05
  done
  before=$(rss_kb "$pid")
  curl -fs -X POST -o /dev/null "http://127.0.0.1:$port/v2/repository/models/$model/load" || { echo "load failed; log: $dir.log" >&2; kill "$pid"; exit 1; }
  loaded=$(rss_kb "$pid")
  out=$("$bin" bench --url "http://127.0.0.1:$port" --model "$model" --concurrency 1 --duration-s "$seconds" --warmup-s 1 --format csv)
  c1=$(rss_kb "$pid")
  local p50 rps
  p50=$(column_of p50_us "$out")
  out=$("$bin" bench --url "http://127.0.0.1:$port" --model "$model" --concurrency 8 --duration-s "$seconds" --warmup-s 1 --format csv)
  c8=$(rss_kb "$pid")
  rps=$(column_of throughput_per_s "$out")
  kill -TERM "$pid"; wait "$pid" || true
  echo "$before $loaded $c1 $c8 $p50 $rps"
}

mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
x() { awk -v k="$1" -v f="$file_kb" 'BEGIN { printf "%.2f×", k / f }'; }

echo "$model: model.onnx $(mib "$file_kb") MiB; load average $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $seconds s per level"
echo
echo "| variant | RSS MiB before → loaded → c1 → c8 | load Δ (× file) | after c8 Δ (× file) | 2nd instance Δ after c8 (× file) | c1 p50 ms | c8 req/s |"
echo "|---|---|---|---|---|---|---|"
for v in "${variants[@]}"; do
  name=${v%%|*}
  params=${v#*|}
  res=()
  for count in 1 2; do
    dir="$work/$(echo "$name" | tr -c 'a-z0-9\n' '_')_$count"
    mkdir -p "$dir/$model/1"
    ln -s "$(realpath "$zoo/$model/1/model.onnx")" "$dir/$model/1/model.onnx"
    sed "s/count: 1 kind: KIND_CPU/count: $count kind: KIND_CPU/" "$zoo/$model/config.pbtxt" >"$dir/$model/config.pbtxt"
    if [ -n "$params" ]; then
      IFS=, read -ra kv <<<"$params"
      for p in "${kv[@]}"; do
        printf 'parameters { key: "%s" value: { string_value: "%s" } }\n' "${p%%=*}" "${p#*=}" >>"$dir/$model/config.pbtxt"
      done
    fi
    res+=("$(measure "$dir")")
  done
  read -r b1 l1 c11 c81 p501 rps1 <<<"${res[0]}"
  read -r _ _ _ c82 _ _ <<<"${res[1]}"
  echo "| $name | $(mib "$b1") → $(mib "$l1") → $(mib "$c11") → $(mib "$c81") | +$(mib $((l1 - b1))) ($(x $((l1 - b1)))) | +$(mib $((c81 - b1))) ($(x $((c81 - b1)))) | +$(mib $((c82 - c81))) ($(x $((c82 - c81)))) | $(awk -v u="$p501" 'BEGIN { printf "%.1f", u / 1000 }') | $rps1 |"
done
echo
echo "command: benchmarks-peers/onnx-memory.sh --model $model --seconds $seconds; load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
