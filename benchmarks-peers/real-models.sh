#!/usr/bin/env bash
# Issue 25's table in one command: the zoo's ResNet-50 and BERT-base served by Backplane and its
# peers, alternately round by round (RealModelsBenchmark; docs/benchmarks.md says what it measures);
# issue 36's TorchScript traces of both (resnet50_pt, bert_pt) served by the pytorch backend beside
# DJL's PyTorch engine called directly (docs/backends/pytorch.md).
# Makes what is missing first: the model environment (tools/model-env.sh --peers), the zoo
# (benchmarks/zoo/make_zoo.py; up to date is a no-op) and benchmarks-peers/target/peers.jar (built
# when missing or older than any module's src/main). Then runs the benchmark with the options given.
#
#   benchmarks-peers/real-models.sh                       # the full run (ResNet-50, BERT-base, every peer)
#   benchmarks-peers/real-models.sh --size small --seconds 1 --warmup 0.5 --rounds 1   # a smoke run
#   benchmarks-peers/real-models.sh --models resnet50 --peers ort,backplane,rest,djl-ort --out /tmp/resnet.md
#   benchmarks-peers/real-models.sh --models resnet50_pt,bert_pt --peers pytorch-rest,djl-pt
#
# Options (RealModelsBenchmark's): --size full|small, --models resnet50,bert,bert_torch,resnet50_pt,bert_pt,
# --peers ort,backplane,rest,djl-ort,python,python-rest,djl-python,flask,ray,djl-pt,pytorch-rest, --rounds N (2),
# --seconds S (2), --warmup S (0.5), --threads N (cores, at most 4), --seq N (32), --dist DIR, --out FILE;
# --zoo DIR (default target/zoo), --python PATH and --dist DIR (default dist/target/backplane, built
# when missing or stale) are set here.
set -euo pipefail
cd "$(dirname "$0")/.."
size=full
zoo=target/zoo
dist=dist/target/backplane
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    --size) size=${args[$((i + 1))]} ;;
    --zoo) zoo=${args[$((i + 1))]} ;;
    --dist) dist= ;;
  esac
done
PY=$(tools/model-env.sh --peers | tail -n 1)
"$PY" benchmarks/zoo/make_zoo.py --out "$zoo" --size "$size" --models resnet50,bert,bert_torch,resnet50_pt,bert_pt
jar=benchmarks-peers/target/peers.jar
if [ ! -f "$jar" ] || [ -n "$(find . -path ./target -prune -o \( -path '*/src/main/*' -o -name pom.xml \) -newer "$jar" -print -quit)" ]; then
  echo "building $jar ..." >&2
  ./mvnw -q -B -Ppeers -pl benchmarks-peers -am -DskipTests package
fi
# `backplane serve` runs as its users run it, from the dist (peers.jar pins DJL's Netty 4.1, the
# frontends need the parent's 4.2); --dist DIR chooses another.
if [ -n "$dist" ]; then
  if [ ! -x "$dist/bin/backplane" ] || [ -n "$(find . -path ./target -prune -o \( -path '*/src/main/*' -o -name pom.xml \) -newer "$dist/bin/backplane" -print -quit)" ]; then
    echo "building $dist ..." >&2
    ./mvnw -q -B -pl dist -am -DskipTests package
  fi
  set -- --dist "$dist" "$@"
fi
# shellcheck source=../tools/find-jdk.sh
. tools/find-jdk.sh
JDK=$(find_jdk java) || { echo "real-models.sh: no JDK 25 found (set BACKPLANE_JDK)" >&2; exit 1; }
exec "$JDK/bin/java" --enable-native-access=ALL-UNNAMED -cp "$jar" io.backplane.benchmarks.peers.RealModelsBenchmark \
  --zoo "$zoo" --python "$PY" "$@"
