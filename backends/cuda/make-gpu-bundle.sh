#!/usr/bin/env bash
# Builds backends/cuda/gpu-bundle/: everything the GPU self-test needs on a machine that has an
# NVIDIA driver and nothing else (no JDK, no Maven):
#   runtime/   a jlink-ed Java 25 runtime (java.base only: FFM is in java.base)
#   lib/       the backend's jars (backplane-spi, backplane-backend-cuda, slf4j-api, slf4j-simple)
#   models/    the sample model saxpy_cuda (config.pbtxt, saxpy.ptx)
#   gpu-test.sh, cupy_reference.py
# Run it from anywhere, on a machine with JDK 25 (./mvnw finds it). The bundle is ignored by git.
set -euo pipefail
module=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$module/../.." && pwd)
bundle="$module/gpu-bundle"
jdk=${BACKPLANE_JDK:-/usr/lib/jvm/temurin-25-jdk-amd64}
[ -x "$jdk/bin/jlink" ] || { echo "make-gpu-bundle: no jlink at $jdk/bin/jlink; set BACKPLANE_JDK to a JDK 25" >&2; exit 2; }
slf4j=$(sed -n 's:.*<slf4j.version>\(.*\)</slf4j.version>.*:\1:p' "$root/pom.xml")

rm -rf "$bundle"
mkdir -p "$bundle/lib" "$bundle/models"
cd "$root"
# The backend's runtime class path is the SPI, slf4j-api and the backend (jspecify is annotations
# only); core is a test-only dependency and stays out.
./mvnw -q -B -pl backends/cuda -am package -DskipTests
cp "$root"/spi/target/backplane-spi-*.jar "$module"/target/backplane-backend-cuda-*.jar "$bundle/lib/"
rm -f "$bundle"/lib/*-tests.jar "$bundle"/lib/*-sources.jar
for a in slf4j-api slf4j-simple; do
  ./mvnw -q -B -N dependency:copy -Dartifact="org.slf4j:$a:$slf4j" -DoutputDirectory="$bundle/lib"
done

modules=$("$jdk/bin/jdeps" --multi-release 25 --ignore-missing-deps --print-module-deps "$bundle"/lib/*.jar 2>/dev/null | tail -n1)
echo "make-gpu-bundle: jdeps says the jars need: $modules"
"$jdk/bin/jlink" --add-modules "$modules" --strip-debug --no-man-pages --no-header-files --compress=zip-9 \
  --output "$bundle/runtime"

cp -r "$root/samples/gpu-models/saxpy_cuda" "$bundle/models/"
cp "$module/gpu-test.sh" "$module/cupy_reference.py" "$bundle/"
chmod +x "$bundle/gpu-test.sh"
size=$(du -sm "$bundle" | cut -f1)
echo "make-gpu-bundle: $bundle is ${size} MiB"
if [ "$size" -ge 64 ]; then
  echo "make-gpu-bundle: the bundle is over 64 MiB" >&2
  exit 1
fi
