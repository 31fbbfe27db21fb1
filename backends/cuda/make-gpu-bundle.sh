#!/usr/bin/env bash
# Builds backends/cuda/gpu-bundle/: everything the GPU self-test needs on a machine that has an
# NVIDIA driver and nothing else (no JDK, no Maven):
#   runtime/   a jlink-ed Java 25 runtime (the modules jdeps finds the jars need)
#   lib/       the backend's jars (backplane-spi, backplane-backend-cuda), the core it is served by
#              (backplane-core, backplane-protocol and their dependencies, backplane-testkit for the
#              ModelHarness), the
#              module's test classes (GpuSelfTest lives there), slf4j-simple
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
# GpuSelfTest serves the model through the real core (BackplaneHost), so the bundle carries the
# core and the testkit besides the backend; the backend itself still depends on the SPI alone.
# copy-dependencies runs in every reactor module: the union of their runtime dependencies.
./mvnw -q -B -pl backends/cuda -am package dependency:copy-dependencies -DskipTests -DincludeScope=runtime \
  -DexcludeGroupIds=io.backplane,org.junit.jupiter,org.junit.platform,org.opentest4j,org.apiguardian -DoutputDirectory="$bundle/lib"
cp "$root"/spi/target/backplane-spi-*.jar "$root"/protocol/target/backplane-protocol-*.jar "$root"/core/target/backplane-core-*.jar \
  "$root"/testkit/target/backplane-testkit-*.jar \
  "$module"/target/backplane-backend-cuda-*.jar "$bundle/lib/"
rm -f "$bundle"/lib/*-tests.jar "$bundle"/lib/*-sources.jar
"$jdk/bin/jar" --create --file "$bundle/lib/backplane-backend-cuda-gpu-self-test.jar" -C "$module/target/test-classes" .
./mvnw -q -B -N dependency:copy -Dartifact="org.slf4j:slf4j-simple:$slf4j" -DoutputDirectory="$bundle/lib"

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
