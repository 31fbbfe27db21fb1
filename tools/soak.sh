#!/usr/bin/env bash
# A thousand reloads (issue 32): loads and unloads a Python and an ONNX model N times in explicit mode
# beside a steady client, and prints what the server holds before and after (RSS, heap after GC,
# threads, descriptors, classes and class loaders, child processes, /dev/shm files, the steady
# model's p50/p99). Exit code 0 when every goal is met, 1 when one is missed. Not part of the build.
#   tools/soak.sh [--cycles=1000] [--warmup=10] [--steady-threads=2] [--nmt] [--help for all options]
# Needs the distribution: ./mvnw -q -B -pl dist -am -DskipTests package. See docs/server.md, "A thousand reloads".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=find-jdk.sh
. "$here/find-jdk.sh"
jdk=$(find_jdk jcmd) || { echo "soak: no JDK 25+ with jcmd found; set BACKPLANE_JDK" >&2; exit 2; }
exec "$jdk/bin/java" "$here/soak/Soak.java" "$@"
