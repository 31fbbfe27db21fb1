#!/usr/bin/env bash
# Generation benchmark: the server-side cost per streamed token and the time from a client's
# disconnect to the model seeing is_cancelled(), through the real server on the OpenAI SSE, Triton
# generate_stream (SSE) and gRPC ModelStreamInfer protocols; a python model (through its stub) and
# the same model in Java (in-process, no stub). Prints two tables; asserts nothing. Not part of the build.
#   tools/genbench.sh [--tokens 500] [--trials 100] [--warmup 100] [--cancel-trials 30] [--cancel-after 3]
#                     [--protocols openai,generate_stream,grpc] [--models gen_py,gen_java] [--cancel true]
# Needs the distribution (./mvnw -q -B -o -pl dist -am -DskipTests package) and python3 with numpy.
# JAVA_OPTS goes to the server (e.g. JFR: JAVA_OPTS=-XX:StartFlightRecording=filename=/tmp/gen.jfr).
# See docs/benchmarks.md, "Generation: per-token cost and cancellation".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=find-jdk.sh
. "$here/find-jdk.sh"
jdk=$(find_jdk javac) || { echo "genbench: no JDK 25+ with javac found; set BACKPLANE_JDK" >&2; exit 2; }
dist=${BACKPLANE_DIST:-$root/dist/target/backplane}
[ -x "$dist/bin/backplane" ] || { echo "genbench: no distribution at $dist; build it: ./mvnw -q -B -o -pl dist -am -DskipTests package" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/genbench-XXXXXX")
trap 'rm -rf "$work"' EXIT
# The Java model: compiled against the distribution's SPI into a --backend-directory of its own.
mkdir -p "$work/classes/META-INF/services" "$work/backends/genjava"
"$jdk/bin/javac" -q 2>/dev/null -d "$work/classes" -cp "$dist/lib/*" "$here/genbench/GenJavaBackend.java" \
  || "$jdk/bin/javac" -d "$work/classes" -cp "$dist/lib/*" "$here/genbench/GenJavaBackend.java"
echo io.backplane.genbench.GenJavaBackend > "$work/classes/META-INF/services/io.backplane.spi.BackendFactory"
"$jdk/bin/jar" --create --file "$work/backends/genjava/genjava.jar" -C "$work/classes" .
# The client's classpath: the distribution's jars without logback (slf4j stays silent in the client).
cp=$(find "$dist/lib" -name '*.jar' ! -name 'logback-*' | sort | tr '\n' ':')
cd "$root"
"$jdk/bin/java" --sun-misc-unsafe-memory-access=allow --enable-native-access=ALL-UNNAMED -Dslf4j.internal.verbosity=ERROR -cp "$cp" "$here/genbench/GenBench.java" --dist "$dist" --backend-directory "$work/backends" "$@"
